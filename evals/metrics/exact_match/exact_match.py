"""Exact match after SQuAD normalisation; wraps `reground.tools.signals.scoring.exact_match`."""

from __future__ import annotations

import datasets
import evaluate
from reground.tools.signals.scoring import exact_match


class ExactMatch(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Share of predictions equal to their reference, SQuAD-normalised (0-1).",
            citation="Rajpurkar et al. 2016, SQuAD",
            inputs_description="predictions: list of str; references: list of str.",
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions: list[str], references: list[str]) -> dict[str, float]:
        scores = [exact_match(p, r) for p, r in zip(predictions, references, strict=True)]
        return {"exact_match": sum(scores) / len(scores) if scores else 0.0}
