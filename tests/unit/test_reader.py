"""The reader (adapters/cross_encoder.py): the shipped cross-encoder, how a pair is cut, and how its logits join the
judge's when a turn is read."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reground.nodes.context import Context
from reground.tools.adapters.cross_encoder import READER_FILE, READER_SHA256, shipped_reader
from reground.tools.signals.judge import SCALAR_NAMES, TURN_FEATURE_NAMES, JudgeModel, sentence_probabilities
from reground.tools.signals.reading import read_turn, reader_query
from reground.tools.tuning.models import READER

GOWN_HIRE = [
    "Everything you need to know about the gown hire at Riverside University.",
    "You pay a fee of £50 for the gown hire, charged once each term.",
    "You can arrange the gown hire at the Student Hub on Level 5 of the Main Library.",
]


def indifferent_judge(width: int) -> JudgeModel:
    """A judge whose weights are all zero: every sentence gets logit 0, so only what is added to it can rank."""
    heads = len(TURN_FEATURE_NAMES)
    return JudgeModel(
        mean=np.zeros(width, dtype=np.float32),
        scale=np.ones(width, dtype=np.float32),
        w1=np.zeros((width, 2), dtype=np.float32),
        b1=np.zeros(2, dtype=np.float32),
        w2=np.zeros(2, dtype=np.float32),
        b2=0.0,
        head_w=np.zeros(heads, dtype=np.float32),
        head_b=0.0,
        head_mean=np.zeros(heads, dtype=np.float32),
        head_scale=np.ones(heads, dtype=np.float32),
    )


def test_the_shipped_reader_is_the_pinned_one_and_has_a_model_card() -> None:
    path = Path(str(resources.files("reground") / "data" / "judge" / READER_FILE))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == READER_SHA256
    card = path.with_name("MODEL_CARD.md").read_text()
    assert READER_SHA256 in card and "reground.evals.train.reader_train" in card


def test_the_reader_finds_the_sentence_that_answers_not_the_one_about_the_topic() -> None:
    """Cosines put the page's title first (it names the gown hire); the reader reads "cost" against "a fee of £50"."""
    logits = shipped_reader().logits("What does the gown hire cost?", GOWN_HIRE)
    assert logits.shape == (3,) and int(np.argmax(logits)) == 1
    where = shipped_reader().logits("Where can I arrange the gown hire?", GOWN_HIRE)
    assert where[1] < min(where[0], where[2]), "the fee does not say where"


def test_a_pair_is_cut_as_in_training_and_order_does_not_change_a_score() -> None:
    reader = shipped_reader()
    long_question = "What does it cost " * 60
    long_sentence = "The fee is fifty pounds per term " * 60
    ids, segments = reader._pair(list(range(READER.question_tokens)), list(range(1000)))
    assert len(ids) == READER.pair_tokens and segments.count(0) == READER.question_tokens + 2
    alone = reader.logits(long_question, [long_sentence])
    together = reader.logits(long_question, ["Short.", long_sentence, *GOWN_HIRE])
    assert together[1] == pytest.approx(alone[0], abs=1e-4)
    assert reader.logits("anything", []).shape == (0,)


def test_the_reader_reads_the_question_in_its_dialogue_only_for_a_follow_up() -> None:
    assert reader_query("How long is parental leave?", "") == "How long is parental leave?"
    assert reader_query("Is it paid?", "Is it paid? How long is parental leave?").startswith("Is it paid? || ")


def test_the_reader_s_logits_join_the_judge_s() -> None:
    model = indifferent_judge(len(SCALAR_NAMES) + 4)
    inputs = np.zeros((2, len(SCALAR_NAMES) + 4), dtype=np.float32)
    plain, _ = sentence_probabilities(model, inputs, 1.0)
    read, _ = sentence_probabilities(model, inputs, 1.0, np.asarray([2.0, -2.0], dtype=np.float32))
    assert plain == pytest.approx([0.5, 0.5])
    assert read[0] > 0.85 and read[1] < 0.15


