"""The LLM-free retrieval stack against a small in-memory store with the PassageStore methods."""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from reground.nodes.rerank import keep_conversation_passage
from reground.tools.retrieval.search import (
    HybridRetriever,
    RetrievalQuery,
    RetrievalSettings,
    conversation_query,
    fuse_rerank,
    reciprocal_rank_fusion,
    select_across_documents,
    sentence_rerank,
)
from reground.tools.text.tokens import history_query
from reground.tools.tuning.turn import BUDGETS
from reground.tools.types import Chunk, Passage

_WORD = re.compile(r"[a-z0-9]+")
DIM = 256


class HashEmbedder:
    """Bag of hashed words, L2-normalised: texts sharing words have a high cosine."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
            norm = np.linalg.norm(out[i])
            if norm:
                out[i] /= norm
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


def _matches(chunk: Chunk, where: dict[str, Any] | None) -> bool:
    for key, wanted in (where or {}).items():
        values = wanted if isinstance(wanted, list) else [wanted]
        have = chunk["metadata"].get(key)
        if have is None or (have != "all" and have not in values):
            return False
    return True


class FakeStore:
    """PassageStore's search methods over a list of chunks; records every `where` it receives."""

    def __init__(self, chunks: list[Chunk]) -> None:
        self.chunks = chunks
        self.embedder = HashEmbedder()
        self.matrix = self.embedder.embed([c["text"] for c in chunks])
        self.wheres: list[Any] = []

    def _scoped(self, where: dict[str, Any] | None) -> list[int]:
        self.wheres.append(where)
        return [i for i, c in enumerate(self.chunks) if _matches(c, where)]

    def dense_search(self, query_embedding: np.ndarray, k: int, where: dict[str, Any] | None = None):
        idx = self._scoped(where)
        scored = sorted(
            ((self.chunks[i], float(self.matrix[i] @ query_embedding)) for i in idx),
            key=lambda x: -x[1],
        )
        return scored[:k]

    def lexical_search(self, query: str, k: int, where: dict[str, Any] | None = None):
        idx = self._scoped(where)
        terms = _WORD.findall(query.lower())
        bags = [Counter(_WORD.findall(self.chunks[i]["text"].lower())) for i in idx]
        n = len(bags)
        scores = []
        for i, bag in zip(idx, bags, strict=True):
            s = sum(
                math.log(1 + n / (1 + sum(t in b for b in bags))) * bag[t] / (bag[t] + 1.2) for t in terms if t in bag
            )
            if s > 0:
                scores.append((self.chunks[i], s))
        return sorted(scores, key=lambda x: -x[1])[:k]

    def chunks_for_documents(self, doc_ids: Sequence[str], where: dict[str, Any] | None = None) -> list[Chunk]:
        return [self.chunks[i] for i in self._scoped(where) if self.chunks[i]["doc_id"] in doc_ids]

    def all_chunks(self, where: dict[str, Any] | None = None) -> list[Chunk]:
        return [self.chunks[i] for i in self._scoped(where)]

    def count(self) -> int:
        return len(self.chunks)

    def embeddings_for(self, chunk_ids: Sequence[str]) -> np.ndarray:
        pos = {c["chunk_id"]: i for i, c in enumerate(self.chunks)}
        return self.matrix[[pos[c] for c in chunk_ids]]


def _chunk(doc_id: str, position: int, text: str, **metadata: Any) -> Chunk:
    return Chunk(
        chunk_id=f"{doc_id}:{position}",
        doc_id=doc_id,
        title=doc_id.replace("-", " "),
        section="",
        url=f"https://hr.example/{doc_id}",
        position=position,
        text=text,
        metadata={"country": "all", **metadata},
    )


