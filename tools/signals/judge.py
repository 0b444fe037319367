"""The judge: a model trained here that reads (the question in its dialogue, a passage sentence) and scores whether the
sentence *answers* the question, and, over a turn's sentences, whether the passages answer it at all.

Word overlap and MiniLM cosines find text *about* the question; the judge learns from doc2dial's gold spans which of
those sentences answer it. It is a small two-layer network over what the turn already has, so it costs no model
call and no new encoder pass: the cosines and word overlap of signals/evidence.py, the sentence's form (a heading, a
sentence ending in a colon, a question, a bare link), what the question asks for against what the sentence holds
(an amount, a date, a time, steps), and the element-wise products of the question's and the sentence's MiniLM
vectors (which dimensions agree). The answerability head is a logistic model over the turn's best judge scores,
trained on doc2dial with constructed unanswerables (the same turn with its gold document's sentences taken out).

Weights ship with the package (reground/data/judge/judge.npz, sha256-pinned in its model card) and are trained by
`reground judge train` (evals/train/judge.py), never at run time.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from reground.tools.signals.evidence import Evidence
from reground.tools.signals.scoring import token_f1

# The shipped weights and their pinned digest (the model card beside them says how they were trained).
JUDGE_FILE = "judge.npz"
JUDGE_SHA256 = "83da802311d4f6e43f1b554945f96869bcce5a980f0f44583d87dcedac334098"

# --- what a question asks for, what a sentence holds --------------------------------------------------------------
# Features of a learned model (their weights are trained), not decisions: each says what kind of answer a question
# wants or what kind of content a sentence carries.
_ASKS = (
    (
        "amount",
        re.compile(r"\bhow (much|many|long|often|old|far|big|large)\b|\b(cost|price|fee|rate|amount)s?\b", re.I),
    ),
    ("time", re.compile(r"\b(when|what time|what date|deadline|until|by what)\b", re.I)),
    ("place", re.compile(r"\bwhere\b", re.I)),
    ("person", re.compile(r"\bwho(m|se)?\b", re.I)),
    ("reason", re.compile(r"\bwhy\b", re.I)),
    ("procedure", re.compile(r"\bhow (do|can|should|would|to|does|did|is|are)\b|\bsteps?\b|\bprocess\b", re.I)),
    (
        "yes_no",
        re.compile(
            r"^\s*(is|are|am|was|were|do|does|did|can|could|should|shall|will|would|may|must|has|have|had)\b", re.I
        ),
    ),
    ("which", re.compile(r"\b(what|which)\b", re.I)),
)
_HOLDS = (
    ("number", re.compile(r"\d")),
    ("money", re.compile(r"[$€£%]|\b(usd|eur|gbp|dollars?|euros?|percent|cents?)\b", re.I)),
    (
        "date",
        re.compile(
            r"\b(1[89]\d\d|20\d\d|jan(uary)?|feb(ruary)?|march|april|may|june|july|aug(ust)?|sept?(ember)?|oct(ober)?|nov(ember)?|dec(ember)?|monday|tuesday|wednesday|thursday|friday|days?|weeks?|months?|years?)\b",
            re.I,
        ),
    ),
    ("clock", re.compile(r"\b\d{1,2}(:\d\d)?\s*(a\.?m\.?|p\.?m\.?)|\b\d{1,2}:\d\d\b", re.I)),
    ("link", re.compile(r"https?://|www\.|\[\d+\]|\.(gov|com|org)\b", re.I)),
    ("list", re.compile(r"(^|\n)\s*([-*•]|\d+[.)])\s+")),
    ("modal", re.compile(r"\b(must|should|can|may|need to|have to|required)\b", re.I)),
    ("second_person", re.compile(r"\b(you|your)\b", re.I)),
    ("negation", re.compile(r"\b(not|no|never|cannot|can't|won't|don't)\b", re.I)),
)
_WORD = re.compile(r"\w+")
SCALAR_NAMES: tuple[str, ...] = (
    "lexical",
    "dense",
    "dense_dialogue",
    "continuity",
    "has_dialogue",
    "evidence_score",
    "lexical_gap",
    "dense_gap",
    "dialogue_gap",
    "score_gap",
    "score_rank",
    "dense_rank",
    "passage_rank",
    "place_in_passage",
    "first_in_passage",
    "log_words",
    "ends_colon",
    "ends_question",
    "no_end_punctuation",
    "has_heading_line",
    "capital_share",
    "repeats_previous",
    "question_log_words",
    *(f"asks_{name}" for name, _ in _ASKS),
    *(f"holds_{name}" for name, _ in _HOLDS),
)


def _flags(patterns: Sequence[tuple[str, re.Pattern[str]]], text: str) -> list[float]:
    return [1.0 if pattern.search(text) else 0.0 for _, pattern in patterns]


def _ranks(values: Sequence[float]) -> list[float]:
    """Each value's rank among them, 0 for the best, scaled to [0, 1]."""
    n = len(values)
    order = sorted(range(n), key=lambda i: -values[i])
    out = [0.0] * n
    for rank, i in enumerate(order):
        out[i] = rank / max(n - 1, 1)
    return out


