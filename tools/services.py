"""The one place where a run's clients are built from its context (nodes never build clients).

`build_graph(chat_model=..., embeddings=..., store=...)` passes instances that override the
context's specs; otherwise clients are made from the specs and cached per spec for the process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from langchain_core.language_models import BaseChatModel

if TYPE_CHECKING:
    from reground.tools.adapters.embeddings import Embedder
    from reground.tools.retrieval.chunk_ranker import ChunkRanker
    from reground.tools.retrieval.search import HybridRetriever, RetrievalSettings, SearchStore
    from reground.tools.signals.ask_back import AskBackModel
    from reground.tools.signals.doc_triage import DocTriage
    from reground.tools.signals.judge import JudgeModel
    from reground.tools.signals.reading import SentenceReader
    from reground.tools.signals.units import UnitRanker
    from reground.tools.stores.search_index import IndexSettings
    from reground.tools.stores.vector_store import VectorStore

Role = Literal["refiner", "answer", "judge"]


class ChatSettings(Protocol):
    """How chat models are called (the Context's `models` group)."""

    @property
    def temperature(self) -> float: ...
    @property
    def llm_timeout_s(self) -> float: ...
    @property
    def max_answer_tokens(self) -> int: ...


class ServiceSettings(Protocol):
    """What the clients are built from: the run's settings (the graph's Context satisfies this).

    A protocol, not the Context itself, so that tools know nothing of the graph. Its settings are plain
    attributes, as the Context's fields are; Services only reads them.
    """

    chat_model: str
    models: ChatSettings
    embedding_model: str
    collection: str
    data_dir: str
    chroma_url: str
    store: str
    retrieval: RetrievalSettings
    index: IndexSettings

    def model_for(self, role: Role) -> str: ...


def at_temperature(model: BaseChatModel, temperature: float | None) -> BaseChatModel:
    """A caller's own model at a call's sampling temperature (best-of-N samples after the first), when the model
    has a temperature field; a shallow copy, so it shares the original's clients."""
    fields = getattr(type(model), "model_fields", {})
    if temperature is None or "temperature" not in fields or getattr(model, "temperature", None) == temperature:
        return model
    return model.model_copy(update={"temperature": temperature})


@dataclass
class Services:
    """Clients for a graph: explicit overrides, else built lazily from the run's Context."""

    chat_model: BaseChatModel | None = None
    embedder: Embedder | None = None
    store: VectorStore | SearchStore | None = None  # a caller's store overrides the context's store spec
    check_reachable: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stores: dict[tuple[str, str, str, str], SearchStore] = field(default_factory=dict, repr=False)
    _retrievers: dict[tuple[int, str], HybridRetriever] = field(default_factory=dict, repr=False)

    def chat(self, context: ServiceSettings, role: Role, *, temperature: float | None = None) -> BaseChatModel:
        """The chat model of a role; fails fast with a clear message if its server is down."""
        if self.chat_model is not None:
            return at_temperature(self.chat_model, temperature)
        from reground.tools.adapters.llm import ensure_reachable, load_chat_model

        spec = context.model_for(role)
        if self.check_reachable:
            ensure_reachable(spec)
        return load_chat_model(
            spec,
            temperature=context.models.temperature if temperature is None else temperature,
            timeout_s=context.models.llm_timeout_s,
            max_tokens=context.models.max_answer_tokens,
        )

    def embeddings(self, context: ServiceSettings) -> Embedder:
        if self.embedder is not None:
            return self.embedder
        if self.store is not None:
            return self.store.embedder
        from reground.tools.adapters.embeddings import load_embedder

        return load_embedder(context.embedding_model)

    def passage_store(self, context: ServiceSettings) -> SearchStore:
        """The context's collection, searchable; its store comes from the context's store spec (`open_store`).

        Raises CollectionNotFoundError / EmptyCollectionError naming it.
        """
        from reground.tools.stores.factory import open_store, search_index
        from reground.tools.stores.vector_store import EmptyCollectionError, store_spec

        spec = context.store or store_spec(context.data_dir or None, context.chroma_url)
        index = context.index
        key = (
            ("given", "", "", repr(index))
            if self.store is not None
            else (context.collection, spec, context.embedding_model, repr(index))
        )
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                opened = self.store
                if opened is None:
                    opened = open_store(spec, context.collection, embedder=self.embeddings(context), index=index)
                store = search_index(opened, index)  # a VectorStore of the caller's is searched by a SearchIndex
                self._stores[key] = store
        if store.count() == 0:
            raise EmptyCollectionError(
                f"collection {context.collection!r} is empty: add documents with "
                f"`reground ingest PATH --collection {context.collection}`"
            )
        return store

    def judge(self, context: ServiceSettings) -> JudgeModel | None:
        """The judge trained here (tools/signals/judge.py), shipped with the package and loaded once per process; None
        for a collection embedded by another model than the one it was trained with (its inputs are MiniLM's
        question x sentence products: another model's vectors mean nothing to it, or do not fit)."""
        from reground.tools.adapters.embeddings import MINILM_SPEC
        from reground.tools.signals.judge import shipped_judge

        if getattr(self.retriever(context).store.embedder, "name", None) != MINILM_SPEC:
            return None
        return shipped_judge()

    def unit_ranker(self, context: ServiceSettings) -> UnitRanker | None:
        """The unit ranker trained here (tools/signals/units.py), loaded once per process; None for a collection
        embedded by another model than MiniLM (its cosines are one of its inputs)."""
        from reground.tools.adapters.embeddings import MINILM_SPEC
        from reground.tools.signals.units import shipped_unit_ranker

        if getattr(self.retriever(context).store.embedder, "name", None) != MINILM_SPEC:
            return None
        return shipped_unit_ranker()

    def doc_triage(self) -> DocTriage:
        """The documentation triage trained here (tools/signals/doc_triage.py), loaded once per process."""
        from reground.tools.signals.doc_triage import shipped_doc_triage

        return shipped_doc_triage()

    def ask_back(self) -> AskBackModel:
        """The ask-back model trained here (tools/signals/ask_back.py), loaded once per process."""
        from reground.tools.signals.ask_back import shipped_ask_back

        return shipped_ask_back()

    def reader(self) -> SentenceReader:
        """The cross-encoder trained here (adapters/cross_encoder.py), loaded once per process; it reads text, so
        it serves any collection."""
        from reground.tools.adapters.cross_encoder import shipped_reader

        return shipped_reader().logits

    @staticmethod
    def _chunk_ranker(store: SearchStore, settings: RetrievalSettings) -> ChunkRanker | None:
        """The chunk ranker trained here (tools/retrieval/chunk_ranker.py) unless turned off; None for a collection
        embedded by another model than MiniLM (its cosines are among its inputs)."""
        from reground.tools.adapters.embeddings import MINILM_SPEC
        from reground.tools.retrieval.chunk_ranker import shipped_chunk_ranker

        if settings.chunk_ranking == "off" or getattr(store.embedder, "name", None) != MINILM_SPEC:
            return None
        return shipped_chunk_ranker()

    def retriever(self, context: ServiceSettings) -> HybridRetriever:
        from reground.tools.retrieval.search import HybridRetriever

        store = self.passage_store(context)
        settings = context.retrieval
        key = (id(store), repr(settings))  # settings hold a dict, so their repr is the cache key
        with self._lock:
            retriever = self._retrievers.get(key)
            if retriever is None:
                retriever = HybridRetriever(store, settings, chunk_ranker=self._chunk_ranker(store, settings))
                self._retrievers[key] = retriever
        return retriever
