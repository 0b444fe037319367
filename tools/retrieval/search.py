"""The LLM-free retrieval stack, used by the graph's retrieve/rerank nodes and by `reground eval retrieval`.

Document level: BM25 and MiniLM rankings of chunks, for the question alone and for the question plus
recent dialogue, each reduced to a document ranking (a document scores its best chunk) and fused by
weighted reciprocal rank. Paragraph level (ConvRAG): the top documents' chunks are scored by
`cos(E(q'), E(p)) + Σ_k cos(E(k), E(p))` plus a BM25 term. The user's metadata filter `where` is passed
to every store call, so nothing outside the user's scope is ever ranked.
"""

from __future__ import annotations

import json
from array import array
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
from reground.tools.signals.answerability import stands_alone
from reground.tools.signals.stuffing import chunk_is_stuffed
from reground.tools.text.lexical import BM25, content_terms, idf_overlap, words
from reground.tools.text.tokens import history_query
from reground.tools.tuning.retrieval import RERANK, SEARCH, RetrievalSettings
from reground.tools.tuning.signals import STUFFING
from reground.tools.tuning.turn import BUDGETS
from reground.tools.types import Chunk, Passage, is_assistant

__all__ = ["content_terms"]  # re-exported: evals measure spans with the retrieval's tokeniser


class SearchStore(Protocol):
    """The part of `PassageStore` retrieval uses (a fake with these methods works in tests)."""

    @property
    def embedder(self) -> Any: ...

    def dense_search(
        self, query_embedding: np.ndarray, k: int, where: dict[str, Any] | None = None
    ) -> list[tuple[Chunk, float]]: ...

    def lexical_search(self, query: str, k: int, where: dict[str, Any] | None = None) -> list[tuple[Chunk, float]]: ...

    def chunks_for_documents(self, doc_ids: Sequence[str], where: dict[str, Any] | None = None) -> list[Chunk]: ...

    def embeddings_for(self, chunk_ids: Sequence[str]) -> np.ndarray: ...

    def all_chunks(self, where: dict[str, Any] | None = None) -> list[Chunk]: ...

    def count(self) -> int: ...


@dataclass(frozen=True)
class EarlierTurn:
    """A user message earlier in the dialogue: its text, its own history query and the reply that followed it."""

    text: str
    history_query: str
    reply: str = ""


@dataclass(frozen=True)
class Topic:
    """Where the conversation's current topic began: the text the topic signal searches and, when a topic shift was
    detected, the index in `earlier_turns` of the message that opened it (len(earlier_turns): this turn)."""

    text: str
    since: int | None = None


@dataclass(frozen=True)
class RetrievalQuery:
    """What to search with: the (refined) question, the question plus recent dialogue, keywords, and the texts a
    query transform wrote (`expansions`: a hypothetical passage, topics or question variants)."""

    question: str
    history_query: str
    keywords: tuple[str, ...] = ()
    expansions: tuple[str, ...] = ()
    # The conversation's topic: its opening exchange (the user's first message and the reply to it; the question
    # itself on a first turn), searched densely as the `dense_topic` signal (empty: the history query stands in).
    # `earlier_turns` holds each later user message of the dialogue with its own history query and the reply that
    # followed it, so that topic-shift detection can move the topic to the latest message that changed it.
    topic_query: str = ""
    earlier_turns: tuple[EarlierTurn, ...] = ()
    # The latest assistant replies, whose word n-grams the `document_phrases` signal looks up (replies quote the
    # documents they come from; the user's own words would only find documents that share common phrases).
    phrase_query: str = ""


# The texts chunk-level signals search, and the whole-document signals with the text each one reads
# (see RetrievalSettings.weights).
CHUNK_TEXTS = ("question", "history", "topic")
DOCUMENT_SIGNALS = {"document_lexical": "history", "document_question": "question", "document_phrases": "phrases"}


def _turn(turn: tuple[str, str] | Mapping[str, str]) -> tuple[str, str]:
    if isinstance(turn, tuple):
        return str(turn[0]), str(turn[1]).strip()
    return str(turn.get("role", "")), str(turn.get("text", "")).strip()


