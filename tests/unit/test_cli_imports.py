"""The CLI imports only the product: `reground ask --help` (and so `reground ask`) loads no measuring or training
code from reground.evals, `reground --help` loads no command module, and the measuring commands stay reachable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reground.cli import build_parser, command_of
from reground.commands import COMMANDS


def imported_modules(*argv: str) -> set[str]:
    """The modules `python -X importtime -m reground ARGV` imports (its stderr lists each one)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "reground", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")} - {
        "package"
    }


def test_ask_help_loads_no_evals_module() -> None:
    assert sorted(m for m in imported_modules("ask", "--help") if m.startswith("reground.evals")) == []
    # The same measurement sees them where a command does load them.
    assert "reground.evals.runs.answers" in imported_modules("eval", "--help")


def test_the_top_level_help_loads_no_command_module() -> None:
    modules = imported_modules("--help")
    assert sorted(m for m in modules if m.startswith("reground.commands.")) == []


def test_eval_and_judge_stay_reachable_and_load_on_demand() -> None:
    """`reground eval answers` parses its full options (loaded when named); other commands list it by name only."""
    args = build_parser(["eval", "answers"]).parse_args(
        ["eval", "answers", "--docs", "d.jsonl", "--cases", "c.jsonl", "--out", "o", "--set", "top_n=2"]
    )
    assert args.func.__module__ == "reground.commands.eval" and args.set == ["top_n=2"]
    listed = build_parser(["ask"])._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(listed) == set(COMMANDS)
    judge = build_parser(["judge", "train"]).parse_args(["judge", "train", "--out", "x"])
    assert judge.action == "train" and judge.options == ["--out", "x"]


@pytest.mark.parametrize(
    ("argv", "command"),
    [(["ask", "q"], "ask"), (["--debug", "eval", "answers"], "eval"), (["--help"], None), ([], None)],
)
def test_the_command_is_the_first_word_that_is_not_an_option(argv: list[str], command: str | None) -> None:
    assert command_of(argv) == command
