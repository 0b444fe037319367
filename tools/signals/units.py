"""The unit ranker: which answer unit of a documentation page answers a how-to question, learned on developer docs.

On a page with code, the answer to "how do I ..." is a call, a command or a short code block with the sentence that
introduces it (text/sentences.py's answer units). The hand-made evidence score and the judge were fitted on
doc2dial's government pages, where an answer is a sentence; on technical documentation they prefer the page's lead
sentence. This linear model ranks units by what carries over between documentation sets: the unit's cosine and word
overlap with the question, how well its section's heading path matches the question, whether it holds code, whether
the question asks for a procedure and it holds code, and how many of the question's words its code holds.

It ranks a turn's units when the candidates hold a fenced code block (`evidence.unit_ranking="auto"`): it was
trained and measured on documentation with code (evals/train/unit_ranker.py, leave-one-corpus-out), not on prose-only
collections, whose ranking it leaves alone. Weights ship with the package (reground/data/units/unit_ranker.json,
sha256-pinned) and are trained by `python -m reground.evals.train.unit_ranker train`, never at run time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
from reground.tools.signals.evidence import Evidence, word_overlap
from reground.tools.signals.unit_scorer import DOC_MODELS_ENV, SCORER_FEATURE
from reground.tools.text.lexical import lexical_tokens
from reground.tools.text.sentences import has_code_block, split_unit
from reground.tools.types import Passage

UNIT_RANKER_FILE = "unit_ranker.json"
# A folder holding unit_ranker.json and doc_triage.json to use instead of the shipped ones (evals/train/doc_triage.py
# writes one per leave-one-corpus-out fold; `python -m reground.evals.train.doc_triage train` on your own docs too).
UNIT_RANKER_SHA256 = "156f03543331ae511290eb11613205f3b72fe401985195399e8dd1dc1965ff0d"

FEATURE_NAMES = ("dense", "lexical", "section_lexical", "has_code", "procedure_code", "question_in_code")
# A question that asks for a way to do something (a feature of a learned model, not a decision).
PROCEDURE = re.compile(
    r"\bhow\b|\b(do|can|should|could|would|shall) (i|we|you)\b|\b(want|need|have|trying) to\b|\bway to\b", re.I
)


def unit_feature_rows(question: str, evidence: Sequence[Evidence], passages: Sequence[Passage]) -> np.ndarray:
    """One row of FEATURE_NAMES per evidence unit (`passages`: the ones the units' `passage` numbers point at)."""
    if not evidence:
        return np.zeros((0, len(FEATURE_NAMES)), dtype=np.float32)
    sections = word_overlap(question, [f"{p.get('title', '')} {p.get('section', '')}" for p in passages])
    asks_procedure = 1.0 if PROCEDURE.search(question) else 0.0
    words = set(lexical_tokens(question))
    rows = []
    for unit in evidence:
        _, structured = split_unit(unit.text)
        code = 1.0 if has_code_block(structured) else 0.0
        in_code = len(words & set(lexical_tokens(structured))) / max(len(words), 1) if code else 0.0
        rows.append([unit.dense, unit.lexical, sections[unit.passage - 1], code, code * asks_procedure, in_code])
    return np.asarray(rows, dtype=np.float32)


def scorer_reads(rows: np.ndarray) -> np.ndarray:
    """Which units the unit scorer reads: the `READER.scorer_units` with the highest cosine plus word overlap (the
    rows' first two inputs), so a turn's cost does not grow with its units."""
    from reground.tools.tuning.models import READER

    return np.argsort(-(rows[:, 0] + rows[:, 1]), kind="stable")[: READER.scorer_units]


def scorer_column(rows: np.ndarray, read: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """The scorer's input for every unit: its logit for the units it read, the lowest of those for the others (a
    unit it did not read is never raised by it)."""
    column = np.full(len(rows), float(np.min(logits)) if len(logits) else 0.0, dtype=np.float32)
    column[read] = logits
    return column


def with_scorer(rows: np.ndarray, question: str, evidence: Sequence[Evidence]) -> np.ndarray:
    """The rows with the unit scorer's input as a last column (signals/unit_scorer.py)."""
    from reground.tools.signals.unit_scorer import shipped_unit_scorer

    read = scorer_reads(rows)
    logits = shipped_unit_scorer().logits(question, [evidence[i].text for i in read]) if len(read) else np.zeros(0)
    return np.column_stack([rows, scorer_column(rows, read, np.asarray(logits))]).astype(np.float32)


def structured_turn(evidence: Sequence[Evidence]) -> bool:
    """Whether a turn's units come from documentation with code (a fenced block among them)."""
    return any(has_code_block(e.text) for e in evidence)


@dataclass(frozen=True)
class UnitRanker:
    """A standardising linear scorer: one logit per unit; a turn's units rank by it (a subclass names other
    `FEATURES`: retrieval/chunk_ranker.py's paragraphs)."""

    FEATURES: ClassVar[tuple[str, ...]] = FEATURE_NAMES
    WHAT: ClassVar[str] = "unit ranker"

    weights: np.ndarray
    mean: np.ndarray
    scale: np.ndarray

    def scores(self, rows: np.ndarray) -> np.ndarray:
        if len(rows) == 0:
            return np.zeros(0, dtype=np.float32)
        return np.asarray(((rows - self.mean) / self.scale) @ self.weights, dtype=np.float32)

    @property
    def features(self) -> tuple[str, ...]:
        """FEATURES, and the unit scorer's logit last when the weights read it (signals/unit_scorer.py)."""
        return (*self.FEATURES, SCORER_FEATURE) if len(self.weights) == len(self.FEATURES) + 1 else self.FEATURES

    @property
    def reads_scorer(self) -> bool:
        return self.features[-1] == SCORER_FEATURE

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "weights": [round(float(w), 6) for w in self.weights],
            "mean": [round(float(m), 6) for m in self.mean],
            "scale": [round(float(s), 6) for s in self.scale],
        }

    def save(self, path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        return hashlib.sha256(path.read_bytes()).hexdigest()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        if tuple(data.get("features", ())) not in (cls.FEATURES, (*cls.FEATURES, SCORER_FEATURE)):
            raise ValueError(
                f"the {cls.WHAT}'s features {data.get('features')} are not {list(cls.FEATURES)} (with or without "
                f"{SCORER_FEATURE!r} last)"
            )
        return cls(
            weights=np.asarray(data["weights"], dtype=np.float32),
            mean=np.asarray(data["mean"], dtype=np.float32),
            scale=np.asarray(data["scale"], dtype=np.float32),
        )


def documentation_model(file: str, sha256: str, what: str) -> dict[str, Any]:
    """A documentation model's JSON: the shipped file, sha256-checked, or the one in the `REGROUND_DOC_MODELS`
    folder (weights trained on other data: a leave-one-corpus-out fold, or your own docs; not pinned)."""
    override = os.environ.get(DOC_MODELS_ENV)
    path = Path(override) / file if override else Path(str(resources.files("reground") / "data" / "units" / file))
    if not path.exists():
        raise FileNotFoundError(
            f"the {what}'s weights are missing ({path}): reinstall reground or fix {DOC_MODELS_ENV}"
        )
    raw = path.read_bytes()
    if not override and hashlib.sha256(raw).hexdigest() != sha256:
        raise ValueError(f"the {what} at {path.name} does not match its pinned sha256")
    loaded: dict[str, Any] = json.loads(raw)
    return loaded


@lru_cache(maxsize=1)
def shipped_unit_ranker() -> UnitRanker:
    """The unit ranker trained here and installed with the package (loaded once per process)."""
    return UnitRanker.from_json(documentation_model(UNIT_RANKER_FILE, UNIT_RANKER_SHA256, "unit ranker"))


def rank_units(
    ranker: UnitRanker, question: str, evidence: Sequence[Evidence], passages: Sequence[Passage]
) -> list[Evidence]:
    """The units best first by the ranker, each carrying its score (`unit_score`)."""
    from dataclasses import replace

    rows = unit_feature_rows(question, evidence, passages)
    if ranker.reads_scorer:
        rows = with_scorer(rows, question, evidence)
    scores = ranker.scores(rows)
    scored = [replace(e, unit_score=round(float(s), 6)) for e, s in zip(evidence, scores, strict=True)]
    return sorted(scored, key=lambda e: (-(e.unit_score or 0.0), e.order))
