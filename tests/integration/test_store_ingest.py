"""Ingestion on the real stack (packaged MiniLM, embedded Chroma, BM25): idempotent, crash-safe, reopenable.

Every test writes to its own temporary data dir. Chroma is read both through `PassageStore` and
directly (a raw client on the same path), so the assertions do not rely on the store's own
bookkeeping: "all or nothing" is checked on the rows Chroma holds and on the BM25 index.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from reground.tools.stores.ingest import ingest, ingest_documents
from reground.tools.stores.store import MANIFEST_SUFFIX, VERSION_ID, PassageStore
from reground.tools.text.chunking import chunk_document
from reground.tools.text.loaders import Document
from reground.tools.tuning.stores import INGEST

pytestmark = pytest.mark.integration

COLLECTION = "ingest-it"
CLI = [sys.executable, "-m", "reground", "ingest"]
TOPICS = ("annual leave", "sick pay", "bike leasing", "parental leave", "travel expenses", "pension plan")


# --- documents ------------------------------------------------------------------------------


def doc_marker(doc_id: str) -> str:
    """One BM25 token that every chunk of every version of the document carries."""
    return "doc" + re.sub(r"[^a-z0-9]", "", doc_id.lower())


def version_marker(doc_id: str, version: str) -> str:
    """One BM25 token unique to a version of the document."""
    return doc_marker(doc_id) + version


def doc_text(doc_id: str, version: str, index: int) -> str:
    """A markdown document: one section (so one chunk) per heading; v1 has 3 sections, later versions 2."""
    sections = 3 if version == "v1" else 2
    topic = TOPICS[index % len(TOPICS)]
    return "\n\n".join(
        f"# {topic.title()} part {i}\n\nPart {i} of the {topic} policy ({version}) for {doc_id}. "
        f"Tags: {doc_marker(doc_id)} {version_marker(doc_id, version)}."
        for i in range(sections)
    )


def make_doc(doc_id: str, version: str, index: int) -> Document:
    return Document(doc_id=doc_id, title=f"{doc_id} {version}", text=doc_text(doc_id, version, index))


def chunk_texts(doc: Document) -> list[str]:
    return sorted(c["text"] for c in chunk_document(doc, max_tokens=INGEST.chunk_tokens))


def write_docs(folder: Path, version: str, names: list[str]) -> dict[str, Document]:
    """Markdown files as `reground ingest` reads them (doc_id = file name), and the matching Documents."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = {}
    for index, name in enumerate(names):
        text = doc_text(name, version, index)
        (folder / name).write_text(text, encoding="utf-8")
        title = text.splitlines()[0].lstrip("# ").strip()
        docs[name] = Document(doc_id=name, title=title, text=text)
    return docs


# --- reading Chroma directly ----------------------------------------------------------------


def raw_collections(data_dir: Path, collection: str = COLLECTION) -> tuple[Any, Any]:
    client = chromadb.PersistentClient(
        path=str(data_dir / "chroma"), settings=Settings(anonymized_telemetry=False, allow_reset=False)
    )
    return client.get_collection(collection), client.get_collection(collection + MANIFEST_SUFFIX)


def raw_rows(data_dir: Path) -> dict[str, dict[str, list[dict[str, str]]]]:
    """doc_id → generation → the rows Chroma holds (Chroma id, chunk_id, text)."""
    chunks, _ = raw_collections(data_dir)
    got = chunks.get(include=["metadatas", "documents"])
    out: dict[str, dict[str, list[dict[str, str]]]] = {}
    for row_id, meta, text in zip(got["ids"], got["metadatas"], got["documents"], strict=True):
        row = {"id": row_id, "chunk_id": str(meta["chunk_id"]), "text": text}
        out.setdefault(str(meta["doc_id"]), {}).setdefault(str(meta["generation"]), []).append(row)
    return out


def raw_manifest(data_dir: Path) -> dict[str, dict[str, Any]]:
    _, manifest = raw_collections(data_dir)
    got = manifest.get(include=["metadatas"])
    return {i: dict(m) for i, m in zip(got["ids"], got["metadatas"], strict=True) if i != VERSION_ID}


def lexical_ids(store: PassageStore, query: str) -> set[str]:
    return {c["chunk_id"] for c, _ in store.lexical_search(query, k=1000)}


