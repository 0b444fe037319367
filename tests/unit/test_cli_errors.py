"""Every error the CLI meets ends in one line on stderr and a distinct exit code, never a traceback.

The commands run in-process through `reground.cli.main` against the real HR test store, with a fake
OpenAI-compatible server (tests/unit/fake_openai.py) that answers or dies mid-answer. stderr is
captured at the file-descriptor level, so anything a library prints counts too.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from reground.tools.errors import DataError, InputError, ModelError

from reground.cli import main
from tests.conftest import copy_of_hr_store

QUESTION = "How many days of annual leave do full-time employees in Germany get?"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    # The model dies mid-answer: these turns write their answer with it (the default extract style makes no
    # answer call; test_triage.py covers it).
    monkeypatch.setenv("REGROUND_ANSWER_STYLE", "write")
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def data_dir(hr_store_dir: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A copy of the HR store for this module (the CLI writes threads.sqlite next to it)."""
    return copy_of_hr_store(hr_store_dir, tmp_path_factory, "cli-store")


def _run(capfd: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capfd.readouterr()
    return code, out, err


def _ask(data_dir: str, model: str, *extra: str, question: str = QUESTION) -> list[str]:
    return ["ask", question, "--data-dir", data_dir, "--model", model, "--quiet", *extra]


def _assert_one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err}"
    assert "Traceback" not in err
    assert lines[0].startswith("error: ")
    return lines[0]


def _killed_mid_answer(data_dir: str, llm: FakeOpenAI) -> list[str]:
    llm.mode = "die"
    return _ask(data_dir, llm.spec, "--collection", "test-hr")


def _ingest(tmp: Path, path: str) -> list[str]:
    return ["ingest", path, "--collection", "broken", "--data-dir", str(tmp), "--quiet"]