CHUNKS = [
    _chunk(
        "leave-de",
        0,
        "Annual leave in Germany: full-time employees get 30 days of paid leave.",
        country="DE",
    ),
    _chunk(
        "leave-de",
        1,
        "Carry over up to 5 unused days; they must be taken by 31 March.",
        country="DE",
    ),
    _chunk(
        "leave-us",
        0,
        "Annual leave in the US: full-time employees get 20 days of paid time off.",
        country="US",
    ),
    _chunk(
        "leave-us",
        1,
        "Carry over up to 40 hours; carried hours must be used by June 30.",
        country="US",
    ),
    _chunk(
        "payslips",
        0,
        "Payslips are published in the portal on the 25th of each month.",
        country="all",
    ),
    _chunk("payslips", 1, "Report payslip errors within 30 days of the pay date.", country="all"),
    _chunk("sick-de", 0, "Sick pay in Germany: full salary for 6 weeks per illness.", country="DE"),
    _chunk("bikes", 0, "Bike leasing lets you lease a bicycle through salary conversion.", country="DE"),
]


@pytest.fixture()
def store() -> FakeStore:
    return FakeStore(list(CHUNKS))


def _words(text: str) -> list[str]:
    return text.split()


def test_rrf_weights_and_ties() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "a"]], k=60)
    assert [d for d, _ in fused] == ["a", "b", "c"]  # a and b tie; a was seen first
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    weighted = reciprocal_rank_fusion([["a", "b"], ["b", "a"]], k=60, weights=[1.0, 3.0])
    assert weighted[0][0] == "b"
    with pytest.raises(ValueError, match="2 weights for 1 rankings"):
        reciprocal_rank_fusion([["a"]], weights=[1.0, 2.0], k=RetrievalSettings.rrf_k)


def test_history_query_keeps_newest_turns_within_budget() -> None:
    history = [
        {"role": "user", "text": "first turn about bicycles " * 20},
        {"role": "agent", "text": "older answer about payslips"},
        ("user", "how many days of annual leave"),
    ]
    q = history_query("Can I carry them over?", history, budget_tokens=20)
    assert q.startswith("Can I carry them over?")
    assert "how many days of annual leave" in q and "older answer about payslips" in q
    assert q.index("older answer") < q.index("how many days")  # chronological after the question
    assert "bicycles" in q  # the budget is filled with the tail of the turn that did not fit
    assert q.count("bicycles") < 20
    assert history_query("Q?", history, budget_tokens=0) == "Q?"
    assert history_query("Q?", [], budget_tokens=100) == "Q?"


def test_filter_reaches_every_store_call_and_changes_the_answer(store: FakeStore) -> None:
    retriever = HybridRetriever(store)
    query = RetrievalQuery("How many days of annual leave do I get?", "How many days of annual leave do I get?")
    de = retriever.search(query, where={"country": "DE"}, doc_k=3, paragraph_k=3)
    us = retriever.search(query, where={"country": ["US"]}, doc_k=3, paragraph_k=3)
    assert de[0]["doc_id"] == "leave-de" and us[0]["doc_id"] == "leave-us"
    assert all(p["metadata"]["country"] in ("DE", "all") for p in de)
    assert all(p["metadata"]["country"] in ("US", "all") for p in us)
    assert store.wheres and all(w in ({"country": "DE"}, {"country": ["US"]}) for w in store.wheres)


def test_history_brings_the_follow_up_to_the_right_document(store: FakeStore) -> None:
    retriever = HybridRetriever(store)
    history = [
        ("user", "How many days of annual leave do I get in the US?"),
        ("agent", "You get 20 days."),
    ]
    question = "What's the deadline for carried hours?"
    docs = retriever.rank_documents(RetrievalQuery(question, history_query(question, history, 100)), where=None, k=3)
    assert docs[0][0] == "leave-us"
    assert docs == sorted(docs, key=lambda d: -d[1])


def test_search_fills_scores_and_keywords_move_paragraphs(store: FakeStore) -> None:
    settings = RetrievalSettings(lexical_paragraph_weight=0.0, history_paragraph_weight=0.0, keyword_weight=1.0)
    retriever = HybridRetriever(store, settings)
    base = RetrievalQuery("annual leave Germany", "annual leave Germany")
    plain = retriever.search(base, where={"country": "DE"}, doc_k=1, paragraph_k=2)
    assert {p["doc_id"] for p in plain} == {"leave-de"}
    assert plain[0]["position"] == 0
    for p in plain:
        assert {"score", "doc_score", "paragraph_score", "rank"} <= p.keys()
    boosted = retriever.search(
        RetrievalQuery(base.question, base.history_query, ("carry", "unused", "March")),
        where={"country": "DE"},
        doc_k=1,
        paragraph_k=2,
    )
    assert boosted[0]["position"] == 1, "keyword cosines should lift the carry-over paragraph"
    assert [p["rank"] for p in boosted] == [1, 2]


