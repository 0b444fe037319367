"""No file stalls or bloats an ingest: deep HTML is one line, long prose is cut to the chunk size in every format,
files are indexed as they are read, links out of the folder are skipped, doc ids hold no control characters, UTF-16
with a byte order mark is text, and an overwrite control never pairs two figures in one sentence."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from reground.tools.stores.ingest import prepare
from reground.tools.stores.ingest_summary import IngestSummary
from reground.tools.stores.pipeline import batches
from reground.tools.text.chunking import chunk_document
from reground.tools.text.loaders import load_paths
from reground.tools.text.terminal import strip_terminal_controls
from reground.tools.text.tokens import count_tokens
from reground.tools.tuning.signals import HIDDEN_TEXT
from reground.tools.tuning.stores import INGEST

SENTENCES = [
    f"Claim {n} of the travel policy covers {n % 7 + 1} nights in a hotel near the office." for n in range(400)
]
LONG_PROSE = " ".join(SENTENCES)  # one paragraph, about 7,000 tokens


def test_html_nested_past_the_cap_is_one_error_line_and_the_folder_loads(tmp_path: Path) -> None:
    (tmp_path / "deep.html").write_text("<html><body>" + "<section><em>" * 20_000 + "payload")
    (tmp_path / "fine.html").write_text("<html><body>" + "<div>" * 200 + "<p>Trains are booked in second class.</p>")
    documents, errors = load_paths([tmp_path])
    assert [d.doc_id for d in documents] == ["fine.html"]
    assert len(errors) == 1 and errors[0].path.endswith("deep.html")
    assert f"more than {HIDDEN_TEXT.max_html_depth} levels deep" in errors[0].reason and "\n" not in errors[0].reason


def test_void_and_closed_elements_add_no_depth(tmp_path: Path) -> None:
    page = tmp_path / "long.html"
    row = "<tr><td>Item<br><img src=x.png></td><td><input value=1></td></tr>"
    page.write_text("<html><body><table>" + row * 5000 + "</table><p>" * 100 + "Last words.</body></html>")
    (doc,), errors = load_paths([page])
    assert errors == [] and doc.text.count("Item") == 5000 and "Last words." in doc.text


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("policy.md", f"# Travel\n\n{LONG_PROSE}\n"),
        ("policy.html", f"<html><body><h1>Travel</h1><p>{LONG_PROSE}</p></body></html>"),
        ("policy.txt", LONG_PROSE),
    ],
    ids=["markdown", "html", "text"],
)
def test_a_long_paragraph_is_cut_at_sentence_ends_to_the_chunk_size(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    (doc,), _ = load_paths([path])
    chunks = chunk_document(doc, max_tokens=INGEST.chunk_tokens)
    assert len(chunks) > 20
    assert max(count_tokens(c["text"]) for c in chunks) <= INGEST.chunk_tokens
    texts = [c["text"] for c in chunks]
    assert all(t.rstrip().endswith(".") for t in texts), "every cut falls after a sentence"
    assert sum(t.count("Claim ") for t in texts) == len(SENTENCES), "no sentence lost or repeated"


def test_a_run_on_line_without_sentences_is_cut_at_words(tmp_path: Path) -> None:
    path = tmp_path / "blob.md"
    path.write_text(" ".join(f"w{n}" for n in range(20_000)))
    (doc,), _ = load_paths([path])
    chunks = chunk_document(doc, max_tokens=INGEST.chunk_tokens)
    assert max(count_tokens(c["text"]) for c in chunks) <= INGEST.chunk_tokens
    assert " ".join(c["text"] for c in chunks).split() == [f"w{n}" for n in range(20_000)]


@pytest.mark.parametrize("name", ["padded.md", "padded.txt"])
def test_a_passage_repeated_word_for_word_is_kept_once(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("# Pad\n\n" + "Refunds take five days. " * 30_000 + "\n\nThe desk closes at noon.\n")
    (doc,), _ = load_paths([path])
    texts = [c["text"] for c in chunk_document(doc, max_tokens=INGEST.chunk_tokens)]
    assert len(texts) == len(set(texts)) <= 3
    assert "The desk closes at noon." in texts[-1]


def test_a_link_out_of_the_folder_is_skipped_with_one_line(tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "keys.md").write_text("# Keys\n\nThe vault code is 4711.\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nBook trains in second class.\n")
    (docs / "keys.md").symlink_to(outside / "keys.md")
    (docs / "more").symlink_to(outside, target_is_directory=True)
    (docs / "alias.md").symlink_to(docs / "guide.md")  # a link inside the folder is read
    documents, errors = load_paths([docs])
    assert sorted(d.doc_id for d in documents) == ["alias.md", "guide.md"]
    assert all("4711" not in d.text for d in documents)
    assert {Path(e.path).name for e in errors} == {"keys.md"} and all("outside" in e.reason for e in errors)


def test_control_characters_leave_doc_ids(tmp_path: Path) -> None:
    (tmp_path / "leave\npolicy\t2024.md").write_text("# Leave\n\nThirty days a year.\n")
    (doc,), _ = load_paths([tmp_path])
    assert doc.doc_id == "leave policy 2024.md"
    record = prepare(doc.__class__("a\r\nb\x1b[31mc", "t", "x"), IngestSummary())
    assert record.doc_id == "a bc"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_with_a_byte_order_mark_are_text(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "notice.md"
    text = "# Notice\n\nDie Kündigungsfrist beträgt drei Monate.\n"
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    path.write_bytes(data)
    (doc,), errors = load_paths([path])
    assert errors == [] and "Kündigungsfrist beträgt drei Monate." in doc.text and doc.title == "Notice"


def test_utf16_without_a_mark_is_still_refused_as_binary(tmp_path: Path) -> None:
    path = tmp_path / "odd.txt"
    path.write_bytes("plain words".encode("utf-16-le"))
    documents, errors = load_paths([path])
    assert documents == [] and "binary" in errors[0].reason


@pytest.mark.parametrize("backspaces", [3, 6, 1])
def test_an_overwrite_never_pairs_two_figures_in_one_sentence(backspaces: int) -> None:
    text, removed = strip_terminal_controls(f"A monitor stand costs 20 EUR{chr(8) * backspaces}200 EUR this year.")
    assert removed == backspaces
    assert "20 EUR 200" not in text and "EUR200" not in text
    first, second = text.split("\n\n")
    assert first.endswith("20 EUR") and second.startswith("200 EUR")


def test_batches_hand_on_what_was_read_while_a_slow_item_is_still_read() -> None:
    release = threading.Event()

    def items() -> Iterator[int]:
        yield 1
        yield 2
        release.wait(timeout=30)  # a slow file
        yield 3

    stream = batches(items(), size=10, idle_s=0.05)
    assert next(stream) == [1, 2], "the items before the slow one are handed on without waiting for it"
    release.set()
    assert list(stream) == [[3]]


def test_batches_raise_the_readers_error_after_what_came_before() -> None:
    def items() -> Iterator[int]:
        yield 1
        raise OSError("disk gone")

    stream = batches(items(), size=1, idle_s=5)
    assert next(stream) == [1]
    with pytest.raises(OSError, match="disk gone"):
        next(stream)


def test_an_ingest_in_batches_indexes_every_file_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import dataclasses

    from reground.tools.stores import ingest as ingest_module
    from reground.tools.stores.store import PassageStore

    monkeypatch.setattr(ingest_module, "INGEST", dataclasses.replace(INGEST, flush_documents=2))
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(5):
        (docs / f"page{n}.md").write_text(f"# Page {n}\n\nRoom {n} is booked at the front desk.\n")
    (docs / "zz-again.jsonl").write_text('{"doc_id": "page1.md", "text": "A second page1."}\n')
    store = PassageStore.open("batched", data_dir=tmp_path / "data", create=True)
    summary = ingest_module.ingest([docs], store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert summary.documents == 5 and summary.skipped == 1
    assert any("duplicate doc_id 'page1.md'" in str(e) for e in summary.errors)
    assert sorted({c["doc_id"] for c in store.all_chunks()}) == [f"page{n}.md" for n in range(5)]
