"""A Chroma collection as reground keeps it: the chunks, a manifest beside them, the write lock and repair.

Crash safety: a per-collection manifest (a second Chroma collection, one record per document)
names each document's live generation. New chunks are written under a new generation, then the
manifest record flips (a single upsert), then old chunks are deleted (`chroma.writes`). Readers only see chunks of
the live generation (`chroma.reads`), so a crash at any point leaves every document fully old or fully new.

Writers: one at a time per collection (`writing()`: a file lock beside the store, across processes
and threads). Holding it, a writer first repairs the collection: a manifest record whose chunks are
not all there is dropped (the next ingest re-adds the document) and chunks no record names are
deleted. Only the lock holder deletes leftovers, so a reader or a second writer never removes chunks
another writer has written but not flipped yet (how two concurrent ingests used to lose a document).
A generation is derived from the document's content, so writing the same document twice writes the
same rows, and every write is read back before and after the flip (what a Chroma server shared by
several machines, which a local lock cannot serialise, relies on).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from reground.tools.adapters.embeddings import Embedder, chroma_embedding_function
from reground.tools.stores.locking import WaitNotice, collection_lock, lock_path
from reground.tools.stores.vector_store import entered_again
from reground.tools.tuning.stores import STORE_IO

MANIFEST_SUFFIX = ".reground-manifest"
VERSION_ID = "__version__"


def paged(collection: Any, include: list[str], field: Any) -> Iterator[tuple[str, Any]]:
    """(id, field value) of every row, read STORE_IO.snapshot_page rows at a time: one read of a whole 200,000-chunk
    collection fails in Chroma ("too many SQL variables")."""
    offset = 0
    while True:
        page = collection.get(include=include, limit=STORE_IO.snapshot_page, offset=offset)
        yield from zip(page["ids"], field(page) or [], strict=False)
        if len(page["ids"]) < STORE_IO.snapshot_page:
            return
        offset += STORE_IO.snapshot_page


def chroma_client(data_dir: Path, chroma_url: str) -> Any:
    """A Chroma client: of the server at `chroma_url`, else of the embedded store in `data_dir`."""
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    if chroma_url:
        parsed = urlparse(chroma_url if "://" in chroma_url else f"http://{chroma_url}")
        return chromadb.HttpClient(
            host=parsed.hostname or "127.0.0.1",
            port=parsed.port or 8000,  # fact: Chroma's default port
            ssl=parsed.scheme == "https",
            settings=settings,
        )
    return chromadb.PersistentClient(path=str(data_dir / "chroma"), settings=settings)


class ChromaCollection:
    """A collection's chunks and manifest in a Chroma client, its write lock and its repair; the base the store's
    writes (`chroma.writes`) and reads (`chroma.reads`) build on."""

    def __init__(self, collection: str, client: Any, embedder: Embedder, data_dir: Path, chroma_url: str) -> None:
        self.collection = collection
        self.embedder = embedder
        self.data_dir = data_dir
        self.chroma_url = chroma_url
        self._bind(client)
        self._writer = threading.local()  # how deep this thread is in `writing()` (the lock is re-entrant)
        self._disk_mark = self._disk_state()
        self.last_repair: dict[str, Any] = {}
        self._unreported: list[str] = []  # documents repair dropped that no ingest summary has named yet

    def _bind(self, client: Any) -> None:
        """The client and the two collections every read and write goes through."""
        self._client = client
        self._chunks = client.get_collection(
            self.collection, embedding_function=chroma_embedding_function(self.embedder.name)
        )
        self._manifest = client.get_or_create_collection(self.collection + MANIFEST_SUFFIX)

    def _reconnect(self) -> None:
        """A fresh embedded client: the cached one does not follow another process's writes."""
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient.clear_system_cache()
        self._bind(chroma_client(self.data_dir, self.chroma_url))

    # --- the manifest ----------------------------------------------------------------------

    def _manifest_records(self) -> dict[str, dict[str, Any]]:
        return {i: dict(m or {}) for i, m in paged(self._manifest, ["metadatas"], lambda page: page["metadatas"])}

    def _version(self) -> str:
        got = self._manifest.get(ids=[VERSION_ID], include=["metadatas"])
        metas = got.get("metadatas") or []
        return str(metas[0].get("version", "")) if metas and metas[0] else ""

    def _bump_version(self) -> None:
        self._manifest.upsert(
            ids=[VERSION_ID], documents=["version"], metadatas=[{"version": uuid.uuid4().hex}], embeddings=[[0.0]]
        )

    def document_hashes(self) -> dict[str, str]:
        return {
            doc_id: str(meta.get("hash", ""))
            for doc_id, meta in self._manifest_records().items()
            if doc_id != VERSION_ID
        }

    def document_chunk_counts(self) -> dict[str, int]:
        """doc_id -> number of live chunks, as the manifest records them (cheap: no chunk is read)."""
        return {
            doc_id: int(meta.get("chunks", 0))
            for doc_id, meta in sorted(self._manifest_records().items())
            if doc_id != VERSION_ID
        }

    # --- the write lock and repair -----------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return lock_path(self.data_dir, self.collection, self.chroma_url)

    @contextlib.contextmanager
    def writing(self, *, on_wait: WaitNotice | None = None, timeout_s: float | None = None) -> Iterator[None]:
        """Hold the collection's write lock (re-entrant per thread); the collection is repaired on entry.

        Another writer holding it makes this wait, after telling `on_wait` (default: stderr) whom for.
        """
        with entered_again(self._writer) as held_already:
            if held_already:
                yield
                return
        with collection_lock(self.lock_path, self.collection, on_wait=on_wait, timeout_s=timeout_s):
            self._writer.depth = 1
            try:
                if not self.chroma_url and self._disk_state() != self._disk_mark:
                    # Another process wrote since this client last did: its cached view may be stale.
                    self._reconnect()
                self.repair()
                yield
            finally:
                self._writer.depth = 0
                self._disk_mark = self._disk_state()

    def _disk_state(self) -> tuple[tuple[int, int], ...]:
        """(mtime, size) of the embedded store's files: changes when any process writes to it."""
        if self.chroma_url:
            return ()
        out = []
        for name in ("chroma.sqlite3", "chroma.sqlite3-wal"):
            with contextlib.suppress(OSError):
                stat = (self.data_dir / "chroma" / name).stat()
                out.append((stat.st_mtime_ns, stat.st_size))
        return tuple(out)

    def repair(self) -> dict[str, Any]:
        """Make the manifest claim only what the store holds, and delete chunks no record names.

        A record whose live generation does not have exactly the chunks it counts is dropped, so the
        next ingest re-adds that document (its hash is gone). Leftover chunks (a crashed or superseded
        write) are deleted; on a Chroma server only once they are older than STORE_IO.server_leftover_grace_s,
        since another machine's writer may be about to flip to them. Call with the write lock held.
        """
        records = {d: m for d, m in self._manifest_records().items() if d != VERSION_ID}
        counts: dict[tuple[str, str], int] = {}
        rows: list[tuple[str, str, str, float]] = []
        for chunk_id, meta in paged(self._chunks, ["metadatas"], lambda page: page["metadatas"]):
            meta = meta or {}
            key = (str(meta.get("doc_id")), str(meta.get("generation")))
            counts[key] = counts.get(key, 0) + 1
            rows.append((chunk_id, key[0], key[1], float(meta.get("written_at", 0.0) or 0.0)))
        dropped = sorted(
            doc_id
            for doc_id, meta in records.items()
            if counts.get((doc_id, str(meta.get("generation", "")))) != int(meta.get("chunks", -1))
        )
        if dropped:
            self._manifest.delete(ids=dropped)
        live = {d: str(m.get("generation", "")) for d, m in records.items() if d not in dropped}
        oldest = time.time() - STORE_IO.server_leftover_grace_s if self.chroma_url else float("inf")
        stale = [row[0] for row in rows if live.get(row[1]) != row[2] and row[3] <= oldest]
        for start in range(0, len(stale), STORE_IO.write_batch):
            self._chunks.delete(ids=stale[start : start + STORE_IO.write_batch])
        if dropped:
            self._bump_version()
        self.last_repair = {"dropped": dropped, "leftovers_deleted": len(stale)}
        self._unreported.extend(dropped)
        return self.last_repair

    def take_repaired(self) -> list[str]:
        """The documents repairs dropped from the manifest since the last call (for an ingest's summary)."""
        out, self._unreported = sorted(set(self._unreported)), []
        return out
