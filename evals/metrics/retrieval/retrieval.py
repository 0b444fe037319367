"""Retrieval recall@k and MRR, at document level (ranked doc ids vs the gold doc id) or passage
level (ranked chunk ids vs the gold chunk ids): a thin wrapper of `reground.evals.ranking`."""

from __future__ import annotations

import datasets
import evaluate
from reground.evals.ranking import DEFAULT_KS, ranking_metrics


class Retrieval(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Recall@k (first relevant item within the top k) and MRR over queries.",
            citation="Manning et al., Introduction to Information Retrieval",
            inputs_description="predictions: list of ranked id lists; references: list of gold id "
            "lists (any of them counts); ks: list of int (default 1, 3, 5, 10).",
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("string")),
                    "references": datasets.Sequence(datasets.Value("string")),
                }
            ),
        )

    def _compute(
        self,
        predictions: list[list[str]],
        references: list[list[str]],
        ks: tuple[int, ...] | list[int] = DEFAULT_KS,
    ) -> dict[str, float]:
        return ranking_metrics(predictions, [set(r) for r in references], ks=tuple(ks))
