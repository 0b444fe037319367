"""The README keeps its promises: it stays short (a line cap, short lines, the results detail in evals/README.md),
names no path outside the repository, shows one port everywhere, and every `reground ...` command it shows parses
with the CLI's own parser (each bash line in full; an inline `reground ...` span's words and flags)."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from reground.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MAX_LINES = 250  # the house target; the lead adds other helpers' lines under it
MAX_PROSE_CHARS = 120  # ruff's line length: the README reads in a terminal and a diff as code does
MAX_TABLE_ROW_CHARS = 240  # a Markdown table row cannot wrap
PORT_DOCS = ("README.md", "docs/deployment.md", "docs/change-it.md", "examples/remote_graph.py")


def readme_problems(text: str) -> list[str]:
    """'line N: why' for every way the README outgrows its cap."""
    lines = text.splitlines()
    problems = [f"{len(lines)} lines, more than {MAX_LINES}"] if len(lines) > MAX_LINES else []
    for number, line in enumerate(lines, start=1):
        cap = MAX_TABLE_ROW_CHARS if line.startswith("|") else MAX_PROSE_CHARS
        if len(line) > cap:
            problems.append(f"line {number}: {len(line)} characters, more than {cap}")
        if re.search(r"(?<![\w.])\.\./", line):
            problems.append(f"line {number}: a path outside the repository")
    return problems


def test_the_readme_is_short() -> None:
    assert readme_problems(README.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("x\n" * (MAX_LINES + 1), f"{MAX_LINES + 1} lines, more than {MAX_LINES}"),
        ("y" * (MAX_PROSE_CHARS + 1) + "\n", f"line 1: {MAX_PROSE_CHARS + 1} characters"),
        ("as in `../shared/data/techdocs/`\n", "line 1: a path outside the repository"),
    ],
)
def test_each_overgrowth_is_named(text: str, problem: str) -> None:
    assert any(p.startswith(problem) for p in readme_problems(text)), readme_problems(text)


def test_one_port_everywhere() -> None:
    from reground.web.server import DEFAULT_PORT

    ports = {
        (doc, int(port))
        for doc in PORT_DOCS
        for port in re.findall(r"(?:127\.0\.0\.1:|localhost:|--port )(\d{4})", (REPO / doc).read_text("utf-8"))
        if int(port) != 8000  # a Chroma server's port, not the LangGraph server's
    }
    assert ports and {port for _, port in ports} == {DEFAULT_PORT}, sorted(ports)


def _bash_commands(text: str) -> list[str]:
    """The `reground ...` commands of the bash blocks, one per line (comments and `&& ...` cut off)."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.split(r"\s+#\s|\s+&&\s", line)[0]
            match = re.search(r"(?:^|\s|/)reground\s+(\S.*)$", line)
            if match:
                found.append(match.group(1).strip())
    return found


def _inline_commands(text: str) -> list[str]:
    return [m for m in re.findall(r"`(?:\.venv/bin/)?reground ([a-z][^`]*)`", text)]


def _words(command: str) -> list[str]:
    return shlex.split(re.sub(r"<[^<>]*>", "X", command))  # a placeholder such as <id printed above> is one word


def _walk(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The sub-parser the command words lead to, and the options given to it; an unknown word or flag fails."""
    parser = build_parser(words)
    for word in words:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or word.startswith("-"):
            break
        assert word in subparsers[0].choices, f"no command {word!r}"
        parser = subparsers[0].choices[word]
    options = [w.split("=")[0] for w in words if w.startswith("--")]
    for option in options:
        assert option in parser._option_string_actions, f"{parser.prog} has no option {option}"
    return parser, options


README_TEXT = README.read_text(encoding="utf-8")


@pytest.mark.parametrize("command", _bash_commands(README_TEXT))
def test_each_readme_command_line_parses(command: str) -> None:
    words = _words(command)
    _walk(words)
    args = build_parser(words).parse_args(words)
    assert callable(getattr(args, "func", None)), command


@pytest.mark.parametrize("command", _inline_commands(README_TEXT))
def test_each_inline_reground_command_names_real_commands_and_flags(command: str) -> None:
    _walk(_words(command))


def test_the_commands_are_found() -> None:
    """The extraction sees the README's commands (an empty list would pass every test above)."""
    assert any(c.startswith("ask ") and "--set triage.reading_ratio=0.7" in c for c in _bash_commands(README_TEXT))
    assert "engine stop --store pgserver:<dir>" in _inline_commands(README_TEXT)
    with pytest.raises(AssertionError, match="has no option --no-such-flag"):
        _walk(_words("ask q --no-such-flag"))