def test_keywords_are_not_embedded_when_their_cosines_do_not_count(store: FakeStore) -> None:
    """The default keyword weight is 0 (measured: no gain); then a keyword costs no row in the embedding call."""
    assert RetrievalSettings().keyword_weight == 0.0
    retriever = HybridRetriever(store, RetrievalSettings(lexical_paragraph_weight=0.0, history_paragraph_weight=0.0))
    query = RetrievalQuery("annual leave Germany", "annual leave Germany", ("carry", "unused", "March"))
    passages = retriever.search(query, where={"country": "DE"}, doc_k=1, paragraph_k=2)
    assert passages[0]["position"] == 0, "without keyword cosines the question's paragraph stays first"
    embedded = {text for call in store.embedder.calls for text in call}
    assert not {"carry", "unused", "March"} & embedded


def test_paragraph_scoring_off_keeps_document_order(store: FakeStore) -> None:
    retriever = HybridRetriever(store)
    q = RetrievalQuery("payslip errors", "payslip errors")
    passages = retriever.search(q, where=None, doc_k=2, paragraph_k=4, paragraph_scoring=False)
    first_doc = passages[0]["doc_id"]
    assert [p["position"] for p in passages if p["doc_id"] == first_doc] == [0, 1]


def test_query_embeddings_are_cached(store: FakeStore) -> None:
    retriever = HybridRetriever(store)
    q = RetrievalQuery("sick pay", "sick pay in Germany", ("illness",))
    retriever.search(q, where=None, doc_k=BUDGETS.doc_candidates, paragraph_k=BUDGETS.paragraph_candidates)
    n = sum(len(c) for c in store.embedder.calls)
    retriever.search(q, where=None, doc_k=BUDGETS.doc_candidates, paragraph_k=BUDGETS.paragraph_candidates)
    assert sum(len(c) for c in store.embedder.calls) == n, "a repeated query must not be embedded again"


def test_empty_scope_returns_nothing(store: FakeStore) -> None:
    retriever = HybridRetriever(store)
    q = RetrievalQuery("annual leave", "annual leave")
    assert (
        retriever.search(
            q,
            where={"country": "FR", "region": "x"},
            doc_k=BUDGETS.doc_candidates,
            paragraph_k=BUDGETS.paragraph_candidates,
        )
        == []
    )


def test_fuse_rerank_keeps_n_ranked() -> None:
    def p(i: int, score: float, para: float, doc: float) -> Passage:
        passage = Passage(**_chunk(f"d{i}", 0, "text"))
        passage.update(score=score, paragraph_score=para, doc_score=doc)
        return passage

    passages = [p(0, 0.2, 0.1, 0.9), p(1, 0.9, 0.8, 0.5), p(2, 0.5, 0.9, 0.4), p(3, 0.1, 0.0, 0.1)]
    kept = fuse_rerank(passages, 2, penalty=RetrievalSettings.same_document_penalty)
    assert [k["doc_id"] for k in kept] == ["d1", "d2"]
    assert [k["rank"] for k in kept] == [1, 2]
    assert kept[0]["rerank_score"] >= kept[1]["rerank_score"]
    assert fuse_rerank([], 3, penalty=RetrievalSettings.same_document_penalty) == []


def test_select_across_documents_spreads_slots_over_documents() -> None:
    scores = [1.0, 0.95, 0.9, 0.5, 0.2]
    docs = ["a", "a", "a", "b", "c"]
    assert select_across_documents(scores, docs, 3, penalty=0.0) == [0, 1, 2], "no penalty: plain score order"
    assert select_across_documents(scores, docs, 3, penalty=1.0) == [0, 3, 4], "a large penalty: one per document"
    # A moderate penalty lets a clearly better second paragraph of a document beat a weak other document.
    assert select_across_documents(scores, docs, 3, penalty=0.3) == [0, 1, 3]
    # Fewer documents than slots: the best remaining paragraphs fill the rest.
    assert select_across_documents([0.9, 0.8, 0.7], ["a", "a", "b"], 3, penalty=1.0) == [0, 2, 1]
    assert select_across_documents([], [], 3, penalty=RetrievalSettings.same_document_penalty) == []
    with pytest.raises(ValueError):
        select_across_documents([1.0], ["a", "b"], 1, penalty=RetrievalSettings.same_document_penalty)


