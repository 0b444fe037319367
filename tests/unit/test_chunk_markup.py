"""evals/runs/chunk_markup.py: the markup left in a documentation set's chunks, counted as ingest would chunk it."""

from __future__ import annotations

import json
from pathlib import Path

from reground.evals.runs.chunk_markup import main


def test_it_counts_pages_load_errors_and_the_chunks_that_keep_markup(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nSee [the setup](setup.md) and run `make`.\n")
    (docs / "notes.txt").write_text(
        "Plain text keeps its [raw link](setup.md): the paragraph chunker reads no markup.\n"
    )
    (docs / "slides.docx").write_bytes(b"PK\x03\x04")
    out = tmp_path / "counts.json"
    assert main(["--docs", str(docs), "--name", "docs", "--out", str(out)]) == 0
    counts = json.loads(out.read_text())["docs"]
    assert (counts["pages"], counts["chunks"], counts["chunks_with_markup"]) == (2, 2, 1)
    assert counts["kinds"] == {"link": 1} and counts["examples"][0]["doc_id"] == "notes.txt"
    assert len(counts["load_errors"]) == 1 and "slides.docx" in counts["load_errors"][0]
