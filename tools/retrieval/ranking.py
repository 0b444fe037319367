"""How retrieval's rankings are scored and combined, LLM-free: weighted reciprocal rank fusion, whole-document
BM25, score normalisation, the topic-shift weights, phrase containment, and the document-aware selection the
rerank methods end with (`sentence_rerank`, `fuse_rerank`)."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np
from reground.tools.retrieval.query import RetrievalQuery
from reground.tools.signals.stuffing import chunk_is_stuffed
from reground.tools.text.lexical import BM25, content_terms, idf_overlap, words
from reground.tools.tuning.retrieval import RERANK, RetrievalSettings
from reground.tools.types import Chunk, Passage


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int, weights: Sequence[float] | None = None
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


class DocumentScorer(Protocol):
    """Whole-document BM25 as retrieval asks it: `DocumentTermIndex` in memory, or a store's own
    (`document_term_index(where)`, e.g. tools/stores/postgres.py, whose statistics live in the engine)."""

    def knows(self, term: str) -> bool: ...

    def scores(self, query: str, doc_ids: Sequence[str]) -> dict[str, float]: ...


class DocumentTermIndex:
    """BM25 over whole documents (title + all chunks): long documents whose answer is spread over
    many chunks are ranked by all their evidence, not only by their best chunk."""

    def __init__(self, terms: dict[str, list[str]]) -> None:
        self.doc_ids = list(terms)
        self.position = {d: i for i, d in enumerate(self.doc_ids)}
        self.bm25 = BM25(list(terms.values()))

    @classmethod
    def from_chunks(cls, chunks: Sequence[Chunk]) -> DocumentTermIndex:
        """The index of the chunks' documents; a keyword-stuffed chunk adds each of its terms once."""
        terms: dict[str, list[str]] = {}
        for chunk in chunks:
            if chunk["doc_id"] not in terms:
                terms[chunk["doc_id"]] = content_terms(chunk["title"])
            words = content_terms(chunk["text"])
            terms[chunk["doc_id"]].extend(dict.fromkeys(words) if chunk_is_stuffed(chunk) else words)
        return cls(terms)

    def knows(self, term: str) -> bool:
        """Whether some document holds the term."""
        return self.bm25.knows(term)

    def scores(self, query: str, doc_ids: Sequence[str]) -> dict[str, float]:
        """{doc_id: BM25 score} of the named documents (0 for one the index does not hold)."""
        all_scores = self.bm25.scores(list(dict.fromkeys(content_terms(query))))
        return {d: float(all_scores[self.position[d]]) if d in self.position else 0.0 for d in doc_ids}


def normalised(scores: Mapping[str, float], how: str = "max") -> dict[str, float]:
    """Scores scaled to [0, 1] (for positive scores): divided by the best ("max"), or min-max over the found
    documents ("minmax"; a lone document scores 1)."""
    if not scores:
        return {}
    top = max(scores.values())
    if how == "minmax":
        low = min(scores.values())
        if top > low:
            return {d: (v - low) / (top - low) for d, v in scores.items()}
        return dict.fromkeys(scores, 1.0 if top > 0 else 0.0)
    if how != "max":
        raise ValueError(f"unknown normalization {how!r}: use 'max' or 'minmax'")
    return {d: v / top if top > 0 else 0.0 for d, v in scores.items()}


HISTORY_SIGNALS = ("lexical_history", "dense_history", "document_lexical", "document_phrases")


def shift_weights(weights: Mapping[str, float], settings: RetrievalSettings) -> dict[str, float]:
    """The signal weights of a turn that opens a new topic: the signals that read the earlier dialogue weighted by
    `shift_history_weight`, the question-only chunk signals raised to `shift_question_weight`."""
    shifted = dict(weights)
    for name in HISTORY_SIGNALS:
        if name in shifted:
            shifted[name] *= settings.shift_history_weight
    for name in ("lexical_question", "dense_question"):
        shifted[name] = max(shifted.get(name, 0.0), settings.shift_question_weight)
    return shifted


def ngram_hashes(tokens: Sequence[str], n: int) -> set[int]:
    """Hashes of the token n-grams (hash() is stable within a process, which is all an in-memory cache needs)."""
    if n < 1:
        raise ValueError(f"phrase n-gram size must be >= 1, got {n}")
    return {hash(tuple(tokens[i : i + n])) for i in range(len(tokens) - n + 1)}


def packed_ngrams(grams: set[int]) -> array:
    """N-gram hashes as a sorted int64 array: 8 bytes a hash where a frozenset takes ~70 (the per-document phrase
    cache held ~100 MB after 70 turns over a large collection; ~13 MB packed)."""
    return array("q", sorted(grams))