def scalar_features(
    question: str, sentences: Sequence[Evidence], *, has_dialogue: bool, previous_reply: str = ""
) -> np.ndarray:
    """One row of SCALAR_NAMES per sentence: the evidence's measured parts, their gaps to the turn's best, and the
    sentence's form and content against what the question asks for."""
    if not sentences:
        return np.zeros((0, len(SCALAR_NAMES)), dtype=np.float32)
    best_lexical = max(s.lexical for s in sentences)
    best_dense = max(s.dense for s in sentences)
    best_dialogue = max(s.dense_dialogue for s in sentences)
    best_score = max(s.score for s in sentences)
    score_rank = _ranks([s.score for s in sentences])
    dense_rank = _ranks([s.dense for s in sentences])
    passages = max(s.passage for s in sentences)
    per_passage: dict[int, list[int]] = {}
    for s in sentences:
        per_passage.setdefault(s.passage, []).append(s.order)
    asks = _flags(_ASKS, question)
    question_words = math.log1p(len(_WORD.findall(question)))
    rows = []
    for i, s in enumerate(sentences):
        words = _WORD.findall(s.text)
        orders = sorted(per_passage[s.passage])
        place = orders.index(s.order) / max(len(orders) - 1, 1)
        stripped = s.text.rstrip()
        capitals = sum(1 for w in words if w[:1].isupper()) / max(len(words), 1)
        rows.append(
            [
                s.lexical,
                s.dense,
                s.dense_dialogue if has_dialogue else s.dense,
                s.continuity,
                1.0 if has_dialogue else 0.0,
                s.score,
                s.lexical - best_lexical,
                s.dense - best_dense,
                (s.dense_dialogue - best_dialogue) if has_dialogue else (s.dense - best_dense),
                s.score - best_score,
                score_rank[i],
                dense_rank[i],
                (s.passage - 1) / max(passages - 1, 1),
                place,
                1.0 if orders[0] == s.order else 0.0,
                math.log1p(len(words)),
                1.0 if stripped.endswith(":") else 0.0,
                1.0 if stripped.endswith("?") else 0.0,
                0.0 if re.search(r"[.!?:;)\]\"']$", stripped) else 1.0,
                1.0 if "\n" in s.text else 0.0,
                capitals,
                token_f1(s.text, previous_reply) if previous_reply else 0.0,
                question_words,
                *asks,
                *_flags(_HOLDS, s.text),
            ]
        )
    return np.asarray(rows, dtype=np.float32)


def judge_inputs(
    question: str,
    sentences: Sequence[Evidence],
    *,
    sentence_vectors: np.ndarray,
    question_vector: np.ndarray,
    previous_reply: str = "",
    has_dialogue: bool = False,
) -> np.ndarray:
    """The judge's input rows: the scalar features, then question ⊙ sentence (which MiniLM dimensions agree).
    `sentence_vectors` has one unit row per sentence, in order. (The dialogue reading's products were tried too:
    they fit the training dialogues and lost on the validation ones, evals/train/judge.py.)"""
    scalars = scalar_features(question, sentences, has_dialogue=has_dialogue, previous_reply=previous_reply)
    rows = np.asarray(sentence_vectors, dtype=np.float32)
    q = np.asarray(question_vector, dtype=np.float32)
    return np.concatenate([scalars, rows * q], axis=1).astype(np.float32)


