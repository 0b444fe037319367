"""The one place where a run's clients are built from its context (nodes never build clients).

`build_graph(chat_model=..., embeddings=..., store=...)` passes instances that override the
context's specs; otherwise clients are made from the specs and cached per spec for the process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from langchain_core.language_models import BaseChatModel

if TYPE_CHECKING:
    from reground.graph.context import Context
    from reground.tools.embeddings import Embedder
    from reground.tools.retrieval import HybridRetriever
    from reground.tools.store import PassageStore

Role = Literal["refiner", "answer", "judge"]


@dataclass
class Services:
    """Clients for a graph: explicit overrides, else built lazily from the run's Context."""

    chat_model: BaseChatModel | None = None
    embedder: Embedder | None = None
    store: PassageStore | None = None
    check_reachable: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stores: dict[tuple[str, str, str, str], PassageStore] = field(default_factory=dict, repr=False)
    _retrievers: dict[int, HybridRetriever] = field(default_factory=dict, repr=False)

    def chat(self, context: Context, role: Role, *, temperature: float | None = None) -> BaseChatModel:
        """The chat model of a role; fails fast with a clear message if its server is down."""
        if self.chat_model is not None:
            return self.chat_model
        from reground.tools.llm import ensure_reachable, load_chat_model

        spec = context.model_for(role)
        if self.check_reachable:
            ensure_reachable(spec)
        return load_chat_model(
            spec,
            temperature=context.temperature if temperature is None else temperature,
            timeout_s=context.llm_timeout_s,
            max_tokens=context.max_answer_tokens,
        )

    def embeddings(self, context: Context) -> Embedder:
        if self.embedder is not None:
            return self.embedder
        if self.store is not None:
            return self.store.embedder
        from reground.tools.embeddings import load_embedder

        return load_embedder(context.embedding_model)

    def passage_store(self, context: Context) -> PassageStore:
        """The context's collection; raises CollectionNotFoundError / EmptyCollectionError naming it."""
        if self.store is not None:
            return self.store
        from reground.tools.store import EmptyCollectionError, PassageStore

        key = (context.collection, context.data_dir, context.chroma_url, context.embedding_model)
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                store = PassageStore.open(
                    context.collection,
                    data_dir=context.data_dir or None,
                    embedder=self.embeddings(context),
                    chroma_url=context.chroma_url,
                )
                self._stores[key] = store
        if store.count() == 0:
            raise EmptyCollectionError(
                f"collection {context.collection!r} is empty: add documents with "
                f"`reground ingest PATH --collection {context.collection}`"
            )
        return store

    def retriever(self, context: Context) -> HybridRetriever:
        from reground.tools.retrieval import HybridRetriever

        store = self.passage_store(context)
        with self._lock:
            retriever = self._retrievers.get(id(store))
            if retriever is None:
                retriever = HybridRetriever(store)
                self._retrievers[id(store)] = retriever
        return retriever
