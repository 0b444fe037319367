"""The CLI as an attacker's document and a careless user meet it: escape sequences never
reach stored text or the terminal, an empty scope says so with a hint, large files are refused with one line,
`ingest` without paths is an error, library warnings stay off stderr, and a closed pipe ends the CLI quietly."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from reground.tools.stores.search_index import scope_miss
from reground.tools.text.terminal import strip_terminal_controls

from reground.cli import main
from reground.commands.conversation import print_result
from tests.conftest import copy_of_hr_store

CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;You have been hacked\x07"
LINK = "\x1b]8;;https://evil.example/login\x1b\\(click)\x1b]8;;\x1b\\"
RAW = ("\x1b", "\x07", "\x9b", "\x9d", "evil.example")


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def data_dir(hr_store_dir: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A copy of the HR store for this module (the CLI writes threads.sqlite and collections next to it)."""
    return copy_of_hr_store(hr_store_dir, tmp_path_factory, "cli-terminal")


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_strip_keeps_newlines_and_tabs_and_counts_what_it_removes() -> None:
    text, removed = strip_terminal_controls(f"a\tb{CLEAR}\r\nc{TITLE}d{LINK}\x00\x9b31me")
    assert text == "a\tb\nc" + "d(click)" + "e"
    assert removed == 2 + 1 + 2 + 1 + 1


