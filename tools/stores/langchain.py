"""A user's LangChain `VectorStore` (pgvector, Qdrant, Elasticsearch, Chroma, ...) as reground's dense search.

`LangChainDenseStore(vectorstore, base)` is a search store whose dense kNN goes to the LangChain store (the user's
existing index, its own filter syntax and scale-out), while lexical ranking and per-document reads come from a
reground store holding the same chunks (the engine backend or the embedded one). The LangChain store's documents
carry reground's `chunk_id` in their metadata (`index_chunks` writes them so); a hit is mapped back to the base
store's chunk, and its score is recomputed as the cosine of reground's own vectors, so every store's distance
convention ranks the same way. The user's scope goes to the LangChain store as a filter (`chroma_filter` by
default: {field: {"$in": values + ['all']}}) and is checked again on every hit (`search_index.matches`), so a
store whose filter syntax differs can widen results but never leak.

By spec: `langchain:<module>:<factory>+<base spec>`, e.g.
`Context(store="langchain:myapp.stores:docs+pgserver:/srv/engine")`, where `factory(collection=..., embeddings=...)`
returns the VectorStore (`embeddings` wraps reground's embedder, `LangChainEmbeddings`, so both sides embed alike).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from reground.tools.stores.search_index import MATCH_ANY, Where, matches, normalize_where
from reground.tools.stores.vector_store import StoreSpecError
from reground.tools.tuning.stores import ENGINE
from reground.tools.types import Chunk

OVERSAMPLE = ENGINE.langchain_oversample  # hits asked per wanted one (outside the scope, unknown: dropped)


class LangChainEmbeddings(Embeddings):
    """reground's embedder as LangChain `Embeddings` (a LangChain store then holds vectors reground can compare)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def chroma_filter(scope: Mapping[str, Sequence[str]]) -> dict[str, Any] | None:
    """A normalised scope as a Chroma / LangChain-style metadata filter (documents marked 'all' included)."""
    parts = [{key: {"$in": [*values, MATCH_ANY]}} for key, values in sorted(scope.items())]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def index_chunks(vectorstore: Any, chunks: Sequence[Chunk], *, batch: int = ENGINE.langchain_batch) -> int:
    """Add reground chunks to a LangChain VectorStore with the metadata `LangChainDenseStore` maps hits back by."""
    added = 0
    for start in range(0, len(chunks), batch):
        part = list(chunks[start : start + batch])
        metadatas = [
            {
                **{k: v if isinstance(v, (str, int, float, bool)) else str(v) for k, v in c["metadata"].items()},
                "chunk_id": c["chunk_id"],
                "doc_id": c["doc_id"],
            }
            for c in part
        ]
        vectorstore.add_texts([c["text"] for c in part], metadatas=metadatas, ids=[c["chunk_id"] for c in part])
        added += len(part)
    return added


class LangChainDenseStore:
    """Dense search in a LangChain VectorStore, everything else from a reground store (a `SearchStore`)."""

    def __init__(
        self,
        vectorstore: Any,
        base: Any,
        *,
        to_filter: Callable[[Mapping[str, Sequence[str]]], Any] = chroma_filter,
        id_key: str = "chunk_id",
    ) -> None:
        self.vectorstore = vectorstore
        self.base = base
        self.to_filter = to_filter
        self.id_key = id_key

    def __getattr__(self, name: str) -> Any:
        """Everything but dense search is the base store's (lexical, reads, scope checks, counts, ...)."""
        if name in ("vectorstore", "base", "to_filter", "id_key"):
            raise AttributeError(name)
        return getattr(self.base, name)

    @property
    def embedder(self) -> Any:
        return self.base.embedder

    def dense_search(
        self, query_embedding: np.ndarray, k: int, where: Where | None = None
    ) -> list[tuple[Chunk, float]]:
        """The LangChain store's nearest documents in scope, as the base store's chunks scored by cosine."""
        check = getattr(self.base, "check_filter", None)
        scope = check(where) if callable(check) else normalize_where(where)
        if k <= 0:
            return []
        query = np.asarray(query_embedding, dtype=np.float32).reshape(-1)
        kwargs: dict[str, Any] = {}
        flt = self.to_filter(scope) if scope else None
        if flt is not None:
            kwargs["filter"] = flt
        docs = self.vectorstore.similarity_search_by_vector(query.tolist(), k=k * OVERSAMPLE, **kwargs)
        ids = list(dict.fromkeys(str(d.metadata.get(self.id_key, d.id or "")) for d in docs))
        by_doc: dict[str, list[str]] = {}
        for d in docs:
            by_doc.setdefault(str(d.metadata.get("doc_id", "")), [])
        chunks = {c["chunk_id"]: c for c in self.base.chunks_for_documents(list(by_doc), where=where)}
        kept = [i for i in ids if i in chunks and matches(chunks[i]["metadata"], scope)]
        if not kept:
            return []
        vectors = np.asarray(self.base.embeddings_for(kept), dtype=np.float32)
        scores = vectors @ query / max(float(np.linalg.norm(query)), 1e-12)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(chunks[kept[i]], float(scores[i])) for i in order]


def open_langchain_store(
    spec: str, collection: str, *, embedder: Any = None, open_base: Callable[..., Any]
) -> LangChainDenseStore:
    """`langchain:<module>:<factory>+<base spec>`: the factory's VectorStore for dense search over the base store."""
    body = spec.split(":", 1)[1] if spec.startswith("langchain:") else spec
    target, plus, base_spec = body.partition("+")
    module, _, attr = target.rpartition(":")
    if not plus or not module or not attr or not base_spec:
        raise StoreSpecError(
            f"bad LangChain store spec {spec!r}: use 'langchain:<module>:<factory>+<base spec>', e.g. "
            "'langchain:myapp.stores:docs+pgserver:/srv/engine'"
        )
    base = open_base(base_spec, collection, embedder=embedder)
    factory = getattr(importlib.import_module(module), attr)
    vectorstore = factory(collection=collection, embeddings=LangChainEmbeddings(base.embedder))
    return LangChainDenseStore(vectorstore, base)
