"""Retrieval accuracy tolerant to near-duplicate documents (the HR chatbot paper): a retrieved
article counts as correct when its text is within Levenshtein distance `max_distance` (default
100) of the gold article's text. Uses rapidfuzz (exact edit distance, with an early cut-off)."""

from __future__ import annotations

import datasets
import evaluate
from rapidfuzz.distance import Levenshtein


class LevenshteinAccuracy(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Share of retrieved texts within Levenshtein distance d of the gold text.",
            citation="Afzal et al. 2024, HR support chatbot",
            inputs_description="predictions: list of str (retrieved article text); references: "
            "list of str (gold article text); max_distance: int (default 100).",
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions: list[str], references: list[str], max_distance: int = 100) -> dict[str, object]:
        hits = [
            Levenshtein.distance(p, r, score_cutoff=max_distance) <= max_distance
            for p, r in zip(predictions, references, strict=True)
        ]
        return {"accuracy": sum(hits) / len(hits) if hits else 0.0, "hits": hits}