def conversation_query(
    question: str,
    history: Sequence[tuple[str, str] | Mapping[str, str]],
    budget_tokens: int = SEARCH.history_tokens,
    *,
    search_question: str | None = None,
    keywords: Sequence[str] = (),
    expansions: Sequence[str] = (),
    phrase_tokens: int = SEARCH.phrase_tokens,
) -> RetrievalQuery:
    """The query of a conversation turn: the question (or a rewrite of it, `search_question`), the question plus
    recent dialogue (`budget_tokens`), the latest assistant replies (`phrase_tokens` of them: the phrase query),
    the conversation's opening exchange and its earlier user messages (for topic shifts).

    A user turn is any turn whose role is not an assistant's ("agent", "assistant", "ai")."""
    turns = [_turn(t) for t in history]
    turns = [(role, text) for role, text in turns if text]
    users = [i for i, (role, _) in enumerate(turns) if not is_assistant(role)]

    def reply_after(i: int) -> str:
        return next((text for role, text in turns[i + 1 :] if is_assistant(role)), "")

    if users:
        first = users[0]
        opening = f"{turns[first][1]} {reply_after(first)}".strip()
    else:
        opening = question.strip()
    earlier = tuple(
        EarlierTurn(turns[i][1], history_query(turns[i][1], turns[:i], budget_tokens), reply_after(i))
        for i in users[1:]
    )
    return RetrievalQuery(
        question=(search_question or question).strip(),
        history_query=history_query(question, history, budget_tokens),
        keywords=tuple(keywords),
        expansions=tuple(expansions),
        topic_query=opening,
        earlier_turns=earlier,
        phrase_query=history_query("", [t for t in turns if is_assistant(t[0])], phrase_tokens),
    )


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = SEARCH.rrf_k, weights: Sequence[float] | None = None
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


def _best_per_document(hits: Sequence[tuple[Chunk, float]]) -> dict[str, float]:
    """Chunk hits → {doc_id: score of its best chunk}; a keyword-stuffed chunk's hit counts only
    `STUFFING.hit_weight` of its score, so repeating the question's words buys no rank (signals/stuffing.py)."""
    best: dict[str, float] = {}
    for chunk, raw in hits:
        score = raw * STUFFING.hit_weight if raw > 0 and chunk_is_stuffed(chunk) else raw
        doc_id = chunk["doc_id"]
        if doc_id not in best or score > best[doc_id]:
            best[doc_id] = score
    return best


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


