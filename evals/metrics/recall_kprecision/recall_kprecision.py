"""Recall (reference tokens found in the answer) and K-Precision (answer tokens found in the
grounding knowledge), as ProMiSe and ReGround reported them; wraps `reground.tools.signals.scoring`."""

from __future__ import annotations

import datasets
import evaluate
from reground.tools.signals.scoring import k_precision, token_recall


class RecallKPrecision(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Mean Recall vs the reference and mean K-Precision vs the knowledge (0-1).",
            citation="Adlakha et al. 2023; Ramji et al. 2024 (ProMiSe)",
            inputs_description="predictions: list of str; references: list of str; knowledge: "
            "list of str or list of list of str (the grounding passages of each example).",
            features=[
                datasets.Features(
                    {
                        "predictions": datasets.Value("string"),
                        "references": datasets.Value("string"),
                        "knowledge": datasets.Sequence(datasets.Value("string")),
                    }
                ),
                datasets.Features(
                    {
                        "predictions": datasets.Value("string"),
                        "references": datasets.Value("string"),
                        "knowledge": datasets.Value("string"),
                    }
                ),
            ],
        )

    def _compute(
        self, predictions: list[str], references: list[str], knowledge: list[str] | list[list[str]]
    ) -> dict[str, object]:
        recalls = [token_recall(p, r) for p, r in zip(predictions, references, strict=True)]
        kps = [k_precision(p, k) for p, k in zip(predictions, knowledge, strict=True)]
        n = len(predictions) or 1
        return {
            "recall": sum(recalls) / n,
            "k_precision": sum(kps) / n,
            "recall_scores": recalls,
            "k_precision_scores": kps,
        }