def _malformed_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"doc_id": "a", "text": "fine"}\n{"doc_id": "b", "text": \n', encoding="utf-8")
    return path


Case = Callable[[str, FakeOpenAI, Path], list[str]]

CASES: list[tuple[str, Case, int, tuple[str, ...]]] = [
    (
        "unknown-collection",
        lambda d, llm, tmp: _ask(d, llm.spec, "--collection", "no-such-docs"),
        DataError.exit_code,
        ("no-such-docs", "test-hr", "reground ingest"),
    ),
    (
        "filter-is-a-json-list",
        lambda d, llm, tmp: _ask(d, llm.spec, "--collection", "test-hr", "--filter", '["DE"]'),
        InputError.exit_code,
        ("--filter", "JSON object", "list"),
    ),
    (
        "filter-is-not-json",
        lambda d, llm, tmp: _ask(d, llm.spec, "--collection", "test-hr", "--filter", "{country: DE}"),
        InputError.exit_code,
        ("--filter", "not valid JSON"),
    ),
    (
        "collection-path-traversal",
        lambda d, llm, tmp: _ask(d, llm.spec, "--collection", "../../etc"),
        InputError.exit_code,
        ("collection",),
    ),
    (
        "unsupported-filter-operator",
        lambda d, llm, tmp: _ask(d, llm.spec, "--collection", "test-hr", "--filter", '{"country": {"$regex": "D"}}'),
        InputError.exit_code,
        ("$regex", "country"),
    ),
    (
        "unknown-metadata-field",
        lambda d, llm, tmp: _ask(d, llm.spec, "--collection", "test-hr", "--filter", '{"team": "x"}'),
        DataError.exit_code,
        ("team", "country"),
    ),
    (
        "llm-down",
        lambda d, llm, tmp: _ask(d, f"openai-compatible:local@http://127.0.0.1:{_closed_port()}/v1"),
        ModelError.exit_code,
        ("http://127.0.0.1:", "reground llm serve"),
    ),
    (
        "llm-killed-mid-answer",
        lambda d, llm, tmp: _killed_mid_answer(d, llm),
        ModelError.exit_code,
        ("stopped answering", "reground llm serve"),
    ),
    ("empty-question", lambda d, llm, tmp: _ask(d, llm.spec, question="   "), InputError.exit_code, ("empty",)),
    (
        "letter-free-question",
        lambda d, llm, tmp: _ask(d, llm.spec, question="\U0001f600\U0001f389 \x07\x1b ?!"),
        InputError.exit_code,
        ("no letters or digits",),
    ),
    (
        "bad-model-spec",
        lambda d, llm, tmp: _ask(d, "gpt-4", "--collection", "test-hr"),
        InputError.exit_code,
        ("chat model spec", "openai-compatible"),
    ),
    (
        "malformed-ingest-file",
        lambda d, llm, tmp: _ingest(tmp, str(_malformed_jsonl(tmp))),
        DataError.exit_code,
        ("broken.jsonl",),
    ),
    (
        "missing-ingest-file",
        lambda d, llm, tmp: _ingest(tmp, str(tmp / "nope.md")),
        DataError.exit_code,
        ("nope.md",),
    ),
]


@pytest.mark.parametrize(("build", "exit_code", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_line_with_its_exit_code(
    capfd: pytest.CaptureFixture[str],
    data_dir: str,
    llm: FakeOpenAI,
    tmp_path: Path,
    build: Case,
    exit_code: int,
    expected: tuple[str, ...],
) -> None:
    code, _, err = _run(capfd, build(data_dir, llm, tmp_path))
    line = _assert_one_line(err)
    for needle in expected:
        assert needle in line, f"{needle!r} missing from: {line}"
    assert code == exit_code, line


def test_killed_mid_answer_names_the_url_of_the_dead_server(
    capfd: pytest.CaptureFixture[str], data_dir: str, llm: FakeOpenAI
) -> None:
    llm.mode = "die"
    code, _, err = _run(capfd, _ask(data_dir, llm.spec, "--collection", "test-hr"))
    assert code == ModelError.exit_code
    assert llm.url in _assert_one_line(err)
    assert llm.chat_requests >= 1, "the failure must happen mid-answer, after the turn reached the model"


def test_an_unexpected_exception_is_reported_as_a_bug_and_debug_shows_the_traceback(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, data_dir: str, llm: FakeOpenAI
) -> None:
    import reground.commands.conversation as conversation

    def explode(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise KeyError("boom")

    monkeypatch.setattr(conversation, "run_turn", explode)
    argv = _ask(data_dir, llm.spec, "--collection", "test-hr")
    code, _, err = _run(capfd, argv)
    line = _assert_one_line(err)
    assert code == 1
    assert "KeyError" in line and "bug" in line and "--debug" in line

    code, _, err = _run(capfd, ["--debug", *argv])
    assert code == 1
    assert "Traceback" in err and "KeyError" in err
    code, _, err = _run(capfd, [*argv, "--debug"])
    assert code == 1 and "Traceback" in err, "--debug also works after the sub-command"


def _thread_messages(data_dir: str, thread: str) -> list[tuple[str, str]]:
    """The thread's messages as the checkpointer stored them (read back through a fresh graph)."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from reground.graph.builder import build_graph

    with SqliteSaver.from_conn_string(str(Path(data_dir) / "threads.sqlite")) as saver:
        state = build_graph(checkpointer=saver).get_state({"configurable": {"thread_id": thread}})
    return [(m.type, str(m.content)) for m in state.values.get("messages", [])]


def test_a_turn_killed_mid_answer_leaves_no_user_message_behind(
    capfd: pytest.CaptureFixture[str], tmp_path: Path, hr_store_dir: str, llm: FakeOpenAI
) -> None:
    """Kill the LLM mid-answer, restart it, ask again: one user message per question in the thread."""
    data_dir = str(tmp_path / "store")
    shutil.copytree(hr_store_dir, data_dir)
    thread = "t-killed"
    base = ["--data-dir", data_dir, "--model", llm.spec, "--collection", "test-hr", "--quiet", "--thread", thread]
    first, second = QUESTION, "Can I carry unused days over?"

    code, _, err = _run(capfd, ["ask", first, *base])
    assert code == 0, err
    for _ in range(2):  # two failed attempts in a row: still no debris
        llm.restart(mode="die")
        code, _, err = _run(capfd, ["ask", second, *base])
        assert code == ModelError.exit_code, err
        after_failure = _thread_messages(data_dir, thread)
        assert [t for t, _ in after_failure] == ["human", "ai", "human"], "the failed turn stays resumable"
    llm.restart(mode="answer")
    code, out, _ = _run(capfd, ["ask", second, *base, "--json"])
    assert code == 0
    assert json.loads(out)["answer"]

    messages = _thread_messages(data_dir, thread)
    assert [t for t, _ in messages] == ["human", "ai", "human", "ai"], messages
    assert [c for t, c in messages if t == "human"] == [first, second]


EVAL_CASES = [
    (
        "answers-missing-cases-file",
        lambda tmp: [
            "eval",
            "answers",
            "--docs",
            str(tmp / "d.jsonl"),
            "--cases",
            str(tmp / "c.jsonl"),
            "--out",
            str(tmp),
        ],
        InputError.exit_code,  # a path argument that names no file (EvalRunError)
        ("not found",),
    ),
    (
        "answers-unknown-system",
        lambda tmp: ["eval", "answers", "--docs", "x", "--cases", "y", "--out", str(tmp), "--systems", "magic"],
        InputError.exit_code,
        ("magic",),
    ),
    (
        "answers-bad-workers",
        lambda tmp: ["eval", "answers", "--docs", "x", "--cases", "y", "--out", str(tmp), "--workers", "0"],
        InputError.exit_code,
        ("--workers",),
    ),
    (
        "report-missing-run",
        lambda tmp: ["eval", "report", "--runs", str(tmp / "nope"), "--out", str(tmp / "r")],
        InputError.exit_code,
        ("nope",),
    ),
]


@pytest.mark.parametrize(
    ("build", "exit_code", "expected"), [c[1:] for c in EVAL_CASES], ids=[c[0] for c in EVAL_CASES]
)
def test_eval_errors_are_one_line_with_their_exit_code(
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
    build: Callable[[Path], list[str]],
    exit_code: int,
    expected: tuple[str, ...],
) -> None:
    code, _, err = _run(capfd, build(tmp_path))
    line = _assert_one_line(err)
    assert all(n in line for n in expected), line
    assert code == exit_code, line


def test_an_eval_stopped_by_a_dead_model_exits_with_the_model_code() -> None:
    from reground.evals.runs.answers import EvalRunError
    from reground.tools.adapters.llm import LLMUnavailableError

    from reground.commands.eval import _fail

    down = LLMUnavailableError("No chat model answered at http://127.0.0.1:9/v1")
    try:
        raise EvalRunError(f"system 'reground' stopped: {down}") from down
    except EvalRunError as exc:
        with pytest.raises(ModelError, match="system 'reground' stopped: No chat model answered"):
            _fail(exc)


def test_the_cli_prints_a_cut_question_notice(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, data_dir: str, llm: FakeOpenAI
) -> None:
    monkeypatch.setenv("REGROUND_BUDGETS__QUESTION_TOKEN_BUDGET", "20")
    code, out, err = _run(
        capfd, _ask(data_dir, llm.spec, "--collection", "test-hr", question=QUESTION + " Please." * 200)
    )
    assert code == 0, err
    notices = [line for line in err.splitlines() if line.startswith("notice: ")]
    assert len(notices) == 1 and "cut" in notices[0] and "20 tokens" in notices[0], err
    code, out, err = _run(capfd, _ask(data_dir, llm.spec, "--collection", "test-hr", "--json"))
    assert code == 0 and json.loads(out)["notices"] == [] and "notice:" not in err


def test_chat_reports_a_refused_question_on_one_line_and_carries_on(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, data_dir: str, llm: FakeOpenAI
) -> None:
    typed = iter(["\U0001f642\U0001f642", QUESTION, ""])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(typed))
    argv = ["chat", "--data-dir", data_dir, "--model", llm.spec, "--collection", "test-hr", "--thread", "t-chat"]
    code, out, err = _run(capfd, argv)
    assert code == 0, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert errors == ["error: the question has no letters or digits: ask about the documents in 'test-hr' in words"]
    assert "Traceback" not in err
    assert "groundedness" in out, "the next question was answered"