def test_fuse_rerank_with_penalty_gives_each_top_document_a_slot() -> None:
    def p(doc: str, pos: int, score: float, para: float, doc_score: float) -> Passage:
        passage = Passage(**_chunk(doc, pos, f"text {doc} {pos}"))
        passage.update(score=score, paragraph_score=para, doc_score=doc_score)
        return passage

    passages = [p("a", 0, 0.9, 0.9, 1.0), p("a", 1, 0.8, 0.8, 1.0), p("a", 2, 0.7, 0.7, 1.0), p("b", 0, 0.6, 0.6, 0.9)]
    assert [k["doc_id"] for k in fuse_rerank(passages, 3, penalty=0.0)] == ["a", "a", "a"]
    kept = fuse_rerank(passages, 3, penalty=1.0)
    assert [k["doc_id"] for k in kept] == ["a", "b", "a"]
    assert [k["rank"] for k in kept] == [1, 2, 3]


def test_the_rerank_node_selects_with_the_context_s_penalty() -> None:
    from langgraph.runtime import Runtime
    from reground.nodes.common import NodeEnv
    from reground.nodes.context import Context
    from reground.nodes.rerank import rerank
    from reground.tools.services import Services

    from reground.testing.fake_chat import ScriptedChatModel

    def p(doc: str, pos: int, score: float) -> Passage:
        passage = Passage(**_chunk(doc, pos, f"text {doc} {pos}"))
        passage.update(score=score, paragraph_score=score, doc_score=1.0 if doc == "a" else 0.9)
        return passage

    candidates = [p("a", 0, 0.9), p("a", 1, 0.8), p("a", 2, 0.7), p("b", 0, 0.6)]

    def kept(penalty: float) -> list[str]:
        context = Context(rerank_method="fusion", top_n=3, retrieval=RetrievalSettings(same_document_penalty=penalty))
        env = NodeEnv(services=Services(chat_model=ScriptedChatModel()), runtime=Runtime(context=context))
        update = rerank({"question": "q", "candidates": candidates}, env)  # type: ignore[typeddict-item]
        return [k["doc_id"] for k in update["passages"]]

    assert kept(0.0) == ["a", "a", "a"]
    assert kept(1.0) == ["a", "b", "a"]


def test_search_candidates_cover_documents_with_a_penalty(store: FakeStore) -> None:
    q = RetrievalQuery("annual leave days", "annual leave days")
    plain = HybridRetriever(store, RetrievalSettings(same_document_penalty=0.0)).search(
        q, where=None, doc_k=3, paragraph_k=3
    )
    spread = HybridRetriever(store, RetrievalSettings(same_document_penalty=1.0)).search(
        q, where=None, doc_k=3, paragraph_k=3
    )
    assert len({p["doc_id"] for p in spread}) == 3, "a large penalty gives each of the 3 documents a paragraph"
    assert len({p["doc_id"] for p in plain}) <= len({p["doc_id"] for p in spread})
    assert spread[0]["chunk_id"] == plain[0]["chunk_id"], "the best paragraph stays first"