def test_planted_escape_sequences_reach_neither_the_store_nor_the_cli_output(
    capfd: pytest.CaptureFixture[str], data_dir: str, llm: FakeOpenAI, tmp_path: Path
) -> None:
    from reground.tools.stores.store import PassageStore

    doc = {
        "doc_id": "counselling",
        "title": f"Counselling{TITLE}",
        "url": "https://hr.example/counselling",
        "text": f"Booking{CLEAR}\n\nBook a counselling session{TITLE} in the wellbeing portal {LINK}. "
        "Counselling sessions are free and confidential.\tSix sessions a year are covered.",
    }
    corpus = tmp_path / "esc.jsonl"
    corpus.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    code = main(["ingest", str(corpus), "--collection", "test-esc", "--data-dir", data_dir, "--quiet"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "escape sequences stripped from 1 documents" in out

    store = PassageStore.open("test-esc", data_dir=data_dir)
    stored = " ".join(c["title"] + c["text"] for c in store.all_chunks())
    assert "wellbeing portal (click)" in stored and "\t" in stored
    assert not any(raw in stored for raw in RAW), repr(stored)

    question = "How do I book a counselling session?"
    argv = ["ask", question, "--collection", "test-esc", "--data-dir", data_dir, "--model", llm.spec]
    code = main(argv)
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "wellbeing portal" in out  # the document is quoted: what is printed is its text
    assert not any(raw in out + err for raw in RAW), repr(out + err)


def test_a_result_from_a_store_written_before_is_printed_without_escapes() -> None:
    result = {
        "answer": f"Book it in the portal {LINK}{CLEAR}.",
        "citations": [{"number": 1, "title": f"T{TITLE}", "url": "u\x1b[31m", "quote": f"q{CLEAR}"}],
        "notices": [f"n{TITLE}"],
        "groundedness": 1.0,
        "passed": True,
        "llm_calls": 0,
        "seconds": 0.0,
        "reground_attempts": 0,
        "refine_iterations": 0,
    }
    out = io.StringIO()
    print_result(result, out=out)
    assert "portal (click)" in out.getvalue()
    assert not any(raw in out.getvalue() for raw in RAW), repr(out.getvalue())


def test_the_cli_strips_what_any_command_prints(capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A file name holding an escape sequence, echoed in an error line."""
    code = main(["ingest", str(tmp_path / f"evil{CLEAR}.md"), "--collection", "test-esc2", "--data-dir", str(tmp_path)])
    out, err = capfd.readouterr()
    assert code == 3 and "evil" in err
    assert not any(raw in out + err for raw in RAW), repr(err)


def test_a_scope_value_in_another_case_gets_a_notice_with_a_hint(
    capfd: pytest.CaptureFixture[str], data_dir: str, llm: FakeOpenAI
) -> None:
    question = "How many days of annual leave do I get?"
    base = ["ask", question, "--collection", "test-hr", "--data-dir", data_dir, "--model", llm.spec, "--quiet"]
    code = main([*base, "--filter", '{"country": "de"}'])
    out, err = capfd.readouterr()
    assert code == 0, err
    notices = [line for line in err.splitlines() if line.startswith("notice: ")]
    assert len(notices) == 1 and "country 'de'" in notices[0] and "did you mean country 'DE'?" in notices[0], err
    code = main([*base, "--filter", '{"country": "DE"}', "--json"])
    out, err = capfd.readouterr()
    assert code == 0 and json.loads(out)["notices"] == [], err


def test_scope_miss_says_whether_anything_matched() -> None:
    metas = [{"country": "DE"}, {"country": "all"}, {"country": "US,UK"}]
    assert scope_miss({"country": "DE"}, "c", metas) is None
    assert scope_miss({"country": ["UK", "us"]}, "c", metas) == (
        "no document in collection 'c' has country 'us': only documents marked 'all' were searched; "
        "did you mean country 'US'?"
    )
    only = scope_miss({"country": "fr "}, "c", [{"country": "FR"}])
    assert only is not None and "matched no documents" in only and "did you mean country 'FR'?" in only


def test_ingest_without_paths_is_one_line_and_exit_2(capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["ingest", "--collection", "test-nothing", "--data-dir", str(tmp_path)])
    _, err = capfd.readouterr()
    assert code == 2
    assert "nothing to ingest" in _one_error_line(err)


def test_a_file_over_the_size_limit_is_one_line_after_a_progress_line(
    capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    big = tmp_path / "big.txt"
    big.write_text("Annual leave is thirty days. " * 100_000, encoding="utf-8")  # 2.9 MB
    small = tmp_path / "small.md"
    small.write_text("# Parking\n\nParking is free in the garage.", encoding="utf-8")
    argv = ["ingest", str(big), str(small), "--collection", "test-big", "--data-dir", str(tmp_path / "s")]
    code = main([*argv, "--max-file-mb", "1"])
    out, err = capfd.readouterr()
    assert code == 3
    assert f"reading {big} (2.8 MB)" in err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert errors == [
        f"error: {big}: the file is 2.8 MB, over the 1 MB limit per document (--max-file-mb); split it "
        "or raise the limit"
    ]
    assert "1 documents" in out  # the small file went in


def _corrupt_pdf(path: Path) -> Path:
    """A PDF whose xref offset is wrong: pypdf logs warnings ("incorrect startxref pointer") while reading it."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(100, 100)
    buffer = io.BytesIO()
    writer.write(buffer)
    data = buffer.getvalue()
    path.write_bytes(data[: data.rfind(b"startxref")] + b"startxref\n999999\n%%EOF\n")
    return path


def test_library_warnings_reach_stderr_only_with_debug(capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pdf = _corrupt_pdf(tmp_path / "broken.pdf")
    argv = ["ingest", str(pdf), "--collection", "test-pdf", "--data-dir", str(tmp_path), "--quiet"]
    code = main(argv)
    _, err = capfd.readouterr()
    assert code == 3
    assert "broken.pdf" in _one_error_line(err)
    main(["--debug", *argv])
    _, err = capfd.readouterr()
    assert "startxref" in err  # the library's warning: shown when asked for


def test_a_closed_pipe_ends_the_cli_quietly(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    code = main(["collections", "--data-dir", "/nonexistent-reground-dir"])
    _, err = capfd.readouterr()
    assert code == 141
    assert err == ""


def test_a_closed_pipe_in_a_real_process_prints_nothing(data_dir: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "reground", "collections", "--data-dir", data_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader left before the first line (`| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 141)
    assert "bug" not in err and "Traceback" not in err and "Exception ignored" not in err, err
