"""The HTML and PDF loaders: every piece of text once, in reading order, headings kept as sections, an HTML page's
structure (lists, tables, code) kept as the markdown that says it."""

from __future__ import annotations

from pathlib import Path

import pytest
from reground.tools.text.chunking import chunk_document
from reground.tools.text.loaders import html_text, load_paths
from reground.tools.tuning.stores import INGEST


def test_nested_list_items_and_paragraphs_are_extracted_once() -> None:
    _, text = html_text("<ul><li><p>Apply through the portal.</p></li><li>Tell your manager.</li></ul>")
    assert text == "- Apply through the portal.\n- Tell your manager."


def test_nested_blocks_keep_reading_order_and_each_text_once() -> None:
    markup = """
    <html><head><title>Leave policy</title><style>p {color: red}</style></head>
    <body>
      <nav>Home | About</nav>
      <h1>Annual leave</h1>
      <div>Intro <b>bold</b> text.
        <ol>
          <li>Step one <ul><li><p>Sub step <a href="#">link</a></p></li></ul> after sub</li>
          <li><p>Step two</p></li>
        </ol>
      </div>
      <table><tr><td><p>Cell A</p></td><td>Cell B</td></tr></table>
      <h2>Carry-over</h2><p>Five days.</p>
      <!-- a comment --><script>var x = "hidden";</script>
      <footer>Contact</footer>
    </body></html>
    """
    title, text = html_text(markup, "fallback")
    assert title == "Leave policy"
    assert text.split("\n\n") == [
        "# Annual leave",
        "Intro bold text.",
        "1. Step one\n    - Sub step link\n    after sub\n2. Step two",
        "| Cell A | Cell B |\n|---|---|",
        "## Carry-over",
        "Five days.",
    ]
    for hidden in ("Home", "Contact", "hidden", "a comment", "color"):
        assert hidden not in text


def test_an_html_file_chunks_without_duplicated_sentences(tmp_path: Path) -> None:
    page = tmp_path / "policy.html"
    page.write_text(
        "<h1>Bikes</h1><ul><li><p>Lease an e-bike through payroll.</p></li>"
        "<li><p>The company insures it.</p></li></ul>",
        encoding="utf-8",
    )
    (doc,), errors = load_paths([page])
    assert errors == [] and doc.title == "policy" and doc.doc_id == "policy.html"
    joined = " ".join(c["text"] for c in chunk_document(doc, max_tokens=INGEST.chunk_tokens))
    assert joined.count("Lease an e-bike through payroll.") == 1
    assert joined.count("The company insures it.") == 1
    assert {c["section"] for c in chunk_document(doc, max_tokens=INGEST.chunk_tokens)} == {"Bikes"}


def _tiny_pdf(path: Path, lines: list[str], title: str) -> None:
    """A real one-page PDF with text drawn in Helvetica, built with pypdf alone."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    page = writer.add_blank_page(width=612, height=792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    ops = ["BT", "/F1 12 Tf", "72 720 Td", "14 TL"]
    ops += [f"({line}) Tj T*" for line in lines]
    ops.append("ET")
    content = DecodedStreamObject()
    content.set_data("\n".join(ops).encode("latin-1"))
    page[NameObject("/Contents")] = writer._add_object(content)
    writer.add_metadata({"/Title": title})
    with path.open("wb") as handle:
        writer.write(handle)


def test_a_pdf_yields_its_text_and_title(tmp_path: Path) -> None:
    pdf = tmp_path / "travel.pdf"
    _tiny_pdf(pdf, ["Book trains in second class.", "Submit receipts within 30 days."], "Travel policy")
    (doc,), errors = load_paths([pdf])
    assert errors == []
    assert doc.title == "Travel policy" and doc.doc_id == "travel.pdf"
    assert "Book trains in second class." in doc.text and "Submit receipts within 30 days." in doc.text
    assert doc.text.count("second class") == 1


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"%PDF-1.4\nthis is not really a pdf", "not a readable PDF"), (b"", "not a readable PDF")],
    ids=["garbage", "empty"],
)
def test_a_broken_pdf_is_reported_by_name(tmp_path: Path, content: bytes, reason: str) -> None:
    pdf = tmp_path / "broken.pdf"
    pdf.write_bytes(content)
    documents, errors = load_paths([pdf])
    assert documents == []
    assert [str(e.path) for e in errors] == [str(pdf)]
    assert reason in errors[0].reason or "no text could be extracted" in errors[0].reason


def test_a_pdf_without_text_is_an_error_not_an_empty_document(tmp_path: Path) -> None:
    from pypdf import PdfWriter

    pdf = tmp_path / "scan.pdf"
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    with pdf.open("wb") as handle:
        writer.write(handle)
    documents, errors = load_paths([pdf])
    assert documents == [] and "no text could be extracted" in errors[0].reason


def test_a_paragraph_keeps_its_line_breaks_and_packed_paragraphs_a_blank_line() -> None:
    from reground.tools.text.loaders import Document

    doc = Document(
        doc_id="plates",
        title="Plates",
        text="How to surrender your plates\nYou can surrender plates at any DMV office.\n\nKeep the receipt.",
    )
    (chunk,) = chunk_document(doc, max_tokens=INGEST.chunk_tokens)
    assert chunk["text"] == (
        "How to surrender your plates\nYou can surrender plates at any DMV office.\n\nKeep the receipt."
    )


def test_line_breaks_move_no_chunk_boundary() -> None:
    from reground.tools.text.loaders import Document

    blocks = ["\n".join(f"Step {j} of part {i}" for j in range(5)) for i in range(12)]
    broken = Document(doc_id="a", title="A", text="\n\n".join(blocks))
    flat = Document(doc_id="b", title="B", text="\n\n".join(b.replace("\n", " ") for b in blocks))
    # At 72 tokens two flat paragraphs fit a chunk; counting each line break as a token would fit only one.
    with_breaks, without = chunk_document(broken, max_tokens=72), chunk_document(flat, max_tokens=72)
    assert len(with_breaks) == len(without) == 6
    assert [" ".join(c["text"].split()) for c in with_breaks] == [" ".join(c["text"].split()) for c in without]