def test_conversation_query_carries_the_opening_exchange_and_earlier_user_turns() -> None:
    history = [
        {"role": "user", "text": "How many days of annual leave do I get in the US?"},
        {"role": "agent", "text": "You get 20 days of paid time off."},
        {"role": "user", "text": "When are payslips published?"},
        {"role": "agent", "text": "On the 25th of each month."},
    ]
    q = conversation_query(
        "And errors?",
        history,
        100,
        search_question="How do I report payslip errors?",
        phrase_tokens=RetrievalSettings.phrase_history_tokens,
    )
    assert q.question == "How do I report payslip errors?"
    assert q.history_query.startswith("And errors?") and "25th" in q.history_query
    assert q.topic_query == "How many days of annual leave do I get in the US? You get 20 days of paid time off."
    (turn,) = q.earlier_turns
    assert turn.text == "When are payslips published?" and turn.reply == "On the 25th of each month."
    assert turn.history_query.startswith("When are payslips published?") and "20 days" in turn.history_query
    first = conversation_query("How do I lease a bike?", [], 100, phrase_tokens=RetrievalSettings.phrase_history_tokens)
    assert first.topic_query == "How do I lease a bike?" and first.earlier_turns == ()


def test_the_opening_exchange_keeps_a_long_conversation_on_its_topic(store: FakeStore) -> None:
    history = [
        {"role": "user", "text": "Tell me about sick pay in Germany and illness."},
        {"role": "agent", "text": "Full salary for 6 weeks per illness."},
        *[{"role": r, "text": t} for r, t in [("user", "ok"), ("agent", "anything else?"), ("user", "hmm")]],
    ]
    query = conversation_query(
        "how long exactly?", history, budget_tokens=6, phrase_tokens=RetrievalSettings.phrase_history_tokens
    )
    assert "illness" not in query.history_query, "the recent window has lost the topic"
    topic_only = HybridRetriever(store, RetrievalSettings(weights={"dense_topic": 1.0}))
    assert topic_only.rank_documents(query, where=None, k=1)[0][0] == "sick-de"
    history_only = HybridRetriever(store, RetrievalSettings(weights={"lexical_history": 1.0}))
    assert "sick-de" not in [d for d, _ in history_only.rank_documents(query, where=None, k=3)]
    assert HybridRetriever(store).rank_documents(query, where=None, k=1)[0][0] == "sick-de", "the defaults use it"
    with pytest.raises(ValueError, match="unknown document signal 'dense_elsewhere'"):
        HybridRetriever(store, RetrievalSettings(weights={"dense_elsewhere": 1.0})).rank_documents(
            query, where=None, k=1
        )


def test_a_topic_shift_moves_the_topic_to_the_message_that_changed_it(store: FakeStore) -> None:
    settings = RetrievalSettings(shift_min_terms=5)
    retriever = HybridRetriever(store, settings)
    history = [
        {"role": "user", "text": "How many days of annual leave do I get in the US?"},
        {"role": "agent", "text": "Annual leave in the US: 20 days of paid time off; carry over up to 40 hours."},
    ]
    new_topic = "When are payslips published in the portal each month, and how do I report payslip errors?"
    shifted = conversation_query(new_topic, history, 100, phrase_tokens=RetrievalSettings.phrase_history_tokens)
    assert retriever.is_topic_shift(shifted)
    assert retriever.topic_text(shifted, where=None) == new_topic
    on_topic = "How many days of annual leave can I carry over in the US, and by when must the 40 hours be used?"
    assert not retriever.is_topic_shift(
        conversation_query(on_topic, history, 100, phrase_tokens=RetrievalSettings.phrase_history_tokens)
    ), "same document: no shift"
    assert not retriever.is_topic_shift(
        conversation_query(
            "And the carried hours?", history, 100, phrase_tokens=RetrievalSettings.phrase_history_tokens
        )
    ), "too short"
    # The next turn keeps the new topic: the shifting message and the reply to it.
    later = [*history, {"role": "user", "text": new_topic}, {"role": "agent", "text": "On the 25th of each month."}]
    follow_up = conversation_query("ok thanks", later, 100, phrase_tokens=RetrievalSettings.phrase_history_tokens)
    assert retriever.topic_text(follow_up, where=None) == f"{new_topic} On the 25th of each month."
    off = HybridRetriever(store, RetrievalSettings(detect_topic_shift=False))
    assert not off.is_topic_shift(shifted) and off.topic_text(follow_up, where=None) == follow_up.topic_query
    assert not retriever.is_topic_shift(
        conversation_query(new_topic, [], 100, phrase_tokens=RetrievalSettings.phrase_history_tokens)
    ), "a first turn opens the topic"


