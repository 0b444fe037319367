"""`--set FIELD=VALUE` on `ask` and `chat` (the README shows it as the way to try a setting): it reaches the turn's
Context, a named flag wins over it, and an unknown field exits 2 with one line naming the option's form."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI

from reground.cli import build_parser, main
from tests.conftest import copy_of_hr_store

QUESTION = "How many days of annual leave do full-time employees in Germany get?"


@pytest.fixture(scope="module")
def data_dir(hr_store_dir: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    return copy_of_hr_store(hr_store_dir, tmp_path_factory, "settings-store")


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    llm = FakeOpenAI(structured=True).start()
    yield llm
    llm.stop()


def _ask(capfd: pytest.CaptureFixture[str], data_dir: str, server: FakeOpenAI, *extra: str) -> tuple[int, str, str]:
    argv = ["ask", QUESTION, "--collection", "test-hr", "--data-dir", data_dir, "--model", server.spec, "--quiet"]
    code = main([*argv, "--json", *extra])
    out, err = capfd.readouterr()
    return code, out, err


def test_set_reaches_the_turn(capfd: pytest.CaptureFixture[str], data_dir: str, server: FakeOpenAI) -> None:
    code, out, err = _ask(capfd, data_dir, server)
    assert code == 0, err
    assert len(json.loads(out)["passages"]) > 1
    code, out, err = _ask(capfd, data_dir, server, "--set", "top_n=1", "--set", "triage.reading_ratio=0.7")
    assert code == 0, err
    assert len(json.loads(out)["passages"]) == 1


def test_an_unknown_setting_is_one_line_and_exit_2(
    capfd: pytest.CaptureFixture[str], data_dir: str, server: FakeOpenAI
) -> None:
    code, out, err = _ask(capfd, data_dir, server, "--set", "triage.no_such_field=1")
    assert code == 2 and out == "", out
    assert err.strip().splitlines() == [
        "error: --set 'triage.no_such_field=1': expected FIELD=VALUE with FIELD a Context field or GROUP.FIELD, "
        "e.g. triage.reading_ratio=0.7"
    ]


def test_named_flags_win_over_set() -> None:
    from reground.commands.conversation import _context

    args = build_parser(["chat"]).parse_args(
        ["chat", "--collection", "flag", "--set", "collection=set", "--set", "top_n=2"]
    )
    context = _context(args)
    assert (context.collection, context.top_n) == ("flag", 2)