# --- the model ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeModel:
    """A trained judge: standardisation, a hidden ReLU layer, one logit; and the answerability head's weights."""

    mean: np.ndarray
    scale: np.ndarray
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: float
    head_w: np.ndarray
    head_b: float
    head_mean: np.ndarray
    head_scale: np.ndarray

    def sentence_logits(self, inputs: np.ndarray) -> np.ndarray:
        if len(inputs) == 0:
            return np.zeros(0, dtype=np.float32)
        x = (inputs - self.mean) / self.scale
        hidden = np.maximum(x @ self.w1 + self.b1, 0.0)
        return (hidden @ self.w2 + self.b2).astype(np.float32)

    def answerability(self, scalars: np.ndarray, coverage: float) -> float:
        """The probability that the passages answer the question, from the turn's sentence features and the share
        of the question's content words the passages hold."""
        head = (self.head_w, self.head_b, self.head_mean, self.head_scale)
        return float(logistic(head, turn_features(scalars, coverage)))

    def save(self, path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {name: np.asarray(getattr(self, name), dtype=np.float32) for name in self.__dataclass_fields__}
        with path.open("wb") as handle:
            np.savez(handle, **arrays)  # type: ignore[arg-type]
        return hashlib.sha256(path.read_bytes()).hexdigest()

    @classmethod
    def load(cls, path: Path, *, sha256: str | None = None) -> JudgeModel:
        data = path.read_bytes()
        if sha256 and hashlib.sha256(data).hexdigest() != sha256:
            raise ValueError(f"the judge weights at {path.name} do not match their pinned sha256")
        with np.load(path) as arrays:
            values: dict[str, Any] = {name: arrays[name] for name in cls.__dataclass_fields__}
        values["b2"] = float(values["b2"])
        values["head_b"] = float(values["head_b"])
        return cls(**values)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(x, -30, 30))))  # fact: exp overflows float32 past about 88


Head = tuple[np.ndarray, float, np.ndarray, np.ndarray]  # a logistic model: weights, bias, input mean, input scale


def logistic(head: Head, rows: np.ndarray) -> np.ndarray:
    """A standardising logistic model's probabilities for `rows` (one row, or a matrix of them)."""
    weights, bias, mean, scale = head
    return sigmoid((rows - mean) / scale @ weights + bias)


# What the answerability head reads of a turn. The sentence judge's own logits were tried as inputs too and did not
# help on MTRAG-UN dev (out of fold, evals/results/judge/summary.json): trained on doc2dial's government pages, they
# do not carry over to Wikipedia, finance and cloud documentation; these do.
TURN_FEATURE_NAMES = ("best_lexical", "best_dense", "best_dialogue", "support", "coverage")


def turn_features(scalars: np.ndarray, coverage: float) -> np.ndarray:
    """The answerability head's inputs: the turn's best word overlap and cosines (with the question, and with the
    question read in its dialogue), the support signal (tools/signals/answerability.py) and the share of the question's
    content words the passages hold."""
    if len(scalars) == 0:
        return np.asarray([0.0, 0.0, 0.0, 0.0, coverage], dtype=np.float32)
    lexical = scalars[:, SCALAR_NAMES.index("lexical")]
    dense = scalars[:, SCALAR_NAMES.index("dense")]
    dialogue = scalars[:, SCALAR_NAMES.index("dense_dialogue")]
    support = lexical + np.maximum(dense, dialogue)
    return np.asarray(
        [float(lexical.max()), float(dense.max()), float(dialogue.max()), float(support.max()), coverage],
        dtype=np.float32,
    )


@lru_cache(maxsize=1)
def shipped_judge() -> JudgeModel:
    """The judge trained here and installed with the package (cached: loaded once per process)."""
    path = Path(str(resources.files("reground") / "data" / "judge" / JUDGE_FILE))
    if not path.exists():
        raise FileNotFoundError(f"the judge's weights are missing ({path.name}): reinstall reground")
    return JudgeModel.load(path, sha256=JUDGE_SHA256)


def sentence_probabilities(
    model: JudgeModel, inputs: np.ndarray, coverage: float, read: np.ndarray | None = None
) -> tuple[list[float], float]:
    """Per input row, the probability that its sentence answers the question; and the probability that the turn's
    sentences answer it at all (0 for a turn with none). `coverage`: the share of the question's content words the
    passages hold (tools/answerability.coverage). `read`: the reader's logits for the same sentences
    (adapters/cross_encoder.py), added to the judge's: the sum ranks answer sentences better than either
    (answer-sentence MRR on doc2dial's held-out dialogues, evals/results/judge/summary.json)."""
    logits = model.sentence_logits(inputs)
    if read is not None and len(read) == len(logits):
        logits = logits + read
    if len(logits) == 0:
        return [], 0.0
    answerable = model.answerability(inputs[:, : len(SCALAR_NAMES)], coverage)
    return [float(p) for p in sigmoid(logits)], answerable
