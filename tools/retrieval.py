"""The LLM-free retrieval stack, used by the graph's retrieve/rerank nodes and by `reground eval retrieval`.

Document level: BM25 and MiniLM rankings of chunks, for the question alone and for the question plus
recent dialogue, each reduced to a document ranking (a document scores its best chunk) and fused by
weighted reciprocal rank. Paragraph level (ConvRAG): the top documents' chunks are scored by
`cos(E(q'), E(p)) + Σ_k cos(E(k), E(p))` plus a BM25 term. The user's metadata filter `where` is passed
to every store call, so nothing outside the user's scope is ever ranked.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from reground.tools.types import Chunk, Passage


class _Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class SearchStore(Protocol):
    """The part of `PassageStore` retrieval uses (a fake with these methods works in tests)."""

    @property
    def embedder(self) -> Any: ...

    def dense_search(
        self, query_embedding: np.ndarray, k: int, where: dict[str, Any] | None = None
    ) -> list[tuple[Chunk, float]]: ...

    def lexical_search(
        self, query: str, k: int, where: dict[str, Any] | None = None
    ) -> list[tuple[Chunk, float]]: ...

    def chunks_for_documents(
        self, doc_ids: Sequence[str], where: dict[str, Any] | None = None
    ) -> list[Chunk]: ...

    def embeddings_for(self, chunk_ids: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class RetrievalQuery:
    """What to search with: the (refined) question, the question plus recent dialogue, and keywords."""

    question: str
    history_query: str
    keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class RetrievalSettings:
    """Knobs of the stack; defaults were tuned on doc2dial cases_dev (evals/results/retrieval_dev)."""

    chunk_k: int = 100  # chunks fetched per lexical/dense search before reducing them to documents
    rrf_k: int = 60
    # Weights of the document rankings in the fusion: (ranking name -> weight).
    weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "lexical_history": 1.0,
            "dense_history": 1.0,
            "lexical_question": 0.5,
            "dense_question": 0.5,
        }
    )
    keyword_weight: float = 1.0  # weight of the keyword sum in the paragraph score
    lexical_paragraph_weight: float = (
        0.3  # weight of the normalised BM25 term in the paragraph score
    )
    doc_prior_weight: float = (
        0.5  # weight of the (normalised) document score in a paragraph's final score
    )


def history_query(
    question: str, history: Sequence[tuple[str, str] | Mapping[str, str]], budget_tokens: int = 100
) -> str:
    """The question plus the most recent dialogue turns that fit in `budget_tokens` (ReGround's DH_tokens).

    Turns are added newest first; the oldest one that does not fit is cut to its last tokens, so the
    budget is always used. The result keeps chronological order after the question.
    """
    from reground.tools.tokens import count_tokens, tail_tokens

    question = question.strip()
    if budget_tokens <= 0:
        return question
    remaining = budget_tokens
    picked: list[str] = []
    for turn in reversed(history):
        text = (turn[1] if isinstance(turn, tuple) else str(turn.get("text", ""))).strip()
        if not text or text == question:
            continue
        cost = count_tokens(text)
        if cost <= remaining:
            picked.append(text)
            remaining -= cost
            continue
        tail = tail_tokens(text, remaining).strip()
        if tail:
            picked.append(tail)
        break
    return " ".join([question, *reversed(picked)]).strip()


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[str, float]]:
    """Weighted RRF: score(d) = Σ_i w_i / (k + rank_i(d)), ranks from 1; ties keep first-seen order."""
    if weights is not None and len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[str, float] = {}
    for i, ranking in enumerate(rankings):
        w = 1.0 if weights is None else float(weights[i])
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def _best_per_document(hits: Sequence[tuple[Chunk, float]]) -> list[str]:
    """Chunk hits (best first) → document ids ranked by their best chunk."""
    best: dict[str, float] = {}
    for chunk, score in hits:
        doc_id = chunk["doc_id"]
        if doc_id not in best or score > best[doc_id]:
            best[doc_id] = score
    return sorted(best, key=lambda d: -best[d])


_TOKEN = re.compile(r"\w+")


def _lexical_text(*parts: str) -> str:
    return " ".join(p for p in parts if p and p.strip())


def _minmax(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    return (values - low) / (high - low) if high > low else np.zeros_like(values)


class HybridRetriever:
    """Hybrid (BM25 + dense) document search, then ConvRAG paragraph scoring, inside the metadata filter."""

    def __init__(
        self,
        store: SearchStore,
        settings: RetrievalSettings | None = None,
        *,
        cache_size: int = 4096,
    ) -> None:
        self.store = store
        self.settings = settings or RetrievalSettings()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    # --- embeddings (cached: the graph re-embeds the same question across loops) --------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of texts, one batch for the ones not cached yet."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vectors = np.asarray(self.store.embedder.embed(missing), dtype=np.float32)
            for text, vector in zip(missing, vectors, strict=True):
                self._cache[text] = vector
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        for t in texts:
            self._cache.move_to_end(t)
        return (
            np.stack([self._cache[t] for t in texts])
            if texts
            else np.zeros((0, 0), dtype=np.float32)
        )

    # --- document level ---------------------------------------------------------------------

    def document_rankings(
        self, query: RetrievalQuery, *, where: dict[str, Any] | None, k: int | None = None
    ) -> dict[str, list[str]]:
        """The per-signal document rankings that rank_documents fuses (named as in settings.weights)."""
        s = self.settings
        chunk_k = k or s.chunk_k
        keywords = " ".join(query.keywords)
        question = query.question.strip()
        hist = query.history_query.strip() or question
        texts = {"question": question, "history": hist}
        wanted = {name for name, w in s.weights.items() if w}
        dense_texts = [texts[n.split("_", 1)[1]] for n in sorted(wanted) if n.startswith("dense_")]
        vectors = (
            dict(zip(dense_texts, self.embed(dense_texts), strict=True)) if dense_texts else {}
        )
        rankings: dict[str, list[str]] = {}
        for name in sorted(wanted):
            kind, which = name.split("_", 1)
            if kind == "lexical":
                text = _lexical_text(texts[which], keywords)
                rankings[name] = _best_per_document(
                    self.store.lexical_search(text, chunk_k, where=where)
                )
            elif kind == "dense":
                vec = vectors[texts[which]]
                rankings[name] = _best_per_document(
                    self.store.dense_search(vec, chunk_k, where=where)
                )
            else:
                raise ValueError(f"unknown ranking {name!r} in RetrievalSettings.weights")
        return rankings

    def rank_documents(
        self, query: RetrievalQuery, *, where: dict[str, Any] | None, k: int
    ) -> list[tuple[str, float]]:
        """The top-k documents by weighted RRF of the lexical and dense rankings."""
        rankings = self.document_rankings(query, where=where)
        names = list(rankings)
        fused = reciprocal_rank_fusion(
            [rankings[n] for n in names],
            k=self.settings.rrf_k,
            weights=[self.settings.weights[n] for n in names],
        )
        return fused[:k]

    # --- paragraph level --------------------------------------------------------------------

    def search(
        self,
        query: RetrievalQuery,
        *,
        where: dict[str, Any] | None,
        doc_k: int = 8,
        paragraph_k: int = 8,
        paragraph_scoring: bool = True,
    ) -> list[Passage]:
        """The paragraph_k best chunks of the doc_k best documents, with doc/paragraph scores filled."""
        docs = self.rank_documents(query, where=where, k=doc_k)
        if not docs:
            return []
        doc_scores = dict(docs)
        doc_rank = {d: i for i, (d, _) in enumerate(docs)}
        chunks = self.store.chunks_for_documents([d for d, _ in docs], where=where)
        chunks = [c for c in chunks if c["doc_id"] in doc_scores]
        if not chunks:
            return []
        top = max(doc_scores.values())
        doc_norm = np.array(
            [doc_scores[c["doc_id"]] / top if top > 0 else 0.0 for c in chunks], dtype=np.float32
        )
        if paragraph_scoring:
            para = self._paragraph_scores(query, chunks)
            final = _minmax(para) + self.settings.doc_prior_weight * doc_norm
        else:
            # Without fine-grained scoring: documents in fused order, chunks in document order.
            para = np.zeros(len(chunks), dtype=np.float32)
            final = -np.array(
                [doc_rank[c["doc_id"]] * 10_000 + c["position"] for c in chunks], dtype=np.float32
            )
        order = np.argsort(-final, kind="stable")[:paragraph_k]
        passages: list[Passage] = []
        for rank, i in enumerate(order, start=1):
            chunk = chunks[int(i)]
            passage = Passage(**chunk)
            passage["doc_score"] = float(doc_scores[chunk["doc_id"]])
            passage["paragraph_score"] = float(para[i])
            passage["score"] = float(final[i])
            passage["rank"] = rank
            passages.append(passage)
        return passages

    def _paragraph_scores(self, query: RetrievalQuery, chunks: Sequence[Chunk]) -> np.ndarray:
        """ConvRAG: cos(E(q'), E(p)) + w·Σ_k cos(E(k), E(p)) + w_lex·BM25(p) normalised to [0, 1]."""
        s = self.settings
        matrix = np.asarray(
            self.store.embeddings_for([c["chunk_id"] for c in chunks]), dtype=np.float32
        )
        keywords = [k for k in dict.fromkeys(query.keywords) if k.strip()]
        vectors = self.embed([query.question.strip() or query.history_query, *keywords])
        scores = matrix @ vectors[0]
        if keywords and s.keyword_weight:
            scores = scores + s.keyword_weight * (matrix @ vectors[1:].T).sum(axis=1)
        if s.lexical_paragraph_weight:
            scores = scores + s.lexical_paragraph_weight * _overlap_scores(query, chunks)
        return np.asarray(scores, dtype=np.float32)


def _overlap_scores(query: RetrievalQuery, chunks: Sequence[Chunk]) -> np.ndarray:
    """A small BM25-like term over the candidate chunks only (IDF from the candidates), in [0, 1]."""
    terms = {
        t for t in _TOKEN.findall(" ".join([query.question, *query.keywords]).lower()) if len(t) > 2
    }
    if not terms:
        return np.zeros(len(chunks), dtype=np.float32)
    bags = [set(_TOKEN.findall(f"{c['title']} {c['section']} {c['text']}".lower())) for c in chunks]
    n = len(bags)
    idf = {
        t: math.log(1 + (n - df + 0.5) / (df + 0.5))
        for t in terms
        if (df := sum(t in b for b in bags))
    }
    if not idf:
        return np.zeros(n, dtype=np.float32)
    raw = np.array([sum(w for t, w in idf.items() if t in b) for b in bags], dtype=np.float32)
    return raw / max(float(raw.max()), 1e-9)


def fuse_rerank(passages: list[Passage], n: int) -> list[Passage]:
    """Rerank without an LLM: RRF of the paragraph-score and document-score orders; keep the top n."""
    if not passages:
        return []
    ids = [str(i) for i in range(len(passages))]
    by_para = sorted(
        ids,
        key=lambda i: -passages[int(i)].get("paragraph_score", passages[int(i)].get("score", 0.0)),
    )
    by_doc = sorted(ids, key=lambda i: -passages[int(i)].get("doc_score", 0.0))
    by_retrieval = sorted(ids, key=lambda i: -passages[int(i)].get("score", 0.0))
    fused = reciprocal_rank_fusion([by_retrieval, by_para, by_doc], k=10, weights=[1.0, 0.5, 0.5])
    kept: list[Passage] = []
    for rank, (i, score) in enumerate(fused[:n], start=1):
        passage = Passage(**passages[int(i)])
        passage["rerank_score"] = round(score, 6)
        passage["rank"] = rank
        kept.append(passage)
    return kept
