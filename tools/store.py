"""The persistent passage store: Chroma (embedded or server) + a BM25 index of the same chunks.

It is the one place where a user's metadata scope is enforced: every read takes `where`, and the
same predicate (`matches`) is applied to dense, lexical and direct reads, so no stage can leak.

Crash safety: a per-collection manifest (a second Chroma collection, one record per document)
names each document's live generation. New chunks are written under a new generation, then the
manifest record flips (a single upsert), then old chunks are deleted. Readers only see chunks of
the live generation, so a crash at any point leaves every document fully old or fully new; leftovers
are collected on the next open.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from reground.tools.embeddings import MINILM_SPEC, Embedder, chroma_embedding_function, load_embedder
from reground.tools.lexical import lexical_tokens
from reground.tools.paths import data_dir as default_data_dir
from reground.tools.types import Chunk

META_PREFIX = "m_"
MATCH_ANY = "all"
MANIFEST_SUFFIX = ".reground-manifest"
VERSION_ID = "__version__"


class StoreError(RuntimeError):
    """A store problem; the message names the collection and what to do."""


class CollectionNotFoundError(StoreError):
    pass


class EmptyCollectionError(StoreError):
    pass


Where = dict[str, Any]


def collection_name_problem(collection: str) -> str | None:
    """Why a collection name is invalid (Chroma's rules, with room for the manifest suffix), or None."""
    if 3 <= len(collection) <= 200 and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]", collection):
        return None
    return (
        f"invalid collection name {collection!r}: 3-200 characters, letters, digits, '.', '_' or '-', "
        "starting and ending with a letter or digit"
    )


def normalize_where(where: Where | None) -> dict[str, list[str]]:
    """{field: value | [values]} → {field: [str values]}; rejects shapes we cannot enforce."""
    if not where:
        return {}
    if not isinstance(where, dict):
        raise StoreError(f"metadata filter must be an object like {{'country': 'DE'}}, got {where!r}")
    out: dict[str, list[str]] = {}
    for key, value in where.items():
        if not isinstance(key, str) or key.startswith("$"):
            raise StoreError(f"metadata filter keys are field names; operators like {key!r} are not accepted")
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, (str, int, float, bool)) for v in values):
            raise StoreError(f"metadata filter {key!r} needs a value or a list of values, got {value!r}")
        out[key] = [str(v) for v in values]
    return out


def matches(metadata: dict[str, Any], where: dict[str, list[str]]) -> bool:
    """Fail closed: every filtered field must be present and equal one of the values, or be 'all'."""
    for key, allowed in where.items():
        if key not in metadata:
            return False
        value = str(metadata[key])
        if value != MATCH_ANY and value not in allowed and not (set(value.split(",")) & set(allowed)):
            return False
    return True


def _client(data_dir: Path, chroma_url: str) -> Any:
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    if chroma_url:
        parsed = urlparse(chroma_url if "://" in chroma_url else f"http://{chroma_url}")
        return chromadb.HttpClient(
            host=parsed.hostname or "127.0.0.1",
            port=parsed.port or 8000,
            ssl=parsed.scheme == "https",
            settings=settings,
        )
    return chromadb.PersistentClient(path=str(data_dir / "chroma"), settings=settings)


class _Snapshot:
    """Live chunks of one version of a collection, held in memory for millisecond reads."""

    def __init__(self, version: str, chunks: list[Chunk], vectors: np.ndarray) -> None:
        self.version = version
        self.chunks = chunks
        self.vectors = vectors
        self.index = {c["chunk_id"]: i for i, c in enumerate(chunks)}
        self.by_doc: dict[str, list[int]] = {}
        for i, c in enumerate(chunks):
            self.by_doc.setdefault(c["doc_id"], []).append(i)
        self._bm25: Any = None
        self._allowed: dict[tuple[tuple[str, tuple[str, ...]], ...], np.ndarray] = {}
        self._lock = threading.Lock()

    def allowed(self, scope: dict[str, list[str]]) -> np.ndarray | None:
        """Which chunks the scope lets through (None: no scope, all of them); computed once per scope,
        since every search of a turn (dense and lexical, each query) asks for the same one."""
        if not scope:
            return None
        key = tuple(sorted((name, tuple(values)) for name, values in scope.items()))
        with self._lock:
            mask = self._allowed.get(key)
        if mask is None:
            mask = np.fromiter((matches(c["metadata"], scope) for c in self.chunks), dtype=bool, count=len(self.chunks))
            with self._lock:
                self._allowed[key] = mask
        return mask

    def bm25(self) -> Any:
        with self._lock:
            if self._bm25 is None and self.chunks:
                import bm25s

                corpus = [lexical_tokens(f"{c['title']} {c['section']} {c['text']}") for c in self.chunks]
                retriever = bm25s.BM25()
                retriever.index(corpus, show_progress=False)
                self._bm25 = retriever
            return self._bm25