def _ngrams(tokens: Sequence[str], n: int) -> set[int]:
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
    grams = _ngrams(words(text), n)
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
        cache_size: int = SEARCH.cache_size,
    ) -> None:
        self.store = store
        self.settings = settings or RetrievalSettings()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._doc_indexes: OrderedDict[tuple[int, str], DocumentTermIndex] = OrderedDict()
        self._shifted: OrderedDict[str, bool] = OrderedDict()  # topic-shift decisions (earlier turns recur)
        self._phrases: OrderedDict[tuple[int, str, str], array] = OrderedDict()  # n-grams per document
        self._pool: ThreadPoolExecutor | None = None  # concurrent signal searches (stores with `concurrent_reads`)

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
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

    # --- document level ---------------------------------------------------------------------

    def topic(self, query: RetrievalQuery, *, where: dict[str, Any] | None) -> Topic:
        """This turn's topic: the opening exchange, moved to the latest user message that shifted the topic
        (detect_topic_shift, with the reply to it), or to the question itself when this turn shifts it."""
        topic = Topic(query.topic_query.strip())
        if not self.settings.detect_topic_shift or not topic.text:
            return topic
        said = [query.topic_query]  # what the dialogue had said before each message, and its content words
        said_terms = set(content_terms(query.topic_query))
        for i, turn in enumerate(query.earlier_turns):
            min_terms = self._min_terms(turn.text, said, said_terms)
            if self._shifts(turn.text, turn.history_query, topic.text, where, min_terms):
                topic = Topic(f"{turn.text} {turn.reply}".strip(), i)
            said += [turn.text, turn.reply]
            said_terms.update(content_terms(f"{turn.text} {turn.reply}"))
        min_terms = self._min_terms(query.question, said, said_terms)
        if self._shifts(query.question, query.history_query, topic.text, where, min_terms):
            topic = Topic(query.question.strip(), len(query.earlier_turns))
        return topic

    def _min_terms(self, message: str, said: Sequence[str], said_terms: set[str]) -> int:
        """The known content words that let a user message shift the topic: fewer when it stands alone."""
        s = self.settings
        if s.shift_min_terms_standalone >= s.shift_min_terms or set(content_terms(message)) & said_terms:
            return s.shift_min_terms  # (a message sharing a word with the dialogue may well be about the same thing)
        dialogue = [{"text": text} for text in said if text.strip()]
        return s.shift_min_terms_standalone if stands_alone(message, dialogue) else s.shift_min_terms

    def topic_text(self, query: RetrievalQuery, *, where: dict[str, Any] | None) -> str:
        """The text the topic signal searches this turn (see `topic`)."""
        return self.topic(query, where=where).text

    def is_topic_shift(self, query: RetrievalQuery, *, where: dict[str, Any] | None = None) -> bool:
        """Whether this turn's question opens a new topic (see RetrievalSettings.shift_max_fit)."""
        return self.topic(query, where=where).since == len(query.earlier_turns)

    def _shifts(
        self, message: str, message_history: str, topic: str, where: dict[str, Any] | None, min_terms: int | None = None
    ) -> bool:
        s = self.settings
        message = message.strip()
        if message_history.strip() == message:
            return False
        index = self.document_index(where)
        if sum(index.knows(t) for t in set(content_terms(message))) < (min_terms or s.shift_min_terms):
            return False  # short, or in words the documents do not use (another language): no evidence of a shift
        key = json.dumps([message, message_history, topic, where], sort_keys=True, default=str)
        if key in self._shifted:
            self._shifted.move_to_end(key)
            return self._shifted[key]
        probe = RetrievalQuery(question=message, history_query=message_history, topic_query=topic)
        ranked = self._rank_documents(probe, where=where, k=1, topic=Topic(topic))
        shifted = False
        if ranked:
            shifted = self.fit(message, ranked[0][0], where=where) < s.shift_max_fit
        self._shifted[key] = shifted
        while len(self._shifted) > self._cache_size:
            self._shifted.popitem(last=False)
        return shifted

    def fit(self, message: str, doc_id: str, *, where: dict[str, Any] | None) -> float:
        """How well a document matches a message next to the best match anywhere in scope: the larger of the
        ratios of its best chunk's score to the best chunk's, for MiniLM cosine and for BM25 (1: it holds the best
        match; near 0: the message is about something else)."""
        vector = self.embed([message])[0]
        best = self.store.dense_search(vector, 1, where=where)
        chunks = self.store.chunks_for_documents([doc_id], where=where)
        if not best or not chunks or best[0][1] <= 0:
            return 1.0
        dense = float((self.store.embeddings_for([c["chunk_id"] for c in chunks]) @ vector).max()) / best[0][1]
        hits = self.store.lexical_search(message, self.settings.chunk_k, where=where)
        lexical = max((v for c, v in hits if c["doc_id"] == doc_id), default=0.0) / hits[0][1] if hits else 0.0
        return max(dense, lexical)

    def document_scores(
        self,
        query: RetrievalQuery,
        *,
        where: dict[str, Any] | None,
        weights: Mapping[str, float] | None = None,
        texts: Mapping[str, str] | None = None,
    ) -> dict[str, dict[str, float]]:
        """Per chunk-level signal, {doc_id: score} for the documents it found (a document scores its best chunk)."""
        texts = self.signal_texts(query) if texts is None else texts
        keywords = " ".join(query.keywords)
        weights = self.settings.weights if weights is None else weights
        wanted = sorted(n for n, w in weights.items() if w and n not in DOCUMENT_SIGNALS)
        for name in wanted:
            kind, _, which = name.partition("_")
            if which not in CHUNK_TEXTS or kind not in ("lexical", "dense"):
                known = ", ".join([*(f"{k}_{w}" for k in ("lexical", "dense") for w in CHUNK_TEXTS), *DOCUMENT_SIGNALS])
                raise ValueError(f"unknown document signal {name!r} in RetrievalSettings.weights (known: {known})")
        dense_texts = [texts[n.split("_", 1)[1]] for n in wanted if n.startswith("dense_")]
        vectors = dict(zip(dense_texts, self.embed(dense_texts), strict=True)) if dense_texts else {}

        def search(name: str) -> dict[str, float]:
            kind, _, which = name.partition("_")
            if kind == "lexical":
                text = " ".join(t for t in (texts[which], keywords) if t)
                return _best_per_document(self.store.lexical_search(text, self.settings.chunk_k, where=where))
            return _best_per_document(
                self.store.dense_search(vectors[texts[which]], self.settings.chunk_k, where=where)
            )

        # A store whose searches wait on a server (`concurrent_reads`, the engine backend) is asked for every signal
        # at once: the dense and the BM25 statements overlap instead of adding up. Same calls, same results.
        if len(wanted) > 1 and getattr(self.store, "concurrent_reads", False):
            return dict(zip(wanted, self._executor().map(search, wanted), strict=True))
        return {name: search(name) for name in wanted}

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=len(CHUNK_TEXTS) * 2, thread_name_prefix="retrieval")
        return self._pool

    @staticmethod
    def signal_texts(query: RetrievalQuery, topic: Topic | None = None) -> dict[str, str]:
        """The text each signal reads: the question; the history query; the topic (the given one's, else the query's
        opening exchange, else the history query); the phrase query: the replies since the topic began when a
        topic shift was detected (none when this turn shifts it), else the query's latest replies."""
        question = query.question.strip()
        history = query.history_query.strip() or question
        topic = topic or Topic(query.topic_query.strip())
        if topic.since is None:
            phrases = query.phrase_query.strip()
        else:
            phrases = " ".join(t.reply for t in query.earlier_turns[topic.since :]).strip()
        return {"question": question, "history": history, "topic": topic.text or history, "phrases": phrases}

    def transform_scores(self, texts: Sequence[str], *, where: dict[str, Any] | None) -> dict[str, float]:
        """{doc_id: mean over the texts of its best chunk's cosine} (0 where a text's search missed it): the dense
        signal of a HyDE passage or of the intended topics."""
        texts = [t.strip() for t in texts if t.strip()]
        if not texts:
            return {}
        total: dict[str, float] = {}
        for vector in self.embed(texts):
            best = _best_per_document(self.store.dense_search(vector, self.settings.chunk_k, where))
            for doc_id, score in best.items():
                total[doc_id] = total.get(doc_id, 0.0) + score / len(texts)
        return total

    def rank_documents(self, query: RetrievalQuery, *, where: dict[str, Any] | None, k: int) -> list[tuple[str, float]]:
        """The top-k documents: fused chunk-level signals, then whole-document BM25 on the leaders; with the
        multi-query transform, that ranking for the query and for each variant, fused by reciprocal rank."""
        s = self.settings
        if s.query_transform != "multi_query" or not query.expansions or not s.transform_weight:
            return self._rank_documents(query, where=where, k=k)
        depth = max(k, s.rerank_candidates)
        # The variants stand on their own (the model resolved what the dialogue refers to), so each is searched
        # alone, as the paper does; the dialogue reaches the fusion through the original query's ranking.
        queries = [replace(query, expansions=())]
        queries += [RetrievalQuery(question=v, history_query=v, keywords=query.keywords) for v in query.expansions]
        rankings = [[d for d, _ in self._rank_documents(q, where=where, k=depth)] for q in queries]
        weights = [1.0] + [s.transform_weight] * len(query.expansions)
        return reciprocal_rank_fusion(rankings, k=s.rrf_k, weights=weights)[:k]

    def _rank_documents(
        self, query: RetrievalQuery, *, where: dict[str, Any] | None, k: int, topic: Topic | None = None
    ) -> list[tuple[str, float]]:
        s = self.settings
        weights = dict(s.weights)
        if topic is None:
            topic = self.topic(query, where=where) if s.detect_topic_shift else Topic(query.topic_query.strip())
            if topic.since == len(query.earlier_turns):
                weights = shift_weights(weights, s)  # this turn opens a new topic
        texts = self.signal_texts(query, topic)
        signals = self.document_scores(query, where=where, weights=weights, texts=texts)
        if s.query_transform in ("hyde", "topics") and query.expansions and s.transform_weight:
            signals["dense_transform"] = self.transform_scores(query.expansions, where=where)
            weights["dense_transform"] = s.transform_weight
        names = [n for n in signals if signals[n]]
        if not names:
            return []
        if s.fusion == "rrf":
            rankings = [sorted(signals[n], key=lambda d: -signals[n][d]) for n in names]
            fused = reciprocal_rank_fusion(rankings, k=s.rrf_k, weights=[weights[n] for n in names])
        else:
            total: dict[str, float] = {}
            for n in names:
                for doc_id, share in normalised(signals[n], s.normalization).items():
                    total[doc_id] = total.get(doc_id, 0.0) + weights[n] * share
            order = {d: i for i, d in enumerate(total)}
            fused = sorted(total.items(), key=lambda kv: (-kv[1], order[kv[0]]))
        whole = [(n, weights[n]) for n in DOCUMENT_SIGNALS if weights.get(n)]
        if whole and fused:
            # The leaders: the fused top and each signal's own top few, so a document one signal ranks first is
            # rescored even when another signal missed it.
            leading = {d for n in names for d in sorted(signals[n], key=lambda d: -signals[n][d])[: s.signal_leaders]}
            cut = max(k, s.rerank_candidates)
            leaders = fused[:cut] + [(d, f) for d, f in fused[cut:] if d in leading]
            ids = [d for d, _ in leaders]
            rankings, rrf_weights, total = [ids], [1.0], dict(leaders)
            for name, weight in whole:
                if name == "document_phrases":
                    held = self.document_phrases(ids, where)
                    scores = phrase_containment(texts["phrases"], held, s.phrase_ngram)
                else:
                    text = " ".join([texts[DOCUMENT_SIGNALS[name]], *query.keywords])
                    scores = self.document_index(where).scores(text, ids)
                top = max(scores.values(), default=0.0)
                rankings.append(sorted(scores, key=lambda d: -scores[d]))
                rrf_weights.append(weight)
                for d in ids:
                    total[d] += weight * (scores.get(d, 0.0) / top if top > 0 else 0.0)
            if s.fusion == "rrf":
                rescored = reciprocal_rank_fusion(rankings, k=s.rrf_k, weights=rrf_weights)
            else:
                rescored = sorted(total.items(), key=lambda kv: -kv[1])
            fused = rescored + [(d, f) for d, f in fused[cut:] if d not in total]
        return fused[:k]

    def document_phrases(self, doc_ids: Sequence[str], where: dict[str, Any] | None = None) -> dict[str, array]:
        """Each document's word n-grams (title and every chunk in scope, stopwords kept), read lazily and cached per
        document and store size, so only the documents a query leads with are ever read."""
        n, size, scope = self.settings.phrase_ngram, self.store.count(), json.dumps(where or {}, sort_keys=True)
        missing = [d for d in dict.fromkeys(doc_ids) if (size, scope, d) not in self._phrases]
        if missing:
            tokens: dict[str, list[str]] = {}
            for chunk in sorted(self.store.chunks_for_documents(missing, where=where), key=lambda c: c["position"]):
                if chunk["doc_id"] not in tokens:
                    tokens[chunk["doc_id"]] = words(chunk["title"])
                tokens[chunk["doc_id"]].extend(words(chunk["text"]))
            for d in missing:
                self._phrases[(size, scope, d)] = packed_ngrams(_ngrams(tokens.get(d, []), n))
                while len(self._phrases) > self._cache_size:
                    self._phrases.popitem(last=False)
        return {d: self._phrases[(size, scope, d)] for d in doc_ids}

    def document_index(self, where: dict[str, Any] | None = None) -> DocumentScorer:
        """Term statistics of the whole documents in scope: the store's own when it keeps them (a search engine
        backend: nothing is loaded here), else built in memory once per scope and store size."""
        own = getattr(self.store, "document_term_index", None)
        if callable(own):
            scorer: DocumentScorer = own(where)
            return scorer
        key = (self.store.count(), json.dumps(where or {}, sort_keys=True, default=str))
        index = self._doc_indexes.get(key)
        if index is None:
            index = DocumentTermIndex.from_chunks(self.store.all_chunks(where=where))
            self._doc_indexes[key] = index
            while len(self._doc_indexes) > SEARCH.document_indexes:
                self._doc_indexes.popitem(last=False)
        return index

    # --- paragraph level --------------------------------------------------------------------

    def search(
        self,
        query: RetrievalQuery,
        *,
        where: dict[str, Any] | None,
        doc_k: int = BUDGETS.doc_candidates,
        paragraph_k: int = BUDGETS.paragraph_candidates,
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
        doc_norm = np.array([doc_scores[c["doc_id"]] / top if top > 0 else 0.0 for c in chunks], dtype=np.float32)
        if paragraph_scoring:
            para = self._paragraph_scores(query, chunks)
            final = _minmax(para) + self.settings.doc_prior_weight * doc_norm
            # A keyword-stuffed chunk keeps a share of its score: it cannot take an honest paragraph's place.
            stuffed = np.array([chunk_is_stuffed(c) for c in chunks], dtype=bool)
            final = np.where(stuffed, final * STUFFING.hit_weight, final)
        else:
            # Without fine-grained scoring: documents in fused order, chunks in document order.
            para = np.zeros(len(chunks), dtype=np.float32)
            final = -np.array(
                [doc_rank[c["doc_id"]] * SEARCH.document_rank_stride + c["position"] for c in chunks], dtype=np.float32
            )
        if paragraph_scoring:
            order = select_across_documents(
                final.tolist(), [c["doc_id"] for c in chunks], paragraph_k, self.settings.same_document_penalty
            )
        else:
            order = [int(i) for i in np.argsort(-final, kind="stable")[:paragraph_k]]
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
        matrix = np.asarray(self.store.embeddings_for([c["chunk_id"] for c in chunks]), dtype=np.float32)
        # Keywords are embedded only when their cosines count (one row each in the turn's embedding call).
        keywords = [k for k in dict.fromkeys(query.keywords) if k.strip()] if s.keyword_weight else []
        question = query.question.strip() or query.history_query
        vectors = self.embed([question, *keywords])
        scores = matrix @ vectors[0]
        if s.history_paragraph_weight and query.history_query.strip():
            scores = scores + s.history_paragraph_weight * (matrix @ self.embed([query.history_query])[0])
        if keywords and s.keyword_weight:
            scores = scores + s.keyword_weight * (matrix @ vectors[1:].T).sum(axis=1)
        if s.lexical_paragraph_weight:
            scores = scores + s.lexical_paragraph_weight * _overlap_scores(query, chunks)
        return np.asarray(scores, dtype=np.float32)


def _overlap_scores(query: RetrievalQuery, chunks: Sequence[Chunk]) -> np.ndarray:
    """IDF-weighted overlap of the question and keywords with each candidate chunk (IDF over the candidates only),
    max-normalised to [0, 1]: BM25 with k1 = 0, where a term counts once however often it occurs. Words of three
    or more letters, stopwords included (their IDF over the candidates is low anyway); measured on 1,000 dev
    cases, BM25 with term frequencies, or without stopwords, put the gold document in the 3 kept passages less
    often (recall@1 0.797 / 0.803 vs 0.808)."""
    terms = list(dict.fromkeys(t for t in words(" ".join([query.question, *query.keywords])) if len(t) > 2))
    if not terms or not chunks:
        return np.zeros(len(chunks), dtype=np.float32)
    raw = idf_overlap([set(words(f"{c['title']} {c['section']} {c['text']}")) for c in chunks], terms)
    return raw / max(float(raw.max()), 1e-9)


def select_across_documents(
    scores: Sequence[float], doc_ids: Sequence[str], n: int, penalty: float = RetrievalSettings.same_document_penalty
) -> list[int]:
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
    penalty: float = RetrievalSettings.same_document_penalty,
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


def fuse_rerank(
    passages: list[Passage], n: int, penalty: float = RetrievalSettings.same_document_penalty
) -> list[Passage]:
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