def flat_embed(texts: Sequence[str]) -> np.ndarray:
    """One vector for every text: no cosine tells the sentences apart."""
    vectors = np.ones((len(texts), 384), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_turn_read_with_the_reader_ranks_what_it_reads_first() -> None:
    """The judge alone cannot tell the fee sentence from the others here (its weights are zero); the reader can."""
    model = indifferent_judge(len(SCALAR_NAMES) + 384)
    calls: list[tuple[str, list[str]]] = []

    def reader(query: str, sentences: Sequence[str]) -> np.ndarray:
        calls.append((query, list(sentences)))
        return np.asarray([8.0 if "£50" in s else -8.0 for s in sentences], dtype=np.float32)

    passages = [{"doc_id": "gown", "title": "Gown hire", "text": " ".join(GOWN_HIRE), "score": 1.0}]
    question = "What does the gown hire cost?"
    weights = Context().evidence_weights()
    with_reader = read_turn(question, question, [], passages, flat_embed, weights, judge=model, reader=reader)
    assert "£50" in with_reader.evidence[0].text
    assert calls and calls[0][0] == question
    calls.clear()
    read_turn(question, question, [], passages, flat_embed, weights, reader=reader)
    assert not calls, "without the judge the reader is not asked"
    off = read_turn(
        question,
        question,
        [],
        passages,
        flat_embed,
        Context(evidence={"reader_weight": 0.0}).evidence_weights(),
        judge=model,
        reader=reader,
    )
    assert not calls, "at weight 0 the reader is not asked"
    assert {e.judge for e in off.evidence} == {0.5}, "nothing but the (indifferent) judge scores the sentences"
    assert {e.judge for e in with_reader.evidence} != {0.5}


def test_the_reader_s_weight_is_a_context_setting_that_reaches_the_reading() -> None:
    from reground.nodes.context import Context

    assert Context().evidence_weights().reader == 1.0
    assert Context(evidence={"reader_weight": 0.0}).evidence_weights().reader == 0.0


def _fresh_reader(sessions: int) -> Any:
    from reground.tools.adapters.cross_encoder import CrossEncoderReader
    from reground.tools.adapters.embeddings import MINILM_TOKENIZER, packaged_file

    path = Path(str(resources.files("reground") / "data" / "judge" / READER_FILE))
    return CrossEncoderReader(path, packaged_file(*MINILM_TOKENIZER), sessions=sessions)


def test_sessions_reading_in_parallel_give_the_logits_of_one_session() -> None:
    """Each pair is its own ONNX call on whichever session: the same calls, so the same numbers, bit for bit."""
    sentences = [*GOWN_HIRE, "The library opens at 8 am.", "Gowns are returned after the ceremony.", "Yes."]
    question = "What does the gown hire cost? || gown hire cost"
    one, two = _fresh_reader(1), _fresh_reader(2)
    assert np.array_equal(one.logits(question, sentences), two.logits(question, sentences))


def test_a_sentence_a_turn_holds_twice_is_read_once() -> None:
    reader = _fresh_reader(1)
    read: list[int] = []
    run = reader._run

    def counted(session: int, pairs: Any, rows: Sequence[int]) -> np.ndarray:
        read.extend(rows)
        return np.asarray(run(session, pairs, rows))

    reader._run = counted
    logits = reader.logits("What does the gown hire cost?", [GOWN_HIRE[1], GOWN_HIRE[0], GOWN_HIRE[1]])
    assert len(read) == 2, "the repeated sentence is one pair"
    assert logits[0] == logits[2] and logits.shape == (3,)
    reader.logits("What does the gown hire cost?", GOWN_HIRE[:2])
    assert len(read) == 2, "pairs read once are cached"


def test_units_the_unit_ranker_orders_are_read_only_where_the_reader_can_change_the_reply() -> None:
    """With the unit ranker ordering a turn's units, the reader's logit moves neither the order nor, for a unit whose
    own score is not below 0, whether the reply may take it: only the unit scoring below 0 is read, and the ranking
    is the one a full reading gives."""
    from reground.tools.signals.judge import shipped_judge
    from reground.tools.signals.units import rank_units, shipped_unit_ranker

    text = (
        "To declare a query parameter, add it to the function:\n\n```python\n@app.get('/items/')\n"
        "async def read(q: str):\n    return q\n```\n\nUnrelated trivia about the mascot of the project goes here.\n\n"
        "The parameter is optional when it has a default value."
    )
    passages = [{"doc_id": "d", "chunk_id": "d#0", "title": "Query parameters", "section": "", "text": text}]

    def embed(texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), 384), dtype=np.float32)
        for row, t in enumerate(texts):  # the mascot sentence points away from the question: its score is below 0
            rows[row, 0], rows[row, 1] = (-1.0 if "mascot" in t else 1.0), (0.3 if "optional" in t else 0.0)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    read: list[str] = []

    def reader(query: str, sentences: Sequence[str]) -> np.ndarray:
        read.extend(sentences)
        return np.asarray([3.0 if "mascot" in s else -1.0 for s in sentences], dtype=np.float32)

    question, weights = "How do I declare a query parameter?", Context().evidence_weights()
    judge, ranker = shipped_judge(), shipped_unit_ranker()
    ranked = read_turn(question, question, [], passages, embed, weights, judge=judge, reader=reader, unit_ranker=ranker)
    assert [r[:20] for r in read] == ["Unrelated trivia abo"], "only the unit scoring below 0"
    assert [e.score < 0 for e in ranked.evidence] == [False, False, True]
    read.clear()
    full = read_turn(question, question, [], passages, embed, weights, judge=judge, reader=reader)
    assert len(read) == 3, "without the unit ranker every unit is read"
    expected = rank_units(ranker, question, full.evidence, passages)
    assert [(e.text, e.unit_score) for e in ranked.evidence] == [(e.text, e.unit_score) for e in expected]
    assert ranked.evidence[-1].judge == expected[-1].judge and ranked.answerable == full.answerable