def visible_versions(
    store: PassageStore, data_dir: Path, versions: dict[str, dict[str, Document]], *, collected: bool
) -> dict[str, str | None]:
    """Which version of each document is live (None = absent), asserting that it is whole everywhere.

    For each doc_id: Chroma's rows of the generation the manifest names are exactly the chunks of one
    version (all of them, nothing else); the store's view and its BM25 index hold exactly those chunk
    ids. With `collected` (after a reopen), Chroma holds no rows of any other generation either.
    """
    rows, manifest = raw_rows(data_dir), raw_manifest(data_dir)
    view: dict[str, set[str]] = {}
    for chunk in store.all_chunks():
        view.setdefault(chunk["doc_id"], set()).add(chunk["chunk_id"])
    visible: dict[str, str | None] = {}
    for doc_id, by_version in versions.items():
        entry = manifest.get(doc_id)
        generations = rows.get(doc_id, {})
        live = generations.get(str(entry["generation"]), []) if entry else []
        if collected:
            assert set(generations) <= ({str(entry["generation"])} if entry else set()), (
                f"{doc_id}: rows of dead generations survived a reopen: {sorted(generations)}"
            )
        if entry:
            assert len(live) == entry["chunks"], f"{doc_id}: manifest names {entry['chunks']} chunks, Chroma has {live}"
            assert all(r["id"] == f"{r['chunk_id']}:{entry['generation']}" for r in live)
        texts = sorted(r["text"] for r in live)
        matching = [v for v, doc in by_version.items() if texts == chunk_texts(doc)]
        if live:
            assert len(matching) == 1, f"{doc_id} is half one version, half another: {texts}"
        visible[doc_id] = matching[0] if live else None
        live_ids = {r["chunk_id"] for r in live}
        assert view.get(doc_id, set()) == live_ids, f"{doc_id}: the store's view disagrees with Chroma"
        assert lexical_ids(store, doc_marker(doc_id)) == live_ids, f"{doc_id}: BM25 disagrees with Chroma"
        for version in by_version:
            expected = live_ids if visible[doc_id] == version else set()
            assert lexical_ids(store, version_marker(doc_id, version)) == expected, (doc_id, version)
    assert set(view) <= set(versions), f"unexpected documents: {set(view) - set(versions)}"
    return visible


def fresh_copy(data_dir: Path, target: Path) -> Path:
    """A copy of a store another process wrote, for this process to open as a new path."""
    shutil.copytree(data_dir, target)
    return target


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


# --- idempotency, replacement, deletion ------------------------------------------------------


