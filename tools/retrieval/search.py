"""The LLM-free retrieval stack, used by the graph's retrieve/rerank nodes and by `reground eval retrieval`.

Document level: BM25 and MiniLM rankings of chunks, for the question alone and for the question plus
recent dialogue, each reduced to a document ranking (a document scores its best chunk) and fused by
weighted reciprocal rank. Paragraph level (ConvRAG): the top documents' chunks are scored by
`cos(E(q'), E(p)) + Σ_k cos(E(k), E(p))` plus a BM25 term. The user's metadata filter `where` is passed
to every store call, so nothing outside the user's scope is ever ranked.
The query a turn searches with is built in query.py, the rankings are fused in ranking.py; both are importable
from here.
"""

from __future__ import annotations

import json
from array import array
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Protocol

import numpy as np
from reground.tools.retrieval.chunk_ranker import ChunkRanker, ParagraphSignals, applies, chunk_feature_rows
from reground.tools.retrieval.query import (
    CHUNK_TEXTS,
    DOCUMENT_SIGNALS,
    EarlierTurn,
    RetrievalQuery,
    Topic,
    conversation_query,
)
from reground.tools.retrieval.ranking import (
    HISTORY_SIGNALS,
    DocumentScorer,
    DocumentTermIndex,
    fuse_rerank,
    minmax_scaled,
    ngram_hashes,
    normalised,
    overlap_scores,
    packed_ngrams,
    phrase_containment,
    reciprocal_rank_fusion,
    select_across_documents,
    sentence_rerank,
    shift_weights,
)
from reground.tools.signals.answerability import stands_alone
from reground.tools.signals.stuffing import chunk_is_stuffed
from reground.tools.text.lexical import content_terms, words
from reground.tools.tuning.retrieval import SEARCH, RetrievalSettings
from reground.tools.tuning.signals import STUFFING
from reground.tools.types import Chunk, Passage

# Where the retrieval stack's users import it from: the query (query.py) and ranking (ranking.py) parts included.
# content_terms: evals measure spans with the retrieval's tokeniser.
__all__ = [
    "CHUNK_TEXTS",
    "DOCUMENT_SIGNALS",
    "HISTORY_SIGNALS",
    "DocumentScorer",
    "DocumentTermIndex",
    "EarlierTurn",
    "HybridRetriever",
    "RetrievalQuery",
    "RetrievalSettings",
    "SearchStore",
    "Topic",
    "content_terms",
    "conversation_query",
    "fuse_rerank",
    "normalised",
    "packed_ngrams",
    "phrase_containment",
    "reciprocal_rank_fusion",
    "select_across_documents",
    "sentence_rerank",
    "shift_weights",
]


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


class HybridRetriever:
    """Hybrid (BM25 + dense) document search, then ConvRAG paragraph scoring, inside the metadata filter."""

    def __init__(
        self,
        store: SearchStore,
        settings: RetrievalSettings | None = None,
        *,
        cache_size: int = SEARCH.cache_size,
        chunk_ranker: ChunkRanker | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or RetrievalSettings()
        self.chunk_ranker = chunk_ranker  # paragraphs of documentation with code (chunk_ranker.py)
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
                self._phrases[(size, scope, d)] = packed_ngrams(ngram_hashes(tokens.get(d, []), n))
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
        doc_k: int,
        paragraph_k: int,
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
        ranker = self.chunk_ranker
        if ranker is not None and not applies(self.settings.chunk_ranking, chunks):
            ranker = None
        learned = paragraph_scoring and ranker is not None
        if paragraph_scoring:
            signals = self.paragraph_signals(query, chunks, doc_norm, ranked=learned)
            para = signals.paragraph
            stuffed = np.array([chunk_is_stuffed(c) for c in chunks], dtype=bool)
            if ranker is not None:
                final = ranker.scores(chunk_feature_rows(query.asked, chunks, signals))
                # A keyword-stuffed chunk ranks after every honest one.
                final = np.where(stuffed, final - float(np.ptp(final)) - 1.0, final)
            else:
                final = minmax_scaled(para) + self.settings.doc_prior_weight * doc_norm
                # A keyword-stuffed chunk keeps a share of its score: it cannot take an honest paragraph's place.
                final = np.where(stuffed, final * STUFFING.hit_weight, final)
        else:
            # Without fine-grained scoring: documents in fused order, chunks in document order.
            para = np.zeros(len(chunks), dtype=np.float32)
            final = -np.array(
                [doc_rank[c["doc_id"]] * SEARCH.document_rank_stride + c["position"] for c in chunks], dtype=np.float32
            )
        if learned:  # the ranker reads the document's score itself
            order = [int(i) for i in np.argsort(-final, kind="stable")[:paragraph_k]]
        elif paragraph_scoring:
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
            if learned:
                passage["chunk_score"] = float(final[i])
            passage["rank"] = rank
            passages.append(passage)
        return passages

    def paragraph_signals(
        self, query: RetrievalQuery, chunks: Sequence[Chunk], document: np.ndarray, *, ranked: bool = False
    ) -> ParagraphSignals:
        """ConvRAG's paragraph score, cos(E(q'), E(p)) + w·Σ_k cos(E(k), E(p)) + w_lex·BM25(p) normalised to [0, 1],
        and, when `ranked`, what the chunk ranker reads beside it: the cosines with the turn's question (`query.asked`)
        and with the dialogue (`document`: each chunk's document score, scaled)."""
        s = self.settings
        matrix = np.asarray(self.store.embeddings_for([c["chunk_id"] for c in chunks]), dtype=np.float32)
        # Keywords are embedded only when their cosines count (one row each in the turn's embedding call).
        keywords = [k for k in dict.fromkeys(query.keywords) if k.strip()] if s.keyword_weight else []
        question = query.question.strip() or query.history_query
        asked = query.asked.strip() or question
        vectors = self.embed([question, *keywords, *([asked] if ranked else [])])
        dense = matrix @ vectors[0]
        dialogue = np.zeros(len(chunks), dtype=np.float32)
        if (s.history_paragraph_weight or ranked) and query.history_query.strip():
            dialogue = matrix @ self.embed([query.history_query])[0]
        scores = dense + s.history_paragraph_weight * dialogue
        if keywords and s.keyword_weight:
            scores = scores + s.keyword_weight * (matrix @ vectors[1:].T).sum(axis=1)
        if s.lexical_paragraph_weight:
            scores = scores + s.lexical_paragraph_weight * overlap_scores(query, chunks)
        return ParagraphSignals(
            dense=np.asarray(matrix @ vectors[-1] if ranked else dense, dtype=np.float32),
            dialogue_dense=np.asarray(dialogue, dtype=np.float32),
            paragraph=np.asarray(scores, dtype=np.float32),
            document=document,
        )
