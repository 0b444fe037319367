"""Writing a Chroma collection: a document's new generation written and read back, the manifest flipped to it,
the old generation deleted, the flip verified (the protocol `chroma.collection` describes)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from reground.tools.stores.chroma.collection import ChromaCollection
from reground.tools.stores.search_index import BOOKKEEPING_FIELDS
from reground.tools.stores.vector_store import EmbeddedDocument, StoreError, chunks_not_held, sentence_vectors_text
from reground.tools.stores.vectors import chunk_vectors
from reground.tools.tuning.stores import STORE_IO
from reground.tools.types import Chunk

META_PREFIX = "m_"  # chunk metadata: each metadata field, for Chroma's own filters
SENTENCE_VECTORS_KEY = "sentence_vectors"  # chunk metadata: its sentences' vectors (`pack_sentence_vectors`)


def generation_for(doc_id: str, content_hash: str) -> str:
    """Deterministic per document content: two writers of the same content write the same rows."""
    return hashlib.sha256(f"{doc_id}\0{content_hash}".encode()).hexdigest()[:12]  # fact: the generation id format


class ChromaWrites(ChromaCollection):
    """The VectorStore's writes: replacing and deleting documents under the write lock."""

    def replace_document(self, doc_id: str, content_hash: str, chunks: list[Chunk]) -> None:
        """Write the new generation, read it back, flip the manifest, delete the old generation, verify.

        The generation follows the content, so a retry (or a second writer of the same content) rewrites
        the same rows. If another writer (on a Chroma server) deleted this generation before or after the
        flip, it is written again, up to STORE_IO.write_attempts times.
        """
        with self.writing():
            self.write_embedded(EmbeddedDocument(doc_id, content_hash, chunks, *chunk_vectors(self.embedder, chunks)))

    def write_embedded(self, document: EmbeddedDocument) -> None:
        """`replace_document` with the chunks already embedded: same write protocol, under the write lock."""
        doc_id, content_hash, chunks, vectors, sentences = document
        generation = generation_for(doc_id, content_hash)
        with self.writing():
            for _attempt in range(STORE_IO.write_attempts):
                self._write_generation(chunks, generation, vectors, sentences)
                self._manifest.upsert(
                    ids=[doc_id],
                    documents=[doc_id],
                    metadatas=[{"hash": content_hash, "generation": generation, "chunks": len(chunks)}],
                    embeddings=[[0.0]],
                )
                self._delete_generations(doc_id, keep=generation)
                self._bump_version()
                if self._verified(doc_id, generation, len(chunks)):
                    return
        raise StoreError(
            f"collection {self.collection!r}: document {doc_id!r} could not be written completely after "
            f"{STORE_IO.write_attempts} attempts (another writer kept replacing it); run the ingest again"
        )

    def update_metadata(self, documents: Mapping[str, Sequence[Chunk]]) -> None:
        """Give these documents' live chunks (matched by chunk_id) this metadata in place, under the write lock:
        text, vectors, sentence vectors and content hashes stay (what re-screening unchanged documents writes,
        ingest.py). Each row is updated whole, so a crash midway leaves every chunk's flags and mark from one
        screening; the version is bumped once, so a search index reloads its snapshot."""
        with self.writing():
            records = self._manifest.get(ids=list(documents), include=["metadatas"])
            pairs = zip(records["ids"], records["metadatas"] or [], strict=False)
            live = {doc_id: str((meta or {}).get("generation", "")) for doc_id, meta in pairs}
            rows = [(chunk, live.get(doc_id, "")) for doc_id, chunks in documents.items() for chunk in chunks]
            ids = [f"{chunk['chunk_id']}:{generation}" for chunk, generation in rows]
            old: dict[str, Any] = {}
            for start in range(0, len(ids), STORE_IO.write_batch):
                held = self._chunks.get(ids=ids[start : start + STORE_IO.write_batch], include=["metadatas"])
                old.update(zip(held["ids"], held["metadatas"] or [], strict=False))
            missing = sorted({c["doc_id"] for (c, _generation), i in zip(rows, ids, strict=True) if i not in old})
            if missing:
                raise chunks_not_held(self.collection, missing)
            metadatas: list[dict[str, Any]] = []
            for row_id, (chunk, generation) in zip(ids, rows, strict=True):
                meta = self._chunk_metadata(chunk, generation)
                del meta["written_at"]  # the row's own stays (repair reads it)
                gone = [key for key in old[row_id] or {} if key.startswith(META_PREFIX) and key not in meta]
                metadatas.append({**meta, **dict.fromkeys(gone)})  # None: Chroma drops the field
            for start in range(0, len(ids), STORE_IO.write_batch):
                end = start + STORE_IO.write_batch
                self._chunks.update(ids=ids[start:end], metadatas=metadatas[start:end])
            self._bump_version()

    def _write_generation(
        self, chunks: list[Chunk], generation: str, vectors: Any, sentences: Sequence[bytes | None] = ()
    ) -> None:
        if not chunks:
            return
        written_at = time.time()
        metadatas = [self._chunk_metadata(c, generation, written_at) for c in chunks]
        for meta, packed in zip(metadatas, sentences, strict=False):
            if packed:
                meta[SENTENCE_VECTORS_KEY] = sentence_vectors_text(packed)
        ids = [f"{c['chunk_id']}:{generation}" for c in chunks]
        for start in range(0, len(ids), STORE_IO.write_batch):
            end = start + STORE_IO.write_batch
            self._chunks.add(
                ids=ids[start:end],
                documents=[c["text"] for c in chunks[start:end]],
                metadatas=metadatas[start:end],
                embeddings=vectors[start:end].tolist(),
            )
        found = set(self._chunks.get(ids=ids, include=[])["ids"])
        if len(found) != len(ids):
            raise StoreError(
                f"collection {self.collection!r}: Chroma kept {len(found)} of {len(ids)} chunks of "
                f"{chunks[0]['doc_id']!r}; nothing was flipped, run the ingest again"
            )

    def _verified(self, doc_id: str, generation: str, expected: int) -> bool:
        """After the flip: the manifest names this generation with all its chunks, or another writer's."""
        got = self._manifest.get(ids=[doc_id], include=["metadatas"])
        metas = got.get("metadatas") or []
        named = str((metas[0] or {}).get("generation", "")) if metas else ""
        if named and named != generation:
            return True  # superseded by a later writer of this document: its write is whole or it retries
        held = self._chunks.get(where={"$and": [{"doc_id": doc_id}, {"generation": generation}]}, include=[])
        return bool(named) and len(held["ids"]) == expected

    def delete_document(self, doc_id: str) -> int:
        with self.writing():
            existing = self._chunks.get(where={"doc_id": doc_id}, include=[])
            # The manifest record goes first: a crash before the chunks are deleted leaves chunks no record
            # names (unseen, collected by the next writer), never a record (and hash) naming deleted chunks.
            self._manifest.delete(ids=[doc_id])
            if existing["ids"]:
                self._chunks.delete(ids=existing["ids"])
            self._bump_version()
            return len(existing["ids"])

    def _delete_generations(self, doc_id: str, *, keep: str) -> None:
        stale = self._chunks.get(where={"$and": [{"doc_id": doc_id}, {"generation": {"$ne": keep}}]}, include=[])
        if stale["ids"]:
            self._chunks.delete(ids=stale["ids"])

    @staticmethod
    def _chunk_metadata(chunk: Chunk, generation: str, written_at: float = 0.0) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "doc_id": chunk["doc_id"],
            "chunk_id": chunk["chunk_id"],
            "title": chunk["title"],
            "section": chunk["section"],
            "url": chunk["url"],
            "position": chunk["position"],
            "generation": generation,
            "written_at": written_at,
            "metadata_json": json.dumps(chunk["metadata"], sort_keys=True),
        }
        for key, value in chunk["metadata"].items():
            if key in BOOKKEEPING_FIELDS:  # kept in metadata_json alone: no search filters on it
                continue
            meta[META_PREFIX + key] = value if isinstance(value, (int, float, bool)) else str(value)
        return meta
