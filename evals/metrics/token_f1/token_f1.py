"""Token F1 (SQuAD normalisation): mean over examples of the bag-of-tokens F1 with the reference.

A thin `evaluate` wrapper around `reground.tools.signals.scoring.token_f1`, the function the graph uses.
"""

from __future__ import annotations

import datasets
import evaluate
from reground.tools.signals.scoring import token_f1

_DESCRIPTION = "Mean SQuAD-style token F1 between each prediction and its reference (0-1)."
_KWARGS = "predictions, references: lists of str. Returns {'token_f1': float, 'scores': list}."


class TokenF1(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="Rajpurkar et al. 2016, SQuAD",
            inputs_description=_KWARGS,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions: list[str], references: list[str]) -> dict[str, object]:
        scores = [token_f1(p, r) for p, r in zip(predictions, references, strict=True)]
        return {"token_f1": sum(scores) / len(scores) if scores else 0.0, "scores": scores}