def test_with_reader_top_the_reader_reads_only_the_judge_s_best_sentences_and_the_rest_rank_below_them() -> None:
    """`evidence.reader_top`: the judge (here it scores the sentences by a hand-set column) picks which sentences the
    reader reads; one it skips takes the worst logit read, so it never rises above a read one."""
    from dataclasses import replace as changed

    from reground.tools.signals.reading import judge_best

    width = len(SCALAR_NAMES) + 384
    judge = indifferent_judge(width)
    lexical = SCALAR_NAMES.index("lexical")
    w1 = np.zeros((width, 2), dtype=np.float32)
    w1[lexical, 0] = 1.0
    judge = changed(judge, w1=w1, w2=np.asarray([1.0, 0.0], dtype=np.float32))
    sentences = [
        "You pay a fee of £50 for the gown hire, charged once each term.",
        "The gown hire desk is on Level 5.",
        "Gowns are returned after the ceremony.",
        "The library opens at 8 am.",
    ]
    read: list[str] = []

    def reader(query: str, texts: Sequence[str]) -> np.ndarray:
        read.extend(texts)
        return np.asarray([4.0 if "£50" in s else -2.0 for s in texts], dtype=np.float32)

    passages = [{"doc_id": "gown", "title": "Gown hire", "text": " ".join(sentences), "score": 1.0}]
    question = "What does the gown hire fee cost?"
    every = read_turn(
        question, question, [], passages, flat_embed, Context().evidence_weights(), judge=judge, reader=reader
    )
    assert len(read) == 4
    read.clear()
    two = read_turn(
        question,
        question,
        [],
        passages,
        flat_embed,
        Context(evidence={"reader_top": 2}).evidence_weights(),
        judge=judge,
        reader=reader,
    )
    assert len(read) == 2, "only the judge's best two"
    best_read = min(e.judge for e in two.evidence if e.text in read)
    assert all(e.judge <= best_read for e in two.evidence if e.text not in read)
    assert two.evidence[0].text == every.evidence[0].text == sentences[0]
    assert judge_best(np.asarray([0.1, 0.9, 0.5]), [0, 1, 2], 2) == ([1, 2], [0])
    assert judge_best(np.asarray([0.1, 0.9, 0.5]), [0, 2], 5) == ([0, 2], [])
    assert judge_best(np.asarray([0.1, 0.9, 0.5]), [0, 1, 2], 0) == ([0, 1, 2], [])


def test_reader_top_is_a_context_setting_that_reaches_the_reading() -> None:
    from reground.nodes.context import Context

    assert Context(evidence={"reader_top": 6}).evidence_weights().reader_top == 6
    with pytest.raises(Exception, match="reader_top"):
        Context(evidence={"reader_top": -1})
