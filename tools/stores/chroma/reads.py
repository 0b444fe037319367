"""Reading a Chroma collection: its version, a whole snapshot of the live chunks (read in pages, kept only when
whole), stored vectors of a few rows, and Chroma's own HNSW neighbours."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from reground.tools.stores.chroma.collection import VERSION_ID, ChromaCollection
from reground.tools.stores.chroma.writes import SENTENCE_VECTORS_KEY
from reground.tools.stores.vector_store import Snapshot, StoreError, sentence_vectors_bytes
from reground.tools.tuning.stores import STORE_IO
from reground.tools.types import Chunk


def chroma_read_error(exc: BaseException) -> bool:
    """A Chroma error raised by a read the server could not finish (e.g. rows deleted under it), not a transport
    failure."""
    try:
        from chromadb.errors import ChromaError
    except ImportError:  # pragma: no cover - chromadb is a dependency
        return False
    return isinstance(exc, ChromaError)


class ChromaReads(ChromaCollection):
    """The VectorStore's reads, and what a search index over the snapshot asks of the store."""

    _version_seen: tuple[tuple[tuple[int, int], ...], str] | None = None  # (disk state, version read)
    cache_version = True  # False: ask Chroma on every search (what `bench overhead` compares against)

    def _read_live(self, *, vectors: bool = True) -> tuple[dict[str, tuple[str, int]], list[dict[str, Any]]]:
        """The manifest's live generation and chunk count per document, and every stored chunk row, read in pages
        (bounded peak memory)."""
        live = {
            d: (str(m.get("generation", "")), int(m.get("chunks", 0) or 0))
            for d, m in self._manifest_records().items()
            if d != VERSION_ID
        }
        include = ["metadatas", "documents", *(["embeddings"] if vectors else [])]
        pages: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = self._chunks.get(include=include, limit=STORE_IO.snapshot_page, offset=offset)
            pages.append(page)
            if len(page["ids"]) < STORE_IO.snapshot_page:
                return live, pages
            offset += STORE_IO.snapshot_page

    def version(self) -> str:
        """The manifest's version record: bumped by every write, so readers know to reload.

        Every search asks for it; reading it is a Chroma query (part of what `bench overhead`'s savings-off turns
        pay, evals/results/bench.json `overhead`). The
        embedded store remembers it with the (mtime, size) of its database files, which any writing process
        changes, and reads it again only when they changed (a stat, microseconds). A server is always asked.
        """
        if self.chroma_url or not self.cache_version:
            return self._version()
        state = self._disk_state()
        cached = self._version_seen
        if state and cached is not None and cached[0] == state:
            return cached[1]
        version = self._version()
        self._version_seen = (state, version)
        return version

    def load_snapshot(self, *, vectors: bool = True) -> Snapshot:
        """Every live chunk (the manifest's generation of each document) with its vector (`vectors=False`: an
        empty matrix, for an index that searches vectors in Chroma's own HNSW index) and its row id.

        Chroma has no read transaction, so a writer replacing documents meanwhile can move the rows under the
        pages being read (Chroma then fails with "Error finding id") or leave a document's old generation named
        by the manifest but already deleted. A read is kept only when it is whole (every document the manifest
        names has all the chunks of that generation: each document is read at one version, old or new); otherwise
        it is read again, up to STORE_IO.snapshot_attempts times with a short back-off (a writer flips one document in
        milliseconds). The snapshot carries the version read before it, so a write that landed during the read
        makes the next search reload. A shortfall that persists at one version is damage, not a writer (the next
        writer's repair drops those records): that read is kept.
        """
        failure: Exception | None = None
        steady: Snapshot | None = None
        for attempt in range(STORE_IO.snapshot_attempts):
            if attempt:
                time.sleep(min(STORE_IO.snapshot_backoff_s * 2 ** (attempt - 1), 1.0))
            try:
                version = self._version()
                live, pages = self._read_live(vectors=vectors)
                snapshot, whole = self._snapshot(version, live, pages, vectors=vectors)
                if whole:
                    return snapshot
                moved = self._version() != version
                steady = None if moved or (steady is not None and steady.version != version) else snapshot
                failure = None
            except Exception as exc:
                if self.chroma_url and not chroma_read_error(exc):
                    raise  # a server that is down or refuses: not a moving snapshot
                failure = exc
                if not self.chroma_url:
                    # Another process (e.g. `reground ingest` next to a running server) rewrote the embedded
                    # store: a fresh client sees its writes.
                    self._reconnect()
        if steady is not None and failure is None:
            return steady
        reason = f" (last: {type(failure).__name__}: {failure})" if failure else ""
        raise StoreError(
            f"collection {self.collection!r} changed during each of {STORE_IO.snapshot_attempts} reads (a writer is "
            "replacing "
            f"documents){reason}; ask again when the ingest is done"
        ) from failure

    def _snapshot(
        self, version: str, live: Mapping[str, tuple[str, int]], pages: Sequence[Mapping[str, Any]], *, vectors: bool
    ) -> tuple[Snapshot, bool]:
        """The live rows of the pages as a snapshot, and whether it is whole: False when a live document lacks some
        of its chunks (a writer deleted its generation between the manifest read and the chunk read)."""
        chunks: list[Chunk] = []
        rows: list[Any] = []
        row_ids: list[str] = []
        found: dict[str, int] = {}
        for page in pages:
            embeddings = page.get("embeddings")
            for n, (row_id, meta, text) in enumerate(
                zip(page["ids"], page["metadatas"] or [], page["documents"] or [], strict=False)
            ):
                meta = meta or {}
                doc_id = str(meta.get("doc_id"))
                if live.get(doc_id, ("", 0))[0] != str(meta.get("generation")):
                    continue
                found[doc_id] = found.get(doc_id, 0) + 1
                chunks.append(
                    Chunk(
                        chunk_id=str(meta["chunk_id"]),
                        doc_id=doc_id,
                        title=str(meta.get("title", "")),
                        section=str(meta.get("section", "")),
                        url=str(meta.get("url", "")),
                        position=int(meta.get("position", 0)),
                        text=str(text),
                        metadata=json.loads(str(meta.get("metadata_json", "{}"))),
                    )
                )
                row_ids.append(str(row_id))
                if vectors and embeddings is not None:
                    rows.append(embeddings[n])
        whole = all(found.get(doc_id, 0) == count for doc_id, (_generation, count) in live.items())
        matrix = (
            np.asarray(rows, dtype=np.float32).reshape(len(chunks), -1)
            if rows
            else np.zeros((0, self.embedder.dimension), dtype=np.float32)  # empty, or vectors not loaded
        )
        return Snapshot(version, chunks, matrix, row_ids=row_ids), whole

    def sentence_vectors_of(self, row_ids: Sequence[str]) -> list[bytes | None]:
        """The packed sentence vectors of stored rows (read on demand: a turn needs those of a few passages, and
        keeping every chunk's in memory would cost more than its vectors)."""
        if not row_ids:
            return []
        got = self._chunks.get(ids=list(row_ids), include=["metadatas"])
        found = {
            row_id: (meta or {}).get(SENTENCE_VECTORS_KEY)
            for row_id, meta in zip(got["ids"], got["metadatas"] or [], strict=False)
        }
        return [
            sentence_vectors_bytes(packed) if isinstance(packed := found.get(r), str) and packed else None
            for r in row_ids
        ]

    def vectors_of(self, row_ids: Sequence[str]) -> np.ndarray:
        """Stored vectors of rows, in order (what an index without vectors in memory reads for a few chunks)."""
        if not row_ids:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        got = self._chunks.get(ids=list(row_ids), include=["embeddings"])
        by_id = dict(zip(got["ids"], got["embeddings"] if got["embeddings"] is not None else [], strict=False))
        missing = [r for r in row_ids if r not in by_id]
        if missing:
            shown = missing[: STORE_IO.ids_named]
            raise StoreError(f"collection {self.collection!r}: rows {shown} are gone; retry the search")
        return np.asarray([by_id[r] for r in row_ids], dtype=np.float32)

    def ann_search(self, query: np.ndarray, n: int) -> list[tuple[str, float]]:
        """Chroma's own HNSW index: the `n` nearest stored rows as (row id, cosine similarity), approximate.
        Rows of a generation the manifest does not name yet (a writer mid-flip) may be among them: callers keep
        only the rows of their snapshot."""
        got = self._chunks.query(
            query_embeddings=[np.asarray(query, dtype=np.float32).tolist()], n_results=n, include=["distances"]
        )
        return [(str(i), 1.0 - float(d)) for i, d in zip(got["ids"][0], got["distances"][0], strict=True)]