class PassageStore:
    """A collection of chunks with dense and lexical search, filtered by the user's scope."""

    def __init__(self, collection: str, client: Any, embedder: Embedder, data_dir: Path, chroma_url: str) -> None:
        self.collection = collection
        self.embedder = embedder
        self.data_dir = data_dir
        self.chroma_url = chroma_url
        self._bind(client)
        self._snapshot: _Snapshot | None = None
        self._lock = threading.Lock()

    # --- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        collection: str,
        *,
        data_dir: str | Path | None = None,
        embedder: Embedder | None = None,
        chroma_url: str = "",
        create: bool = False,
    ) -> PassageStore:
        problem = collection_name_problem(collection)
        if problem:
            raise StoreError(problem)
        root = default_data_dir(data_dir)
        embedder = embedder or load_embedder(MINILM_SPEC)
        try:
            client = _client(root, chroma_url)
        except Exception as exc:
            where = chroma_url or str(root / "chroma")
            raise StoreError(f"cannot open the Chroma store at {where}: {exc}") from exc
        names = {c if isinstance(c, str) else c.name for c in client.list_collections()}
        if collection not in names:
            if not create:
                where = chroma_url or str(root)
                known = sorted(n for n in names if not n.endswith(MANIFEST_SUFFIX))
                raise CollectionNotFoundError(
                    f"collection {collection!r} does not exist in {where} (known: {known or 'none'}); create it with "
                    f"`reground ingest PATH --collection {collection}`"
                )
            client.create_collection(
                collection,
                embedding_function=chroma_embedding_function(embedder.name),
                metadata={"hnsw:space": "cosine", "embedding": embedder.name},
            )
        store = cls(collection, client, embedder, root, chroma_url)
        store.collect_garbage()
        return store

    @staticmethod
    def list_collections(data_dir: str | Path | None = None, chroma_url: str = "") -> list[str]:
        client = _client(default_data_dir(data_dir), chroma_url)
        names = [c if isinstance(c, str) else c.name for c in client.list_collections()]
        return sorted(n for n in names if not n.endswith(MANIFEST_SUFFIX))

    # --- the manifest ----------------------------------------------------------------------

    def _manifest_records(self) -> dict[str, dict[str, Any]]:
        got = self._manifest.get(include=["metadatas"])
        return {i: dict(m or {}) for i, m in zip(got["ids"], got["metadatas"] or [], strict=False)}

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

    # --- writing ---------------------------------------------------------------------------

    def replace_document(self, doc_id: str, content_hash: str, chunks: list[Chunk]) -> None:
        """Write the new generation, flip the manifest, then delete the old generation."""
        generation = uuid.uuid4().hex[:12]
        if chunks:
            vectors = self.embedder.embed([c["text"] for c in chunks])
            metadatas = [self._chunk_metadata(c, generation) for c in chunks]
            ids = [f"{c['chunk_id']}:{generation}" for c in chunks]
            for start in range(0, len(ids), 500):
                end = start + 500
                self._chunks.add(
                    ids=ids[start:end],
                    documents=[c["text"] for c in chunks[start:end]],
                    metadatas=metadatas[start:end],
                    embeddings=vectors[start:end].tolist(),
                )
        self._manifest.upsert(
            ids=[doc_id],
            documents=[doc_id],
            metadatas=[{"hash": content_hash, "generation": generation, "chunks": len(chunks)}],
            embeddings=[[0.0]],
        )
        self._delete_generations(doc_id, keep=generation)
        self._bump_version()

    def delete_document(self, doc_id: str) -> int:
        existing = self._chunks.get(where={"doc_id": doc_id}, include=[])
        # The manifest record goes first: a crash before the chunks are deleted leaves chunks no record
        # names (unseen, collected on the next open), never a record (and hash) naming deleted chunks.
        self._manifest.delete(ids=[doc_id])
        if existing["ids"]:
            self._chunks.delete(ids=existing["ids"])
        self._bump_version()
        return len(existing["ids"])

    def _delete_generations(self, doc_id: str, *, keep: str) -> None:
        stale = self._chunks.get(where={"$and": [{"doc_id": doc_id}, {"generation": {"$ne": keep}}]}, include=[])
        if stale["ids"]:
            self._chunks.delete(ids=stale["ids"])

    def collect_garbage(self) -> int:
        """Delete chunks of generations the manifest does not name (left by a crash)."""
        live = {d: str(m.get("generation", "")) for d, m in self._manifest_records().items() if d != VERSION_ID}
        got = self._chunks.get(include=["metadatas"])
        stale = [
            chunk_id
            for chunk_id, meta in zip(got["ids"], got["metadatas"] or [], strict=False)
            if live.get(str((meta or {}).get("doc_id"))) != str((meta or {}).get("generation"))
        ]
        for start in range(0, len(stale), 500):
            self._chunks.delete(ids=stale[start : start + 500])
        return len(stale)

    @staticmethod
    def _chunk_metadata(chunk: Chunk, generation: str) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "doc_id": chunk["doc_id"],
            "chunk_id": chunk["chunk_id"],
            "title": chunk["title"],
            "section": chunk["section"],
            "url": chunk["url"],
            "position": chunk["position"],
            "generation": generation,
            "metadata_json": json.dumps(chunk["metadata"], sort_keys=True),
        }
        for key, value in chunk["metadata"].items():
            meta[META_PREFIX + key] = value if isinstance(value, (int, float, bool)) else str(value)
        return meta

    # --- reading ---------------------------------------------------------------------------

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
        self._bind(_client(self.data_dir, self.chroma_url))

    def _read_live(self) -> tuple[dict[str, str], dict[str, Any]]:
        """The manifest's live generations and every stored chunk row."""
        live = {d: str(m.get("generation", "")) for d, m in self._manifest_records().items() if d != VERSION_ID}
        return live, self._chunks.get(include=["metadatas", "documents", "embeddings"])

    def _load(self) -> _Snapshot:
        """The in-memory snapshot of live chunks, reloaded when another writer changed the collection."""
        version = self._version()
        with self._lock:
            if self._snapshot is not None and self._snapshot.version == version:
                return self._snapshot
            try:
                live, got = self._read_live()
            except Exception:
                if self.chroma_url or self._snapshot is None:
                    raise
                # Another process (e.g. `reground ingest` next to a running server) rewrote the embedded store.
                self._reconnect()
                version = self._version()
                live, got = self._read_live()
            chunks: list[Chunk] = []
            rows: list[Any] = []
            for meta, text, vector in zip(
                got["metadatas"] or [],
                got["documents"] or [],
                got["embeddings"] if got["embeddings"] is not None else [],
                strict=False,
            ):
                meta = meta or {}
                if live.get(str(meta.get("doc_id"))) != str(meta.get("generation")):
                    continue
                chunks.append(
                    Chunk(
                        chunk_id=str(meta["chunk_id"]),
                        doc_id=str(meta["doc_id"]),
                        title=str(meta.get("title", "")),
                        section=str(meta.get("section", "")),
                        url=str(meta.get("url", "")),
                        position=int(meta.get("position", 0)),
                        text=str(text),
                        metadata=json.loads(str(meta.get("metadata_json", "{}"))),
                    )
                )
                rows.append(vector)
            order = sorted(range(len(chunks)), key=lambda i: (chunks[i]["doc_id"], chunks[i]["position"]))
            chunks = [chunks[i] for i in order]
            vectors = np.asarray([rows[i] for i in order], dtype=np.float32).reshape(len(chunks), -1)
            self._snapshot = _Snapshot(version, chunks, vectors)
            return self._snapshot

    def count(self) -> int:
        return len(self._load().chunks)

    def all_chunks(self, where: Where | None = None) -> list[Chunk]:
        scope = normalize_where(where)
        return [c for c in self._load().chunks if matches(c["metadata"], scope)]

    def chunks_for_documents(self, doc_ids: Sequence[str], where: Where | None = None) -> list[Chunk]:
        snapshot, scope = self._load(), normalize_where(where)
        out: list[Chunk] = []
        for doc_id in dict.fromkeys(doc_ids):
            out.extend(
                c for i in snapshot.by_doc.get(doc_id, []) if matches((c := snapshot.chunks[i])["metadata"], scope)
            )
        return out

    def embeddings_for(self, chunk_ids: Sequence[str]) -> np.ndarray:
        snapshot = self._load()
        missing = [c for c in chunk_ids if c not in snapshot.index]
        if missing:
            raise StoreError(f"unknown chunk ids in collection {self.collection!r}: {missing[:3]}")
        if not chunk_ids:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return snapshot.vectors[[snapshot.index[c] for c in chunk_ids]]

    def dense_search(
        self, query_embedding: np.ndarray, k: int, where: Where | None = None
    ) -> list[tuple[Chunk, float]]:
        """Exact cosine similarity over the snapshot's (normalised) vectors, masked by the scope.

        The snapshot already holds every live vector, so a matrix product is both exact and faster than a
        round trip through Chroma's approximate index (0.2 ms vs 30 ms for 2,000 chunks on 2 cores).
        """
        snapshot, scope = self._load(), normalize_where(where)
        if not snapshot.chunks or k <= 0:
            return []
        query = np.asarray(query_embedding, dtype=np.float32).reshape(-1)
        scores = snapshot.vectors @ query / max(float(np.linalg.norm(query)), 1e-12)
        allowed = snapshot.allowed(scope)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        k = min(k, int(np.isfinite(scores).sum()))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(snapshot.chunks[i], float(scores[i])) for i in top]

    def lexical_search(self, query: str, k: int, where: Where | None = None) -> list[tuple[Chunk, float]]:
        """BM25 over title + section + text of every live chunk, masked by the scope."""
        snapshot, scope = self._load(), normalize_where(where)
        tokens = lexical_tokens(query)
        bm25 = snapshot.bm25()
        if not tokens or bm25 is None or k <= 0:
            return []
        scores = np.asarray(bm25.get_scores(tokens), dtype=np.float32)
        allowed = snapshot.allowed(scope)
        if allowed is not None:
            scores = np.where(allowed, scores, -1.0)
        top = np.argsort(-scores)[:k]
        return [(snapshot.chunks[i], float(scores[i])) for i in top if scores[i] > 0]