def test_reingesting_is_a_no_op_and_changes_replace_the_old_chunks_everywhere(tmp_path: Path) -> None:
    folder, data_dir = tmp_path / "docs", tmp_path / "store"
    names = ["a.md", "b.md", "c.md"]
    v1 = write_docs(folder, "v1", names)
    store = PassageStore.open(COLLECTION, data_dir=data_dir, create=True)

    first = ingest([folder], store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert not first.errors, first.errors
    assert (first.documents, first.chunks_added, first.replaced) == (3, 9, 0)
    before = raw_rows(data_dir)

    second = ingest([folder], store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert (second.documents, second.unchanged, second.chunks_added, second.replaced) == (3, 3, 0, 0)
    assert raw_rows(data_dir) == before, "an unchanged document must not be rewritten"
    assert store.count() == 9

    # Change b.md: its old rows leave Chroma and the BM25 index; a.md and c.md are not touched.
    v2 = write_docs(folder, "v2", ["b.md"])
    old_b_rows = next(iter(before["b.md"].values()))
    third = ingest([folder], store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert (third.unchanged, third.replaced, third.chunks_added) == (2, 1, 2)
    chunks, _ = raw_collections(data_dir)
    assert chunks.get(ids=[r["id"] for r in old_b_rows])["ids"] == [], "old chunks of b.md are still in Chroma"
    old_chunk_ids = {r["chunk_id"] for r in old_b_rows}
    assert not old_chunk_ids & {c["chunk_id"] for c in store.all_chunks()}
    assert lexical_ids(store, version_marker("b.md", "v1")) == set(), "BM25 still finds the old version"
    versions = {name: {"v1": v1[name]} | ({"v2": v2[name]} if name in v2 else {}) for name in names}
    assert visible_versions(store, data_dir, versions, collected=True) == {"a.md": "v1", "b.md": "v2", "c.md": "v1"}
    rows = raw_rows(data_dir)
    assert rows["a.md"] == before["a.md"] and rows["c.md"] == before["c.md"]

    # Delete through the API: gone from Chroma, the manifest, BM25 and dense search.
    deleted = ingest([], store, delete=["c.md"], progress=False, max_tokens=INGEST.chunk_tokens)
    assert (deleted.deleted, deleted.errors) == (1, [])
    assert "c.md" not in raw_rows(data_dir) and "c.md" not in raw_manifest(data_dir)
    assert lexical_ids(store, doc_marker("c.md")) == set()
    query = store.embedder.embed_query(doc_text("c.md", "v1", 2))
    assert all(chunk["doc_id"] != "c.md" for chunk, _ in store.dense_search(query, k=10))
    again = ingest([], store, delete=["c.md"], progress=False, max_tokens=INGEST.chunk_tokens)
    assert again.deleted == 0 and "no document 'c.md'" in str(again.errors[0])

    # Delete through the CLI (another process); read the result from a copy of the store on disk.
    proc = run_cli("--delete", "a.md", "--collection", COLLECTION, "--data-dir", str(data_dir), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "1 deleted" in proc.stdout
    after = fresh_copy(data_dir, tmp_path / "after-delete")
    reread = PassageStore.open(COLLECTION, data_dir=after)
    assert {c["doc_id"] for c in reread.all_chunks()} == {"b.md"}
    assert lexical_ids(reread, doc_marker("a.md")) == set()
    assert set(raw_rows(after)) == {"b.md"} and set(raw_manifest(after)) == {"b.md"}


# --- crash safety -----------------------------------------------------------------------------


class SimulatedCrash(RuntimeError):
    pass


class CrashOn:
    """Wraps a Chroma collection: the nth call of `method` that `counts` accepts crashes.

    With `partial`, that call first writes half of its rows, as a process dying mid-write would.
    """

    def __init__(
        self,
        inner: Any,
        method: str,
        nth: int,
        *,
        partial: bool = False,
        counts: Callable[[dict[str, Any]], bool] = lambda kwargs: True,
    ) -> None:
        self._inner, self._method, self._nth, self._partial, self._counts = inner, method, nth, partial, counts
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def call(**kwargs: Any) -> Any:
            if self._counts(kwargs):
                self.calls += 1
                if self.calls == self._nth:
                    if self._partial:
                        half = max(1, len(kwargs["ids"]) // 2)
                        attr(**{k: v[:half] if isinstance(v, list) else v for k, v in kwargs.items()})
                    raise SimulatedCrash(f"crash in {name} call #{self._nth}")
            return attr(**kwargs)

        return call


def not_version_bump(kwargs: dict[str, Any]) -> bool:
    return kwargs.get("ids") != [VERSION_ID]


# (id, the collection wrapped, method, partial write, what the crashed document shows after)
CRASH_POINTS = [
    ("before-chunk-write", "_chunks", "add", False, "old"),
    ("mid-chunk-write", "_chunks", "add", True, "old"),
    ("before-manifest-flip", "_manifest", "upsert", False, "old"),
    ("after-flip-before-old-chunks-deleted", "_chunks", "delete", False, "new"),
]


@pytest.mark.parametrize(
    ("attribute", "method", "partial", "crashed_shows"),
    [pytest.param(*point[1:], id=point[0]) for point in CRASH_POINTS],
)
def test_a_crash_while_replacing_leaves_every_document_whole_and_a_rerun_completes(
    tmp_path: Path,
    attribute: str,
    method: str,
    partial: bool,
    crashed_shows: str,
) -> None:
    names = ["d1", "d2", "d3", "d4", "d5"]
    v1 = [make_doc(n, "v1", i) for i, n in enumerate(names)]
    v2 = [make_doc(n, "v2", i) for i, n in enumerate([*names, "d6"])]
    versions = {d.doc_id: {"v1": d} for d in v1}
    versions["d6"] = {}
    for d in v2:
        versions[d.doc_id]["v2"] = d
    data_dir = tmp_path / "store"
    store = PassageStore.open(COLLECTION, data_dir=data_dir, create=True)
    assert not ingest_documents(v1, store, progress=False, max_tokens=INGEST.chunk_tokens).errors

    # The third document of the batch crashes at this point.
    setattr(store, attribute, CrashOn(getattr(store, attribute), method, 3, partial=partial, counts=not_version_bump))
    with pytest.raises(SimulatedCrash):
        ingest_documents(v2, store, progress=False, max_tokens=INGEST.chunk_tokens)
    crashed = "v1" if crashed_shows == "old" else "v2"
    expected = {"d1": "v2", "d2": "v2", "d3": crashed, "d4": "v1", "d5": "v1", "d6": None}
    # The crashed process's own reads, then a fresh open (which collects the dead generation's rows).
    assert visible_versions(store, data_dir, versions, collected=False) == expected
    reopened = PassageStore.open(COLLECTION, data_dir=data_dir)
    assert visible_versions(reopened, data_dir, versions, collected=True) == expected

    rerun = ingest_documents(v2, reopened, progress=False, max_tokens=INGEST.chunk_tokens)
    done = 3 if crashed == "v2" else 2
    assert (rerun.documents, rerun.unchanged, rerun.errors) == (6, done, [])
    assert rerun.chunks_added == 2 * (6 - done)
    assert visible_versions(reopened, data_dir, versions, collected=True) == dict.fromkeys(versions, "v2")


@pytest.mark.parametrize(("method", "partial"), [("add", True), ("upsert", False)], ids=["mid-chunk-write", "flip"])
def test_a_crash_during_a_first_ingest_leaves_no_partial_document(tmp_path: Path, method: str, partial: bool) -> None:
    docs = [make_doc(n, "v1", i) for i, n in enumerate(["d1", "d2", "d3", "d4"])]
    versions = {d.doc_id: {"v1": d} for d in docs}
    data_dir = tmp_path / "store"
    store = PassageStore.open(COLLECTION, data_dir=data_dir, create=True)
    attribute = "_chunks" if method == "add" else "_manifest"
    setattr(store, attribute, CrashOn(getattr(store, attribute), method, 3, partial=partial, counts=not_version_bump))
    with pytest.raises(SimulatedCrash):
        ingest_documents(docs, store, progress=False, max_tokens=INGEST.chunk_tokens)
    expected = {"d1": "v1", "d2": "v1", "d3": None, "d4": None}
    assert visible_versions(store, data_dir, versions, collected=False) == expected
    reopened = PassageStore.open(COLLECTION, data_dir=data_dir)
    assert visible_versions(reopened, data_dir, versions, collected=True) == expected
    assert reopened.count() == 6
    rerun = ingest_documents(docs, reopened, progress=False, max_tokens=INGEST.chunk_tokens)
    assert (rerun.unchanged, rerun.chunks_added) == (2, 6)
    assert visible_versions(reopened, data_dir, versions, collected=True) == dict.fromkeys(versions, "v1")


def test_a_crash_while_deleting_does_not_hide_the_document_from_a_later_ingest(tmp_path: Path) -> None:
    """Deleting, crashing half-way, then ingesting the same file again must bring the document back."""
    docs = [make_doc(n, "v1", i) for i, n in enumerate(["d1", "d2"])]
    versions = {d.doc_id: {"v1": d} for d in docs}
    data_dir = tmp_path / "store"
    store = PassageStore.open(COLLECTION, data_dir=data_dir, create=True)
    ingest_documents(docs, store, progress=False, max_tokens=INGEST.chunk_tokens)
    for attribute in ("_chunks", "_manifest"):  # a crash in either of the two deletes
        # A store opened after the last write: one opened earlier reconnects (dropping the wrapper) when it
        # sees that another store object wrote in between.
        store = PassageStore.open(COLLECTION, data_dir=data_dir)
        setattr(store, attribute, CrashOn(getattr(store, attribute), "delete", 1))
        with pytest.raises(SimulatedCrash):
            store.delete_document("d1")
        setattr(store, attribute, store.__dict__[attribute]._inner)
        reopened = PassageStore.open(COLLECTION, data_dir=data_dir)
        assert visible_versions(reopened, data_dir, versions, collected=True)["d2"] == "v1"
        rerun = ingest_documents(docs, reopened, progress=False, max_tokens=INGEST.chunk_tokens)
        assert not rerun.errors
        assert visible_versions(reopened, data_dir, versions, collected=True) == {"d1": "v1", "d2": "v1"}


KILLING_CHILD = r"""
import os, signal, sys
from chromadb.api.models.Collection import Collection

real_add = Collection.add
calls = 0

def add(self, **kwargs):
    # The third document's chunk write: half of its rows land, then the process dies (no cleanup).
    global calls
    calls += 1
    if calls == int(os.environ["KILL_AT_ADD"]):
        half = max(1, len(kwargs["ids"]) // 2)
        real_add(self, **{k: v[:half] if isinstance(v, list) else v for k, v in kwargs.items()})
        os.kill(os.getpid(), signal.SIGKILL)
    return real_add(self, **kwargs)

Collection.add = add
from reground.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_killed_cli_ingest_leaves_whole_documents_and_a_rerun_completes(tmp_path: Path) -> None:
    folder, data_dir = tmp_path / "docs", tmp_path / "store"
    names = ["d1.md", "d2.md", "d3.md", "d4.md", "d5.md"]
    v1 = write_docs(folder, "v1", names)
    args = [str(folder), "--collection", COLLECTION, "--data-dir", str(data_dir), "--quiet"]
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr

    v2 = write_docs(folder, "v2", [*names, "d6.md"])
    env = {**os.environ, "KILL_AT_ADD": "3"}
    killed = subprocess.run(
        [sys.executable, "-c", KILLING_CHILD, "ingest", *args], capture_output=True, text=True, timeout=180, env=env
    )
    assert killed.returncode == -9, (killed.returncode, killed.stdout, killed.stderr)

    # What the next process to open the store sees (a copy, so the dead rows stay for the rerun).
    versions = {n: {"v1": v1[n], "v2": v2[n]} for n in names} | {"d6.md": {"v2": v2["d6.md"]}}
    expected = {"d1.md": "v2", "d2.md": "v2", "d3.md": "v1", "d4.md": "v1", "d5.md": "v1", "d6.md": None}
    after_kill = fresh_copy(data_dir, tmp_path / "after-kill")
    half_written = raw_rows(after_kill)["d3.md"]
    assert len(half_written) == 2 and sorted(len(rows) for rows in half_written.values()) == [1, 3], half_written
    store = PassageStore.open(COLLECTION, data_dir=after_kill)
    assert visible_versions(store, after_kill, versions, collected=True) == expected

    rerun = run_cli(*args)
    assert rerun.returncode == 0, rerun.stderr
    assert "6 documents (3 replaced, 2 unchanged), 8 chunks added" in rerun.stdout
    store = PassageStore.open(COLLECTION, data_dir=data_dir)
    assert visible_versions(store, data_dir, versions, collected=True) == dict.fromkeys(versions, "v2")


def test_an_open_embedded_store_reads_another_process_ingest(tmp_path: Path) -> None:
    """A running server (or chat) keeps its store open while `reground ingest` rewrites it next door."""
    folder, data_dir = tmp_path / "docs", tmp_path / "store"
    write_docs(folder, "v1", ["d1.md", "d2.md"])
    args = [str(folder), "--collection", COLLECTION, "--data-dir", str(data_dir), "--quiet"]
    assert run_cli(*args).returncode == 0
    store = PassageStore.open(COLLECTION, data_dir=data_dir)
    assert store.count() == 6
    write_docs(folder, "v2", ["d1.md"])
    assert run_cli(*args).returncode == 0
    assert lexical_ids(store, version_marker("d1.md", "v2")) and store.count() == 5


# --- reopening in another process ---------------------------------------------------------------

REOPENING_CHILD = r"""
import json, sys
import chromadb
from chromadb.config import Settings
from chromadb.errors import InternalError
from reground.tools.retrieval.search import HybridRetriever, RetrievalQuery
from reground.tools.stores.store import PassageStore

data_dir, collection, question = sys.argv[1:4]
store = PassageStore.open(collection, data_dir=data_dir)  # no embedder, no create: what was persisted
out = {"count": store.count()}
out["dense"] = [c["doc_id"] for c, _ in store.dense_search(store.embedder.embed_query(question), 2)]
out["lexical"] = [c["doc_id"] for c, _ in store.lexical_search(question, 2)]
passages = HybridRetriever(store).search(RetrievalQuery(question, question), where=None, doc_k=2, paragraph_k=2)
out["hybrid"] = [p["doc_id"] for p in passages]
out["hybrid_text"] = passages[0]["text"] if passages else ""

# A plain Chroma client, no embedding function passed: the persisted config names reground's,
# which embeds the query text.
settings = Settings(anonymized_telemetry=False, allow_reset=False)
client = chromadb.PersistentClient(path=data_dir + "/chroma", settings=settings)
raw = client.get_collection(collection)
out["config"] = raw.configuration_json.get("embedding_function")
out["metadata"] = raw.metadata
got = raw.query(query_texts=[question], n_results=1, include=["metadatas"])
out["raw"] = [m["doc_id"] for m in got["metadatas"][0]]
print("RESULT " + json.dumps(out))
"""


def test_a_new_process_reopens_the_collection_and_finds_the_document(tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    docs = [
        Document("parental", "Parental leave", "Each parent gets sixteen weeks of fully paid parental leave."),
        Document("bikes", "Bike leasing", "Lease an e-bike through payroll; the company insures the bicycle."),
        Document("canteen", "Canteen", "The canteen serves lunch from 11:30 to 14:00 on weekdays."),
    ]
    store = PassageStore.open(COLLECTION, data_dir=data_dir, create=True)
    assert ingest_documents(docs, store, progress=False, max_tokens=INGEST.chunk_tokens).chunks_added == 3

    question = "How many weeks of parental leave does a parent get?"
    proc = subprocess.run(
        [sys.executable, "-c", REOPENING_CHILD, str(data_dir), COLLECTION, question],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert out["count"] == 3
    assert out["dense"][0] == out["lexical"][0] == out["hybrid"][0] == out["raw"][0] == "parental", out
    assert "sixteen weeks" in out["hybrid_text"]
    assert out["config"] == {"type": "known", "name": "reground", "config": {"spec": "local:all-MiniLM-L6-v2"}}
    assert out["metadata"]["hnsw:space"] == "cosine" and out["metadata"]["embedding"] == "local:all-MiniLM-L6-v2"


# --- bad input through the CLI --------------------------------------------------------------------


def bad_batch(folder: Path) -> tuple[list[Path], dict[str, str]]:
    """A good file, a .jsonl with one good and one malformed line, and bad files → expected error per path."""
    folder.mkdir(parents=True, exist_ok=True)
    good = folder / "good.md"
    good.write_text("# Canteen\n\nThe canteen serves lunch from 11:30 to 14:00. zanzibarmenu\n", encoding="utf-8")
    records = folder / "records.jsonl"
    records.write_text(
        json.dumps({"doc_id": "rec-ok", "title": "Parking", "text": "Parking is free in the garage."})
        + '\n{"doc_id": "rec-bad", "text": "unterminated\n',
        encoding="utf-8",
    )
    empty = folder / "empty.md"
    empty.write_text("", encoding="utf-8")
    binary = folder / "blob.txt"
    binary.write_bytes(bytes(range(256)) * 4)
    latin1 = folder / "latin1.txt"
    latin1.write_bytes("Gebühren für Überstunden".encode("latin-1"))
    unsupported = folder / "notes.docx"
    unsupported.write_bytes(b"PK\x03\x04 not really a docx")
    missing = folder / "missing.md"
    expected = {
        f"{records}:2": "malformed JSON",
        str(empty): "the file is empty",
        str(binary): "the file is binary, not text",
        str(latin1): "not UTF-8 text",
        str(unsupported): "unsupported file type .docx",
        str(missing): "no such file or directory",
    }
    return [good, records, empty, binary, latin1, unsupported, missing], expected


def assert_reported(stderr: str, expected: dict[str, str]) -> None:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    for path, reason in expected.items():
        assert any(line.startswith(f"error: {path}: {reason}") for line in lines), (path, reason, stderr)
    assert len(lines) == len(expected), stderr


def test_cli_ingests_the_good_files_and_names_each_bad_one(tmp_path: Path) -> None:
    paths, expected = bad_batch(tmp_path / "docs")
    data_dir = tmp_path / "store"
    proc = run_cli(*map(str, paths), "--collection", COLLECTION, "--data-dir", str(data_dir), "--quiet")
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)  # DataError: some files failed
    assert_reported(proc.stderr, expected)
    assert f"2 documents (0 replaced, 0 unchanged), 2 chunks added, 0 deleted, 0 skipped, {len(expected)} errors" in (
        proc.stdout
    )
    store = PassageStore.open(COLLECTION, data_dir=data_dir)
    assert {c["doc_id"] for c in store.all_chunks()} == {"good.md", "rec-ok"}
    assert [c["doc_id"] for c, _ in store.lexical_search("zanzibarmenu", 5)] == ["good.md"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a chmod 000 file")
def test_cli_names_an_unreadable_file(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    paths, expected = bad_batch(folder)
    locked = folder / "locked.md"
    locked.write_text("# Secret\n\nYou cannot read this.\n", encoding="utf-8")
    locked.chmod(0)
    try:
        data_dir = tmp_path / "store"
        proc = run_cli(*map(str, [*paths, locked]), "--collection", COLLECTION, "--data-dir", str(data_dir), "--quiet")
    finally:
        locked.chmod(0o600)
    assert proc.returncode == 3
    assert_reported(proc.stderr, {**expected, str(locked): "permission denied"})
    store = PassageStore.open(COLLECTION, data_dir=data_dir)
    assert {c["doc_id"] for c in store.all_chunks()} == {"good.md", "rec-ok"}


# --- writers the local lock cannot serialise (a Chroma server shared by machines) -----------------


class DeletesAfterFlip:
    """Wraps the manifest: right after the flip of `doc_id`, 'another writer' deletes that generation's chunks."""

    def __init__(self, inner: Any, chunks: Any, doc_id: str, times: int) -> None:
        self._inner, self._chunks, self._doc_id, self.left = inner, chunks, doc_id, times

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != "upsert":
            return attr

        def upsert(**kwargs: Any) -> Any:
            out = attr(**kwargs)
            if kwargs.get("ids") == [self._doc_id] and self.left > 0:
                self.left -= 1
                generation = kwargs["metadatas"][0]["generation"]
                self._chunks.delete(where={"$and": [{"doc_id": self._doc_id}, {"generation": generation}]})
            return out

        return upsert


def test_a_write_undone_by_another_writer_after_the_flip_is_redone(tmp_path: Path) -> None:
    """The post-flip check: a manifest naming a generation without its chunks is never left behind."""
    data_dir = tmp_path / "store"
    store = PassageStore.open(COLLECTION, data_dir=data_dir, create=True)
    doc = make_doc("d1", "v1", 0)
    store._manifest = DeletesAfterFlip(store._manifest, store._chunks, "d1", times=2)
    summary = ingest_documents([doc], store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert (summary.chunks_added, summary.errors) == (3, [])
    assert store._manifest.left == 0, "the chunks were deleted after both of the first two flips"
    assert visible_versions(store, data_dir, {"d1": {"v1": doc}}, collected=True) == {"d1": "v1"}


def test_a_write_that_keeps_being_undone_fails_loudly(tmp_path: Path) -> None:
    from reground.tools.errors import DataError
    from reground.tools.tuning.stores import STORE_IO

    data_dir = tmp_path / "store"
    store = PassageStore.open(COLLECTION, data_dir=data_dir, create=True)
    doc = make_doc("d1", "v1", 0)
    store._manifest = DeletesAfterFlip(store._manifest, store._chunks, "d1", times=STORE_IO.write_attempts)
    with pytest.raises(DataError, match="could not be written completely"):
        ingest_documents([doc], store, progress=False, max_tokens=INGEST.chunk_tokens)
    # The next writer's repair drops the record that names missing chunks; a rerun then lands the document.
    reopened = PassageStore.open(COLLECTION, data_dir=data_dir)
    assert reopened.last_repair["dropped"] == ["d1"] and reopened.count() == 0
    assert ingest_documents([doc], reopened, progress=False, max_tokens=INGEST.chunk_tokens).chunks_added == 3
    assert visible_versions(reopened, data_dir, {"d1": {"v1": doc}}, collected=True) == {"d1": "v1"}
