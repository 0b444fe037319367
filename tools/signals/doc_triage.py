"""Ask, abstain or answer on documentation with code: two logistic heads trained on developer docs.

The judge's answerability head and the ask-back model were trained and calibrated on doc2dial and MTRAG-UN; on a
framework's documentation every question finds pages that share its words ("can the validation error messages be
in German?" finds the validation page), so they read almost everything as answered on techdocs dev. When
the unit ranker ranks a turn (the candidates hold code or a table, signals/units.py), triage decides with these heads
instead, over what the turn measured: the best unit's score and its lead over the best unit of any other page, the
best cosine and word overlap, the share of the question's words the passages hold, how many pages fit about as well
as the best, how many content words the question has, whether it leans on a pronoun, whether it opens the
conversation, and how much of it the passages' headings hold. `answerable`: ANSWERABLE and PARTIAL against
UNANSWERABLE; `underspecified`: UNDERSPECIFIED against the rest. Thresholds are calibrated leave-one-corpus-out
(evals/train/doc_triage.py).

Weights ship with the package (reground/data/units/doc_triage.json, sha256-pinned), trained by
`python -m reground.evals.train.doc_triage train`, never at run time.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from reground.tools.signals.evidence import Evidence, word_overlap
from reground.tools.signals.judge import Head, logistic
from reground.tools.signals.units import documentation_model
from reground.tools.text.lexical import lexical_tokens
from reground.tools.tuning.turn import TRIAGE

DOC_TRIAGE_FILE = "doc_triage.json"
DOC_TRIAGE_SHA256 = "cbf3f39ecde096fb58c55237369c2ab9d9e7b1ece5faacebf9fa34cb3bcc7a6c"

FEATURE_NAMES = (
    "best_unit",
    "unit_lead",
    "best_dense",
    "best_lexical",
    "coverage",
    "readings",
    "log_content_words",
    "has_pronoun",
    "opening",
    "heading",
)
_PRONOUN = re.compile(r"\b(it|its|them|they|that|this|those|these|there|one)\b", re.I)
BEST_LEXICAL = FEATURE_NAMES.index("best_lexical")
READING_MARGIN = TRIAGE.doc_reading_margin  # a page fits "about as well" when its best unit is this close (logit)
VAGUE_CONTENT_WORDS = TRIAGE.doc_vague_content_words


def pages_answer_differently(row: np.ndarray) -> bool:
    """Whether a question the underspecified head would ask back about is worth asking (a row of FEATURE_NAMES): at
    least two pages answer it about as well as each other (their best units within READING_MARGIN), or it opens the
    conversation with at most VAGUE_CONTENT_WORDS content words ("how do I configure it?"). One page fitting best a
    follow-up ("can it read them from a .env file?") or a specific opening ("generate a typescript client from my
    fastapi api") answers; asking back there was most of the answerable turns asked back (fastapi: 10 of 12)."""
    features = dict(zip(FEATURE_NAMES, row.tolist(), strict=True))
    vague = features["opening"] > 0 and features["log_content_words"] <= math.log1p(VAGUE_CONTENT_WORDS) + 1e-7
    return features["readings"] >= 2 or vague


def page_scores(units: Sequence[Evidence], doc_ids: Sequence[str]) -> dict[str, float]:
    """Each page's best unit score (`doc_ids`: the page of each unit's passage number, 1-based)."""
    best: dict[str, float] = {}
    for unit in units:
        doc = doc_ids[unit.passage - 1]
        best[doc] = max(best.get(doc, -math.inf), float(unit.unit_score or 0.0))
    return best


def doc_triage_features(
    question: str,
    history: Sequence[Mapping[str, Any]],
    passage_units: Sequence[Evidence],
    candidate_pages: Mapping[str, float],
    coverage: float,
    heading: float,
) -> np.ndarray:
    """One row of FEATURE_NAMES: `passage_units`, the passages' units as the unit ranker scored them;
    `candidate_pages`, every candidate page's best unit score (`page_scores`); `heading`, how much of the question
    the passages' heading paths hold (`heading_match`)."""
    ranked = sorted(candidate_pages.values(), reverse=True)
    best = ranked[0] if ranked else 0.0
    lead = best - ranked[1] if len(ranked) > 1 else 0.0
    readings = sum(1 for score in ranked if score >= best - READING_MARGIN)
    return np.asarray(
        [
            best,
            lead,
            max((u.dense for u in passage_units), default=0.0),
            max((u.lexical for u in passage_units), default=0.0),
            coverage,
            float(readings),
            math.log1p(len(set(lexical_tokens(question)))),
            1.0 if _PRONOUN.search(question) else 0.0,
            0.0 if history else 1.0,
            heading,
        ],
        dtype=np.float32,
    )


def heading_match(question: str, candidates: Sequence[Mapping[str, Any]], kept: Sequence[str]) -> float:
    """The best share of the question's words (IDF over the candidates) that a kept passage's title and heading path
    hold: "set up uv in github actions" is the heading of a page, "how do I set the version?" of none. The unit
    ranker's `section_lexical`, per passage."""
    if not candidates:
        return 0.0
    shares = word_overlap(question, [f"{c.get('title', '')} {c.get('section', '')}" for c in candidates])
    wanted = set(kept)
    held = [share for c, share in zip(candidates, shares, strict=True) if c.get("chunk_id") in wanted]
    return max(held, default=0.0)


@dataclass(frozen=True)
class DocTriage:
    """The two heads and their thresholds."""

    answerable: Head
    underspecified: Head
    hedge_threshold: float  # answerable below it: abstain
    answer_threshold: float  # answerable from it: answer (between: hedge)
    ask_back_threshold: float  # underspecified from it: ask back
    # The best unit holding this IDF-weighted share of the question's words answers, whatever the answerable head
    # says (None: no such rule, as in weights trained before it).
    held_words_threshold: float | None = None

    def decide(self, row: np.ndarray, *, may_ask_back: bool = True) -> tuple[str, float, float]:
        """(decision, answerable probability, underspecified probability)."""
        answerable = float(logistic(self.answerable, row))
        underspecified = float(logistic(self.underspecified, row))
        if may_ask_back and underspecified >= self.ask_back_threshold:
            return "clarify", answerable, underspecified
        held = self.held_words_threshold is not None and float(row[BEST_LEXICAL]) >= self.held_words_threshold
        if answerable < self.hedge_threshold and not held:
            return "abstain", answerable, underspecified
        if answerable < self.answer_threshold and not held:
            return "hedge", answerable, underspecified
        return "answer", answerable, underspecified

    def to_json(self) -> dict[str, Any]:
        def head(h: Head) -> dict[str, Any]:
            weights, bias, mean, scale = h
            return {
                "weights": [round(float(w), 6) for w in weights],
                "bias": round(float(bias), 6),
                "mean": [round(float(m), 6) for m in mean],
                "scale": [round(float(s), 6) for s in scale],
            }

        return {
            "features": list(FEATURE_NAMES),
            "answerable": head(self.answerable),
            "underspecified": head(self.underspecified),
            "thresholds": {
                "hedge": round(self.hedge_threshold, 4),
                "answer": round(self.answer_threshold, 4),
                "ask_back": round(self.ask_back_threshold, 4),
                **({} if self.held_words_threshold is None else {"held_words": round(self.held_words_threshold, 4)}),
            },
        }

    def save(self, path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        return hashlib.sha256(path.read_bytes()).hexdigest()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DocTriage:
        if tuple(data.get("features", ())) != FEATURE_NAMES:
            raise ValueError(f"the documentation triage's features {data.get('features')} are not {FEATURE_NAMES}")

        def head(h: Mapping[str, Any]) -> Head:
            return (
                np.asarray(h["weights"], dtype=np.float32),
                float(h["bias"]),
                np.asarray(h["mean"], dtype=np.float32),
                np.asarray(h["scale"], dtype=np.float32),
            )

        thresholds = data["thresholds"]
        return cls(
            head(data["answerable"]),
            head(data["underspecified"]),
            float(thresholds["hedge"]),
            float(thresholds["answer"]),
            float(thresholds["ask_back"]),
            float(thresholds["held_words"]) if "held_words" in thresholds else None,
        )


@lru_cache(maxsize=1)
def shipped_doc_triage() -> DocTriage:
    """The documentation triage trained here and installed with the package (loaded once per process)."""
    return DocTriage.from_json(documentation_model(DOC_TRIAGE_FILE, DOC_TRIAGE_SHA256, "documentation triage"))