def test_phrase_containment_counts_verbatim_word_ngrams() -> None:
    from reground.tools.retrieval.ranking import ngram_hashes, phrase_containment

    docs = {
        "a": frozenset(ngram_hashes(_words("you must bring an original birth certificate to the office"), 4)),
        "b": frozenset(ngram_hashes(_words("an original certificate must be brought to the office by you"), 4)),
    }
    scores = phrase_containment("Do I bring an original birth certificate?", docs, 4)
    # 4 four-grams in the question; "a" holds "bring an original birth" and "an original birth certificate".
    assert scores["a"] == pytest.approx(2 / 4) and scores["b"] == 0.0, "same words, other order: no phrase"
    assert phrase_containment("too short", docs, 4) == {"a": 0.0, "b": 0.0}
    with pytest.raises(ValueError, match="n-gram size"):
        ngram_hashes(["a"], 0)


def test_the_phrase_signal_finds_the_document_a_reply_quoted(store: FakeStore) -> None:
    history = [
        {"role": "user", "text": "I have a question about carrying days over."},
        {"role": "agent", "text": "they must be taken by 31 March"},
    ]
    query = conversation_query("what else?", history, 100, phrase_tokens=RetrievalSettings.phrase_history_tokens)
    phrases = HybridRetriever(store, RetrievalSettings(weights={"lexical_history": 0.01, "document_phrases": 1.0}))
    ranked = phrases.rank_documents(query, where=None, k=2)
    assert ranked[0][0] == "leave-de", "only leave-de holds 'must be taken by 31 March' verbatim"
    assert ranked[0][1] > ranked[1][1] + 0.5
    assert phrases.document_phrases(["leave-de"])["leave-de"], "per-document n-grams are cached"


def test_a_shifting_turn_weights_the_dialogue_signals_down() -> None:
    from reground.tools.retrieval.search import shift_weights

    settings = RetrievalSettings(shift_history_weight=0.5, shift_question_weight=1.0)
    weights = shift_weights({"lexical_history": 1.0, "document_phrases": 0.4, "dense_topic": 2.0}, settings)
    assert weights["lexical_history"] == 0.5 and weights["document_phrases"] == pytest.approx(0.2)
    assert weights["dense_topic"] == 2.0, "the topic signal already searches the new message"
    assert weights["lexical_question"] == 1.0 and weights["dense_question"] == 1.0


def test_normalised_scales_by_the_best_or_by_the_range() -> None:
    from reground.tools.retrieval.search import normalised

    scores = {"a": 0.8, "b": 0.6, "c": 0.4}
    assert normalised(scores) == pytest.approx({"a": 1.0, "b": 0.75, "c": 0.5})
    assert normalised(scores, "minmax") == pytest.approx({"a": 1.0, "b": 0.5, "c": 0.0})
    assert normalised({"a": 0.3}, "minmax") == {"a": 1.0} and normalised({}) == {}
    with pytest.raises(ValueError, match="unknown normalization"):
        normalised(scores, "zscore")


def test_a_document_one_signal_ranks_first_is_rescored_even_when_others_miss_it(store: FakeStore) -> None:
    # Only two fused leaders are rescored; "bikes" is the lexical signal's top document but the dense topic signal
    # (weighted far higher) puts others ahead of it. The leaders union still lets the whole-document signal see it.
    weights = {"lexical_history": 0.5, "dense_topic": 5.0, "document_question": 10.0}
    query = RetrievalQuery("bicycle lease salary", "bicycle lease salary", topic_query="annual leave days Germany")
    narrow = RetrievalSettings(weights=weights, rerank_candidates=2, signal_leaders=0, detect_topic_shift=False)
    union = RetrievalSettings(weights=weights, rerank_candidates=2, signal_leaders=1, detect_topic_shift=False)
    assert HybridRetriever(store, narrow).rank_documents(query, where=None, k=1)[0][0] != "bikes"
    assert HybridRetriever(store, union).rank_documents(query, where=None, k=1)[0][0] == "bikes"


