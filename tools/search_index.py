"""The in-memory search index over a vector store's live snapshot: exact dense search, BM25, scoped reads.

It is the one place where a user's metadata scope is enforced on reads: every method takes `where`, and the
same predicate (`matches`) is applied to dense, lexical and direct reads, so no stage can leak. A scope naming
a field no document has is an error (`UnknownMetadataFieldError`), not an empty result.

The index knows a store only through `VectorStore` (tools/vector_store.py): it asks for the store's version on
every read and reloads the snapshot when another writer changed it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from reground.tools.lexical import BM25, lexical_tokens
from reground.tools.types import Chunk
from reground.tools.vector_store import (
    MetadataFilterError,
    Snapshot,
    StoreError,
    UnknownMetadataFieldError,
    VectorStore,
    unpack_sentence_vectors,
)

MATCH_ANY = "all"
FILTER_OPERATORS = ("$eq", "$in")

Where = dict[str, Any]

_FILTER_HELP = "use {'field': value}, {'field': [v1, v2]}, {'field': {'$eq': value}} or {'field': {'$in': [v1, v2]}}"


def _filter_values(key: str, value: Any) -> list[Any]:
    """The allowed values of one filter entry; raises MetadataFilterError on anything else."""
    if isinstance(value, dict):
        if len(value) != 1:
            raise MetadataFilterError(
                f"metadata filter {key!r} must have exactly one operator, got {value!r}; {_FILTER_HELP}"
            )
        ((op, operand),) = value.items()
        if op not in FILTER_OPERATORS:
            raise MetadataFilterError(
                f"unsupported metadata filter operator {op!r} on {key!r} (supported: {', '.join(FILTER_OPERATORS)}); "
                f"{_FILTER_HELP}"
            )
        if op == "$in" and not isinstance(operand, list):
            raise MetadataFilterError(f"metadata filter {key!r}: '$in' needs a list of values, got {operand!r}")
        return operand if isinstance(operand, list) else [operand]
    return value if isinstance(value, list) else [value]


def normalize_where(where: Where | None) -> dict[str, list[str]]:
    """{field: value | [values] | {'$eq': v} | {'$in': [...]}} → {field: [str values]}; rejects the rest."""
    if not where:
        return {}
    if not isinstance(where, dict):
        raise MetadataFilterError(f"metadata filter must be an object like {{'country': 'DE'}}, got {where!r}")
    out: dict[str, list[str]] = {}
    for key, value in where.items():
        if not isinstance(key, str) or not key.strip():
            raise MetadataFilterError(f"metadata filter keys must be field names, got {key!r}; {_FILTER_HELP}")
        if key.startswith("$"):
            raise MetadataFilterError(
                f"unsupported metadata filter operator {key!r} at the top level (fields are AND-ed); {_FILTER_HELP}"
            )
        values = _filter_values(key, value)
        if not values or not all(isinstance(v, (str, int, float, bool)) for v in values):
            raise MetadataFilterError(
                f"metadata filter {key!r} needs a string/number/boolean or a non-empty list of them, got {value!r}"
            )
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


class _Loaded:
    """One snapshot with what reads derive from it (positions, per-document rows, fields, BM25, scope masks)."""

    def __init__(self, snapshot: Snapshot) -> None:
        order = sorted(
            range(len(snapshot.chunks)), key=lambda i: (snapshot.chunks[i]["doc_id"], snapshot.chunks[i]["position"])
        )
        self.version = snapshot.version
        self.chunks = [snapshot.chunks[i] for i in order]
        self.vectors = np.asarray(snapshot.vectors, dtype=np.float32)[order] if order else snapshot.vectors
        self.dimension = int(self.vectors.shape[1]) if self.vectors.ndim == 2 else 0
        kept = snapshot.sentence_vectors
        self.sentences: list[bytes | None] = [kept[i] for i in order] if len(kept) == len(snapshot.chunks) else []
        self.index = {c["chunk_id"]: i for i, c in enumerate(self.chunks)}
        self.by_doc: dict[str, list[int]] = {}
        for i, c in enumerate(self.chunks):
            self.by_doc.setdefault(c["doc_id"], []).append(i)
        self.fields: frozenset[str] = frozenset(key for c in self.chunks for key in c["metadata"])
        self._bm25: BM25 | None = None
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

    def bm25(self) -> BM25:
        with self._lock:
            if self._bm25 is None:
                self._bm25 = BM25.from_texts([f"{c['title']} {c['section']} {c['text']}" for c in self.chunks])
            return self._bm25


class SearchIndex:
    """Dense and lexical search over a store's live chunks, filtered by the user's scope.

    Reads are served from memory (a snapshot of every live chunk and vector); the store is asked only for its
    version, and reloaded when that changed. Satisfies `tools.retrieval.SearchStore`.
    """

    def __init__(self, store: VectorStore) -> None:
        self.store = store
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()

    @property
    def collection(self) -> str:
        return self.store.collection

    @property
    def embedder(self) -> Any:
        return self.store.embedder

    def _load(self) -> _Loaded:
        version = self.store.version()
        with self._lock:
            if self._loaded is None or self._loaded.version != version or not version:
                self._loaded = _Loaded(self.store.load_snapshot())
            return self._loaded

    def count(self) -> int:
        return len(self._load().chunks)

    def metadata_fields(self) -> list[str]:
        """The metadata fields some document of the collection has: what a `where` may name."""
        return sorted(self._load().fields)

    def check_filter(self, where: Where | None) -> dict[str, list[str]]:
        """The normalised scope, or MetadataFilterError (shape, operator) / UnknownMetadataFieldError.

        Cheap (no model, no search): call it before a run so a bad filter fails before any LLM call.
        """
        return self._scope(self._load(), where)

    def _scope(self, loaded: _Loaded, where: Where | None) -> dict[str, list[str]]:
        scope = normalize_where(where)
        unknown = sorted(set(scope) - loaded.fields)
        if unknown and loaded.chunks:
            known = ", ".join(sorted(loaded.fields)) or "none"
            raise UnknownMetadataFieldError(
                f"metadata filter names {', '.join(map(repr, unknown))}, which no document in collection "
                f"{self.collection!r} has (known fields: {known}); fix the filter or ingest documents with that field"
            )
        return scope

    def all_chunks(self, where: Where | None = None) -> list[Chunk]:
        loaded = self._load()
        scope = self._scope(loaded, where)
        return [c for c in loaded.chunks if matches(c["metadata"], scope)]

    def chunks_for_documents(self, doc_ids: Sequence[str], where: Where | None = None) -> list[Chunk]:
        loaded = self._load()
        scope = self._scope(loaded, where)
        out: list[Chunk] = []
        for doc_id in dict.fromkeys(doc_ids):
            out.extend(c for i in loaded.by_doc.get(doc_id, []) if matches((c := loaded.chunks[i])["metadata"], scope))
        return out

    def embeddings_for(self, chunk_ids: Sequence[str]) -> np.ndarray:
        loaded = self._load()
        missing = [c for c in chunk_ids if c not in loaded.index]
        if missing:
            raise StoreError(f"unknown chunk ids in collection {self.collection!r}: {missing[:3]}")
        if not chunk_ids:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return loaded.vectors[[loaded.index[c] for c in chunk_ids]]

    def sentence_vectors(self, passages: Sequence[Mapping[str, Any]]) -> list[np.ndarray | None]:
        """Per passage, its sentences' vectors kept at ingest (rows in `tools.evidence.text_sentences` order), or
        None when none were kept or the passage's text is not the stored chunk's (e.g. sanitized for the prompt)."""
        loaded = self._load()
        out: list[np.ndarray | None] = []
        for passage in passages:
            i = loaded.index.get(str(passage.get("chunk_id", "")))
            packed = loaded.sentences[i] if i is not None and loaded.sentences else None
            same = i is not None and loaded.chunks[i]["text"] == passage.get("text")
            out.append(unpack_sentence_vectors(packed, loaded.dimension) if packed is not None and same else None)
        return out

    def dense_search(
        self, query_embedding: np.ndarray, k: int, where: Where | None = None
    ) -> list[tuple[Chunk, float]]:
        """Exact cosine similarity over the snapshot's (normalised) vectors, masked by the scope.

        The snapshot already holds every live vector, so a matrix product is both exact and faster than a
        round trip through a vector database's approximate index (0.2 ms vs 30 ms for 2,000 chunks on 2 cores).
        """
        loaded = self._load()
        scope = self._scope(loaded, where)
        if not loaded.chunks or k <= 0:
            return []
        query = np.asarray(query_embedding, dtype=np.float32).reshape(-1)
        scores = loaded.vectors @ query / max(float(np.linalg.norm(query)), 1e-12)
        allowed = loaded.allowed(scope)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        k = min(k, int(np.isfinite(scores).sum()))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(loaded.chunks[i], float(scores[i])) for i in top]

    def lexical_search(self, query: str, k: int, where: Where | None = None) -> list[tuple[Chunk, float]]:
        """BM25 over title + section + text of every live chunk, masked by the scope."""
        loaded = self._load()
        scope = self._scope(loaded, where)
        tokens = lexical_tokens(query)
        if not tokens or not loaded.chunks or k <= 0:
            return []
        scores = loaded.bm25().scores(tokens)
        allowed = loaded.allowed(scope)
        if allowed is not None:
            scores = np.where(allowed, scores, -1.0)
        top = np.argsort(-scores)[:k]
        return [(loaded.chunks[i], float(scores[i])) for i in top if scores[i] > 0]