def phrase_containment(text: str, documents: Mapping[str, frozenset[int] | array], n: int) -> dict[str, float]:
    """{doc_id: share of the text's word n-grams the document holds}, given each document's n-gram hashes (a set, or
    `packed_ngrams`)."""
    grams = ngram_hashes(words(text), n)
    if not grams:
        return dict.fromkeys(documents, 0.0)
    wanted = np.fromiter(grams, dtype=np.int64, count=len(grams))
    out: dict[str, float] = {}
    for doc_id, held in documents.items():
        if isinstance(held, array):
            found = int(np.isin(wanted, np.frombuffer(held, dtype=np.int64), assume_unique=True).sum()) if held else 0
        else:
            found = len(grams & held)
        out[doc_id] = found / len(grams)
    return out


def minmax_scaled(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    return (values - low) / (high - low) if high > low else np.zeros_like(values)


def overlap_scores(query: RetrievalQuery, chunks: Sequence[Chunk]) -> np.ndarray:
    """IDF-weighted overlap of the question and keywords with each candidate chunk (IDF over the candidates only),
    max-normalised to [0, 1]: BM25 with k1 = 0, where a term counts once however often it occurs. Words of three
    or more letters, stopwords included (their IDF over the candidates is low anyway); measured on doc2dial dev
    cases, BM25 with term frequencies, or without stopwords, put the gold document in the 3 kept passages less
    often."""
    terms = list(dict.fromkeys(t for t in words(" ".join([query.question, *query.keywords])) if len(t) > 2))
    if not terms or not chunks:
        return np.zeros(len(chunks), dtype=np.float32)
    raw = idf_overlap([set(words(f"{c['title']} {c['section']} {c['text']}")) for c in chunks], terms)
    return raw / max(float(raw.max()), 1e-9)


def select_across_documents(scores: Sequence[float], doc_ids: Sequence[str], n: int, penalty: float) -> list[int]:
    """Greedy document-aware MMR: indexes of n items, each pick maximising its max-normalised score minus
    `penalty` × (items already picked from its document). Ties keep input order; penalty 0 = top n by score."""
    if len(scores) != len(doc_ids):
        raise ValueError(f"{len(scores)} scores for {len(doc_ids)} documents")
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0 or n <= 0:
        return []
    top = float(np.abs(values).max())
    values = values / top if top > 0 else values
    taken: Counter[str] = Counter()
    picked: list[int] = []
    pool = list(range(len(values)))
    while pool and len(picked) < n:
        best = max(pool, key=lambda i: (values[i] - penalty * taken[doc_ids[i]], -i))
        picked.append(best)
        pool.remove(best)
        taken[doc_ids[best]] += 1
    return picked


def sentence_rerank(
    passages: Sequence[Passage],
    sentence_cosines: Sequence[float],
    n: int,
    weight: float,
    penalty: float,
) -> list[Passage]:
    """Rerank without an LLM: each candidate's retrieval score (max-normalised) plus `weight` x the cosine of its
    sentence closest to the question (`tools/evidence.best_sentence_cosines`), then keep n with the document-aware
    selection. A paragraph whose one sentence answers beats one that is on topic throughout."""
    if len(sentence_cosines) != len(passages):
        raise ValueError(f"{len(sentence_cosines)} sentence cosines for {len(passages)} passages")
    if not passages:
        return []
    retrieval = np.asarray([p.get("score", 0.0) for p in passages], dtype=np.float64)
    top = float(np.abs(retrieval).max())
    combined = (retrieval / top if top > 0 else retrieval) + weight * np.asarray(sentence_cosines, dtype=np.float64)
    chosen = select_across_documents(combined.tolist(), [p["doc_id"] for p in passages], n, penalty)
    return [
        Passage(**{**passages[i], "rerank_score": round(float(combined[i]), 6), "rank": rank})
        for rank, i in enumerate(chosen, start=1)
    ]


def fuse_rerank(passages: list[Passage], n: int, penalty: float) -> list[Passage]:
    """Rerank without an LLM: RRF of the retrieval, paragraph-score and document-score orders, then keep n
    with the document-aware selection (`select_across_documents`), so one document cannot take every slot."""
    if not passages:
        return []
    ids = [str(i) for i in range(len(passages))]
    by_para = sorted(
        ids,
        key=lambda i: -passages[int(i)].get("paragraph_score", passages[int(i)].get("score", 0.0)),
    )
    by_doc = sorted(ids, key=lambda i: -passages[int(i)].get("doc_score", 0.0))
    by_retrieval = sorted(ids, key=lambda i: -passages[int(i)].get("score", 0.0))
    fused = reciprocal_rank_fusion([by_retrieval, by_para, by_doc], k=RERANK.fusion_k, weights=RERANK.fusion_weights)
    chosen = select_across_documents(
        [score for _, score in fused], [passages[int(i)]["doc_id"] for i, _ in fused], n, penalty
    )
    kept: list[Passage] = []
    for rank, (i, score) in enumerate((fused[j] for j in chosen), start=1):
        passage = Passage(**passages[int(i)])
        passage["rerank_score"] = round(score, 6)
        passage["rank"] = rank
        kept.append(passage)
    return kept
