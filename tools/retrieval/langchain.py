"""reground's retrieval as a LangChain `BaseRetriever`, for chains and agents that take one.

`RegroundRetriever(store=...)` runs the LLM-free stack a turn's retrieve node runs (hybrid document search, topic
tracking, paragraph scoring) over any reground search store (the engine backend, the embedded store, a
`LangChainDenseStore`), inside a fixed metadata scope, and returns LangChain `Document`s whose metadata carry the
chunk's ids, title, url, the document's own metadata and the scores. A dialogue can be passed per call
(`invoke(query, history=[...])`) so follow-ups are searched with their context, as in the graph.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr
from reground.tools.retrieval.search import HybridRetriever, RetrievalSettings, conversation_query
from reground.tools.signals.injection_screen import SCREEN_KEY
from reground.tools.tuning.stores import ENGINE
from reground.tools.tuning.turn import BUDGETS


class RegroundRetriever(BaseRetriever):
    """reground's hybrid retrieval over a search store, as a LangChain retriever. The app builds it without a run's
    Context, so its documents and dialogue budget default to the run's own declarations (BUDGETS), named here."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any = Field(description="a reground search store (e.g. `open_store('pgserver:/srv/engine', 'docs')`)")
    k: int = Field(default=ENGINE.retriever_k, ge=1, description="passages returned")
    doc_k: int = Field(default=BUDGETS.doc_candidates, ge=1, description="documents whose paragraphs are scored")
    where: dict[str, Any] | None = Field(default=None, description="the metadata scope every search stays inside")
    settings: RetrievalSettings | None = None
    history_tokens: int = BUDGETS.history_token_budget
    _retriever: HybridRetriever | None = PrivateAttr(default=None)

    def _stack(self) -> HybridRetriever:
        if self._retriever is None:
            self._retriever = HybridRetriever(self.store, self.settings)
        return self._retriever

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, history: list[dict[str, str]] | None = None
    ) -> list[Document]:
        stack = self._stack()
        built = conversation_query(
            query, history or [], self.history_tokens, phrase_tokens=stack.settings.phrase_history_tokens
        )
        passages = stack.search(built, where=self.where, doc_k=self.doc_k, paragraph_k=self.k)
        out = []
        for p in passages:
            meta = {
                **{k: v for k, v in p["metadata"].items() if k != SCREEN_KEY},  # ingest's own bookkeeping
                "chunk_id": p["chunk_id"],
                "doc_id": p["doc_id"],
                "title": p["title"],
                "section": p["section"],
                "url": p["url"],
                "score": p.get("score", 0.0),
                "doc_score": p.get("doc_score", 0.0),
                "rank": p.get("rank", 0),
            }
            out.append(Document(page_content=p["text"], metadata=meta, id=p["chunk_id"]))
        return out