def test_a_new_topic_keeps_the_conversations_best_passage_in_the_last_slot() -> None:
    def passage(doc_id: str, rank: int) -> Passage:
        return Passage(
            chunk_id=f"{doc_id}#{rank}", doc_id=doc_id, title=doc_id, section="", text="t", position=0, rank=rank
        )

    new = [passage("travel", 1), passage("travel", 2), passage("expenses", 3)]
    kept = keep_conversation_passage(new, [passage("leave", 1), passage("leave", 2)])
    assert [p["doc_id"] for p in kept] == ["travel", "travel", "leave"]
    assert [p["rank"] for p in kept] == [1, 2, 3]
    already = [passage("leave", 1), passage("travel", 2)]
    assert keep_conversation_passage(already, [passage("leave", 1)]) == already, "its document is already kept"
    assert keep_conversation_passage(new, []) == new


def _scored(doc: str, pos: int, text: str, score: float) -> Passage:
    passage = Passage(**_chunk(doc, pos, text))
    passage.update(score=score, paragraph_score=score, doc_score=score)
    return passage


def test_sentence_rerank_prefers_the_paragraph_whose_sentence_answers() -> None:
    on_topic = _scored("a", 0, "leave leave leave", 1.0)
    answering = _scored("b", 0, "thirty days", 0.9)
    # 1.0 + 0.3 x 0.2 = 1.06 against 0.9 + 0.3 x 0.8 = 1.14; without the sentence term retrieval order stands.
    assert [
        p["doc_id"]
        for p in sentence_rerank(
            [on_topic, answering], [0.2, 0.8], 2, 0.3, penalty=RetrievalSettings.same_document_penalty
        )
    ] == ["b", "a"]
    assert [
        p["doc_id"]
        for p in sentence_rerank(
            [on_topic, answering], [0.2, 0.8], 2, 0.0, penalty=RetrievalSettings.same_document_penalty
        )
    ] == ["a", "b"]
    kept = sentence_rerank([on_topic, answering], [0.2, 0.8], 1, 0.3, penalty=RetrievalSettings.same_document_penalty)
    assert [(p["doc_id"], p["rank"], p["rerank_score"]) for p in kept] == [("b", 1, 1.14)]
    assert sentence_rerank([], [], 3, 0.3, penalty=RetrievalSettings.same_document_penalty) == []
    with pytest.raises(ValueError, match="2 sentence cosines for 1 passages"):
        sentence_rerank([on_topic], [0.2, 0.8], 1, 0.3, penalty=RetrievalSettings.same_document_penalty)


def test_best_sentence_cosines_take_each_passage_s_closest_sentence() -> None:
    from reground.tools.signals.evidence import best_sentence_cosines

    embedder = HashEmbedder()
    passages = [
        _scored("a", 0, "Staff get thirty working days. Unused days carry over to March.", 1.0),
        _scored("b", 0, "The training budget is set each year by the team.", 0.9),
        _scored("c", 0, "Too short.", 0.8),
    ]
    cosines = best_sentence_cosines(embedder.embed, "How many working days do staff get?", passages)
    first = embedder.embed(["How many working days do staff get?", "Staff get thirty working days."])
    assert cosines[0] == pytest.approx(float(first[0] @ first[1]), abs=1e-6)
    assert cosines[0] > cosines[1] >= 0.0
    assert cosines[2] == 0.0, "a passage with no sentence of three words has no closest sentence"
    assert len(embedder.calls) == 2, "the question and every sentence in one embedding call (plus the check's)"


