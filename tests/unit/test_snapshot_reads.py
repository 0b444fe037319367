"""A turn reads one consistent version of a collection while an ingest replaces its documents:
`reground ask` crashed with Chroma's "Error finding id" via SearchIndex._load -> PassageStore._read_live."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from chromadb.errors import InternalError
from reground.tools.stores.ingest import ingest
from reground.tools.stores.store import PassageStore
from reground.tools.stores.vector_store import StoreError
from reground.tools.tuning.stores import INGEST

DOCS = 12


def _corpus(path: Path, version: int) -> Path:
    """DOCS documents whose text (so content hash and generation) changes with `version`."""
    lines = [
        json.dumps(
            {
                "doc_id": f"doc-{n}",
                "title": f"Policy {n}",
                "country": "DE",
                "text": f"Policy {n}, revision {version}. "
                + " ".join(f"Rule {k} of policy {n} applies in revision {version}." for k in range(25)),
            }
        )
        for n in range(DOCS)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path) -> PassageStore:
    opened = PassageStore.open("test-moving", data_dir=tmp_path, create=True)
    assert not ingest(
        [_corpus(tmp_path / "v0.jsonl", 0)], opened, progress=False, max_tokens=INGEST.chunk_tokens
    ).errors
    return opened


def test_a_read_that_fails_while_rows_move_is_read_again(store: PassageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chroma raising mid-read (twice: the old code retried once, after a reconnect) costs a retry, not the turn."""
    real = store._read_live
    failures = iter([InternalError("Error finding id"), InternalError("Error finding id")])

    def flaky(*, vectors: bool = True) -> Any:
        error = next(failures, None)
        if error is not None:
            raise error
        return real(vectors=vectors)

    monkeypatch.setattr(store, "_read_live", flaky)
    snapshot = store.load_snapshot()
    assert len({c["doc_id"] for c in snapshot.chunks}) == DOCS


def test_a_read_missing_a_live_documents_chunks_is_read_again(
    store: PassageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest read before a writer's flip, the chunks after its delete: that read lacks a document."""
    real = store._read_live
    calls = {"n": 0}

    def torn(*, vectors: bool = True) -> Any:
        live, pages = real(vectors=vectors)
        calls["n"] += 1
        if calls["n"] == 1:  # the first read: doc-0's rows gone, as if deleted between the two reads
            pages = [
                {
                    **page,
                    **{
                        key: [v for v, m in zip(page[key], page["metadatas"], strict=True) if m["doc_id"] != "doc-0"]
                        for key in ("ids", "metadatas", "documents")
                    },
                    "embeddings": [
                        v for v, m in zip(page["embeddings"], page["metadatas"], strict=True) if m["doc_id"] != "doc-0"
                    ],
                }
                for page in pages
            ]
        return live, pages

    monkeypatch.setattr(store, "_read_live", torn)
    snapshot = store.load_snapshot()
    assert calls["n"] == 2
    assert "doc-0" in {c["doc_id"] for c in snapshot.chunks}
    assert len(snapshot.chunks) == len(snapshot.vectors)


def test_a_read_that_keeps_failing_is_one_clear_store_error(
    store: PassageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*, vectors: bool = True) -> Any:
        raise InternalError("Error finding id")

    monkeypatch.setattr(store, "_read_live", broken)
    import reground.tools.stores.chroma.reads as reads_module

    monkeypatch.setattr(reads_module, "STORE_IO", replace(reads_module.STORE_IO, snapshot_backoff_s=0.0))
    with pytest.raises(StoreError, match=r"changed during each of \d+ reads"):
        store.load_snapshot()


WRITER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore
    from reground.tools.tuning.stores import INGEST

    root, corpus, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    store = PassageStore.open("test-moving", data_dir=root, create=True)
    for version in range(1, rounds + 1):
        text = corpus.read_text(encoding="utf-8").replace("revision ", f"revision {version}.")
        path = root / f"v{version}.jsonl"
        path.write_text(text, encoding="utf-8")
        summary = ingest([path], store, progress=False, max_tokens=INGEST.chunk_tokens)
        assert summary.replaced == summary.documents, summary
        print("wrote", version, flush=True)
    """
)


def test_searches_during_a_replacing_ingest_in_another_process_never_fail(tmp_path: Path, store: PassageStore) -> None:
    """Searches (each reloading the index as the version moves) run while another process replaces every
    document again and again: none fails, and each sees every document once, whole."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), str(tmp_path / "v0.jsonl"), "6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reader = PassageStore.open("test-moving", data_dir=tmp_path)
    reads, failures = 0, []
    query = reader.embedder.embed(["rule of policy"])[0]
    try:
        while writer.poll() is None or reads < 5:
            try:
                hits = reader.index.dense_search(query, 5)
                chunks = reader.index.all_chunks()
                per_doc = {c["doc_id"] for c in chunks}
                assert hits and per_doc == {f"doc-{n}" for n in range(DOCS)}, per_doc
                revisions = {c["text"].split(".")[0] for c in chunks if c["position"] == 0}
                assert len(revisions) == DOCS  # one version of each document, not two
                reads += 1
            except Exception as exc:  # a failure is what the test counts, not what stops it
                failures.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.01)
    finally:
        out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err[-2000:]
    assert "wrote 6" in out
    assert failures == [], failures[:3]
    assert reads >= 5
