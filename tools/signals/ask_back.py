"""Whether to ask the user what they mean: a logistic model over what triage already measured, trained here on
MTRAG-UN dev's underspecified tasks (evals/train/ask_back.py) instead of another rule.

The rules of triage ask back when a reference the dialogue never introduced fits several documents about equally,
and the judge finds each one answers. On MTRAG-UN dev they asked back on 5 of 27 underspecified tasks: most such
questions ("What awards has the actor received?", "How wealthy is this county?") find documents that fit, so the
judge reads them as close, and the readings rule needs four of them. The model weighs the same signals together:
the unresolved references, how many documents fit as well as the best, how well the passages answer, the question's
length and the dialogue's.

Weights ship with the package (reground/data/judge/ask_back.json, sha256-pinned) and are trained by
`python -m reground.evals.train.ask_back`, never at run time.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from reground.tools.signals.judge import logistic
from reground.tools.tuning.turn import TRIAGE

ASK_BACK_FILE = "ask_back.json"
ASK_BACK_SHA256 = "8ce4b922dc2c1e026b924c8c583ef089a541668f269818ac2aa37547af50b0df"

# A word that points at something: a determiner or a pronoun (a feature of a learned model, not a decision).
_POINTER = re.compile(r"\b(this|that|these|those|the|it|its|they|them|their|he|she|him|her|his)\b", re.I)
MAX_REFERENCES = TRIAGE.ask_back_max_references

FEATURE_NAMES = (
    "unresolved_references",
    "readings",
    "answerable",
    "support",
    "coverage",
    "log_history_messages",
    "has_pointer",
    "log_question_words",
)


def ask_back_features(
    question: str,
    history: Sequence[Mapping[str, Any]],
    *,
    references: int,
    readings: int,
    answerable: float,
    support: float,
    coverage: float,
) -> np.ndarray:
    """One row of FEATURE_NAMES: `references`, the question's unresolved references; `readings`, the documents whose
    score is near the best one's (tools/signals/answerability.readings); the rest as triage measured them."""
    return np.asarray(
        [
            float(min(references, MAX_REFERENCES)),
            float(readings),
            answerable,
            support,
            coverage,
            math.log1p(len(history)),
            1.0 if _POINTER.search(question) else 0.0,
            math.log1p(len(question.split())),
        ],
        dtype=np.float32,
    )


@dataclass(frozen=True)
class AskBackModel:
    """A standardising logistic model and the probability from which it asks back (calibrated out of fold)."""

    weights: np.ndarray
    bias: float
    mean: np.ndarray
    scale: np.ndarray
    threshold: float

    def probability(self, row: np.ndarray) -> float:
        return float(logistic((self.weights, self.bias, self.mean, self.scale), row))

    def to_json(self) -> str:
        return json.dumps(
            {
                "features": list(FEATURE_NAMES),
                "weights": [round(float(w), 6) for w in self.weights],
                "bias": round(self.bias, 6),
                "mean": [round(float(m), 6) for m in self.mean],
                "scale": [round(float(s), 6) for s in self.scale],
                "threshold": round(self.threshold, 4),
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> AskBackModel:
        data = json.loads(text)
        if list(data.get("features", [])) != list(FEATURE_NAMES):
            raise ValueError(f"the ask-back weights read {data.get('features')}, this code reads {FEATURE_NAMES}")
        return cls(
            weights=np.asarray(data["weights"], dtype=np.float32),
            bias=float(data["bias"]),
            mean=np.asarray(data["mean"], dtype=np.float32),
            scale=np.asarray(data["scale"], dtype=np.float32),
            threshold=float(data["threshold"]),
        )


def ask_back_path() -> Path:
    return Path(str(resources.files("reground") / "data" / "judge" / ASK_BACK_FILE))


@lru_cache(maxsize=1)
def shipped_ask_back() -> AskBackModel:
    """The model trained here and installed with the package (cached: read once per process)."""
    path = ask_back_path()
    if not path.exists():
        raise FileNotFoundError(f"the ask-back weights are missing ({path.name}): reinstall reground")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != ASK_BACK_SHA256:
        raise ValueError(f"the ask-back weights at {path.name} do not match their pinned sha256")
    return AskBackModel.from_json(data.decode())