def test_the_default_rerank_keeps_the_passage_whose_sentence_answers() -> None:
    from langgraph.runtime import Runtime
    from reground.nodes.common import NodeEnv
    from reground.nodes.context import Context
    from reground.nodes.rerank import rerank
    from reground.tools.services import Services

    from reground.testing.fake_chat import ScriptedChatModel

    chunks = [
        _chunk("leave", 0, "Annual leave rules apply to all staff. Leave requests go to your manager first."),
        _chunk("days", 0, "Full-time staff get thirty working days of annual leave each year."),
    ]
    candidates = [
        Passage(**{**chunks[0], "score": 1.0, "paragraph_score": 1.0, "doc_score": 1.0}),
        Passage(**{**chunks[1], "score": 0.92, "paragraph_score": 0.92, "doc_score": 0.92}),
    ]
    services = Services(chat_model=ScriptedChatModel(), store=FakeStore(chunks))
    state = {"question": "How many working days of annual leave do staff get each year?", "candidates": candidates}

    def kept(context: Any) -> list[str]:
        update = rerank(state, NodeEnv(services=services, runtime=Runtime(context=context)))
        return [p["doc_id"] for p in update["passages"]]

    assert Context().rerank_method == "sentence"
    assert kept(Context(collection="docs", top_n=1)) == ["days"]
    assert kept(Context(collection="docs", top_n=1, rerank_method="off")) == ["leave"]
    # The trained judge as the in-process cross-encoder reads the same: the sentence with the days answers.
    assert kept(Context(collection="docs", top_n=1, rerank_method="judge")) == ["days"]
    assert kept(Context(collection="docs", top_n=1, rerank_method="judge", use_trained_judge=False)) == ["days"]
    # The listwise LLM rerank falls back to the sentence ranking when its reply is unusable.
    junk = Services(chat_model=ScriptedChatModel(script={"rerank": ["no idea"]}), store=FakeStore(chunks))
    env = NodeEnv(services=junk, runtime=Runtime(context=Context(collection="docs", top_n=1, rerank_method="llm")))
    update = rerank(state, env)
    assert [p["doc_id"] for p in update["passages"]] == ["days"]
    assert any("ranking by sentence instead" in note for note in env.stats.notes)


def test_a_re_grounding_after_an_abstention_lets_the_earlier_passages_compete_in_rerank(store: FakeStore) -> None:
    """A new query can lose the dialogue's document (doc2dial: 7 turns did); the earlier search's passages join the
    new candidates, so rerank chooses among both."""
    from langgraph.runtime import Runtime
    from reground.nodes.common import NodeEnv
    from reground.nodes.context import Context
    from reground.nodes.retrieve import retrieve
    from reground.tools.services import Services

    from reground.testing.fake_chat import ScriptedChatModel

    earlier = Passage(**{**_chunk("claims", 0, "Claims are filed within 90 days of the visit."), "score": 0.4})
    env = NodeEnv(services=Services(chat_model=ScriptedChatModel(), store=store), runtime=Runtime(context=Context()))
    state: dict[str, Any] = {"question": "How many days of leave do I get?", "query_mode": "forced_history"}
    fresh = [c["chunk_id"] for c in retrieve(state, env)["candidates"]]
    assert "claims:0" not in fresh
    pooled = [c["chunk_id"] for c in retrieve({**state, "held_passages": [earlier]}, env)["candidates"]]
    assert pooled == [*fresh, "claims:0"]


@pytest.mark.parametrize("decision", ["abstain", "answer", "hedge"])
def test_a_re_grounding_holds_the_passages_the_judge_read_best(store: FakeStore, decision: str) -> None:
    """After an abstention and after an ungrounded written reply alike, the search before the re-grounding is kept
    while it reads best: a new query can lose the passages the judge found answering (qwen2.5-1.5b writing, doc2dial:
    5 of 60 follow-ups abstained after a re-grounding that lost them)."""
    from langgraph.runtime import Runtime
    from reground.nodes.common import NodeEnv
    from reground.nodes.context import Context
    from reground.nodes.reground import re_ground
    from reground.tools.services import Services

    from reground.testing.fake_chat import ScriptedChatModel

    first = Passage(**{**_chunk("leave", 0, "Full-time employees get 30 days of annual leave."), "score": 0.9})
    env = NodeEnv(services=Services(chat_model=ScriptedChatModel(), store=store), runtime=Runtime(context=Context()))
    state: dict[str, Any] = {
        "question": "How many days do I get?",
        "history": [{"role": "user", "text": "Tell me about leave."}, {"role": "assistant", "text": "Sure."}],
        "passages": [first],
        "decision": decision,
        "signals": {"answerable": 0.9},
    }
    update = re_ground(state, env)
    assert update["held_passages"] == [first] and update["held_answerable"] == 0.9
    better_held = re_ground({**state, "held_passages": [], "held_answerable": 0.95}, env)
    assert "held_passages" not in better_held, "an earlier search that read better stays held"
