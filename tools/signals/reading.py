"""A turn's reading of its passages: the evidence sentences ranked against the question and, with the judge, which
of them answer it and whether the passages answer it at all. One function for the graph (triage) and for the judge's
training and evaluation (evals/train/judge.py), so both read a turn the same way."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from reground.tools.signals.answerability import coverage, depends_on_dialogue
from reground.tools.signals.evidence import Evidence, previous_reply, turn_evidence_vectors
from reground.tools.signals.injection import answerable_evidence
from reground.tools.signals.judge import JudgeModel, judge_inputs, sentence_probabilities
from reground.tools.signals.units import UnitRanker, rank_units, structured_turn
from reground.tools.text.tokens import history_query
from reground.tools.types import Passage

# (query, sentences) -> one logit per sentence that it answers the query (adapters/cross_encoder.py).
SentenceReader = Callable[[str, Sequence[str]], np.ndarray]


def reader_query(question: str, dialogue_query: str) -> str:
    """The reader's first text, as it was trained: the question, then the question read in its dialogue if any."""
    return f"{question} || {dialogue_query}" if dialogue_query else question


@dataclass(frozen=True)
class EvidenceWeights:
    """How the hand-made evidence score weighs its parts: built from the run's Context only
    (`Context.evidence_weights()`, its evidence_* fields), so it holds no default of its own."""

    dense: float
    dialogue: float
    continuity: float
    history_token_budget: int
    judge: float  # the judge's probability's weight beside the hand-made score
    reader: float  # the reader's logit's weight beside the judge's (0: the reader is not asked)
    units: str  # the unit ranker ranks the units: "on", "off", or "auto" (when they hold code or a table)
    reader_top: int  # the reader reads only the judge's best this many sentences (0: every one)


@dataclass(frozen=True)
class TurnReading:
    """The turn's evidence, best first; with a judge, the probability that the passages answer the question;
    `inputs`: the judge's input rows, one per evidence sentence before judging (kept for training)."""

    evidence: list[Evidence]
    answerable: float | None = None
    inputs: np.ndarray | None = None
    coverage: float = 1.0  # the share of the question's content words the passages hold
    missing: tuple[str, ...] = ()  # those it lacks, in question order
    dialogue_query: str = ""  # the question read in its dialogue, for a follow-up that depends on it


def read_turn(
    question: str,
    asked: str,
    history: Sequence[Mapping[str, str]],
    passages: Sequence[Passage],
    embed: Callable[[Sequence[str]], np.ndarray],
    weights: EvidenceWeights,
    *,
    judge: JudgeModel | None = None,
    reader: SentenceReader | None = None,
    unit_ranker: UnitRanker | None = None,
    keep_inputs: bool = False,
) -> TurnReading:
    """`question`: what the answer must answer (the standalone question when there is one); `asked`: the message as
    the user wrote it (a follow-up that depends on the dialogue is also read with it). `reader`: the cross-encoder
    that reads each (question, sentence) pair; its logits join the judge's (with a judge only). `unit_ranker`: ranks
    the units last, as `weights.units` says (signals/units.py); the judge still says whether the passages answer."""
    dialogue_query = (
        history_query(asked, history, weights.history_token_budget) if depends_on_dialogue(asked, bool(history)) else ""
    )
    evidence, rows, question_vector, dialogue_vector = turn_evidence_vectors(
        question,
        history,
        passages,
        embed,
        rewritten=question != asked,
        dense_weight=weights.dense,
        dialogue_query=dialogue_query,
        dialogue_weight=weights.dialogue,
        continuity_weight=weights.continuity,
    )
    # Flagged text states nothing (tools/signals/injection.py): it neither answers nor tells the judge that the
    # passages answer. A planted "to reset your password, call ... and give your password" made a password question
    # look answered, and the reply became the next sentence left: a flexitime rule.
    evidence = answerable_evidence(evidence, passages)
    covered, lacking = coverage(question, [p["text"] for p in passages])
    missing = tuple(lacking)
    ranks_units = unit_ranker is not None and (
        weights.units == "on" or (weights.units == "auto" and structured_turn(evidence))
    )
    if not evidence or (judge is None and not keep_inputs):
        if ranks_units and unit_ranker is not None:
            evidence = rank_units(unit_ranker, question, evidence, passages)
        return TurnReading(evidence, 0.0 if judge is not None else None, None, covered, missing, dialogue_query)
    inputs = judge_inputs(
        question,
        evidence,
        sentence_vectors=rows[[e.order for e in evidence]],
        question_vector=question_vector,
        previous_reply=previous_reply(history),
        has_dialogue=dialogue_vector is not None,
    )
    if judge is None:
        return TurnReading(evidence, None, inputs, covered, missing, dialogue_query)
    read = None
    if reader is not None and weights.reader > 0:
        read = np.zeros(len(evidence), dtype=np.float32)
        # Units the unit ranker orders: the reader changes neither their order (the ranker's scores) nor whether a
        # reply may take one (`extractive_answer` keeps the next unit while its strength is not below 0, and a unit
        # whose own score is not below 0 never is), so only the units scoring below 0 are read; the others keep
        # the judge's probability alone.
        wanted = [i for i, e in enumerate(evidence) if not ranks_units or e.score < 0]
        wanted, unread = judge_best(judge.sentence_logits(inputs), wanted, weights.reader_top)
        if wanted:
            logits = reader(reader_query(question, dialogue_query), [evidence[i].text for i in wanted])
            read[wanted] = weights.reader * np.asarray(logits, dtype=np.float32)
            # A sentence the judge ranks below every one read is assumed no better read: never raised above them.
            read[unread] = min(0.0, float(read[wanted].min()))
    probabilities, answerable = sentence_probabilities(judge, inputs, covered, read)
    judged = [
        replace(e, judge=round(p, 6), judge_weight=weights.judge) for e, p in zip(evidence, probabilities, strict=True)
    ]
    judged.sort(key=lambda e: (-e.strength, e.order))
    if ranks_units and unit_ranker is not None:
        judged = rank_units(unit_ranker, question, judged, passages)
    return TurnReading(judged, answerable, inputs if keep_inputs else None, covered, missing, dialogue_query)


def judge_best(judge_logits: np.ndarray, wanted: Sequence[int], top: int) -> tuple[list[int], list[int]]:
    """(the `top` of `wanted` the judge scores best, in `wanted`'s order; the rest). The reader costs one ONNX call
    a sentence, most of a turn's cost outside retrieval; the sentences the judge ranks low are rarely the answer."""
    if top <= 0 or len(wanted) <= top:
        return list(wanted), []
    best = set(sorted(wanted, key=lambda i: (-float(judge_logits[i]), i))[:top])
    return [i for i in wanted if i in best], [i for i in wanted if i not in best]
