"""ROUGE-1, ROUGE-2 and ROUGE-L F-measure (mean over examples), equal to rouge-score's RougeScorer
without stemming; computed by `reground.tools.signals.scoring` (the same code as the graph's proxies)."""

from __future__ import annotations

import datasets
import evaluate
from reground.tools.signals.scoring import rouge_l, rouge_n


class Rouge(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Mean ROUGE-1/2/L precision, recall and F-measure (0-1) over examples.",
            citation="Lin 2004, ROUGE",
            inputs_description="predictions: list of str; references: list of str. Keys rouge1, "
            "rouge2, rougeL are F-measures; *_precision / *_recall also returned.",
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions: list[str], references: list[str]) -> dict[str, float]:
        scorers = {
            "rouge1": lambda p, r: rouge_n(p, r, 1),
            "rouge2": lambda p, r: rouge_n(p, r, 2),
            "rougeL": rouge_l,
        }
        out: dict[str, float] = {}
        n = len(predictions) or 1
        for name, scorer in scorers.items():
            prfs = [scorer(p, r) for p, r in zip(predictions, references, strict=True)]
            out[name] = sum(x.fmeasure for x in prfs) / n
            out[f"{name}_precision"] = sum(x.precision for x in prfs) / n
            out[f"{name}_recall"] = sum(x.recall for x in prfs) / n
        return out
