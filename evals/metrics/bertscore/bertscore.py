"""BERTScore recall (vs the reference) and K-Precision (BERTScore precision vs the knowledge),
as ProMiSe reported them. Optional: needs `bert-score` (and torch); the model is a local path
(e.g. the packaged all-MiniLM-L6-v2 for sentence-transformers, num_layers=6), never a hub name.
Slow on CPU (~45 s per 1,000 pairs); not comparable to published BERTScore numbers.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import datasets
import evaluate
from reground.evals.metrics import MetricUnavailableError


def available() -> bool:
    return importlib.util.find_spec("bert_score") is not None


class BertScore(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Mean BERTScore recall vs references and precision vs knowledge (0-1).",
            citation="Zhang et al. 2020, BERTScore",
            inputs_description="predictions, references: list of str; knowledge: list of str "
            "(joined passages); model_type: a local model directory; num_layers: int.",
            features=datasets.Features(
                {
                    "predictions": datasets.Value("string"),
                    "references": datasets.Value("string"),
                    "knowledge": datasets.Value("string"),
                }
            ),
        )

    def _compute(
        self,
        predictions: list[str],
        references: list[str],
        knowledge: list[str],
        model_type: str = "",
        num_layers: int = 6,
        batch_size: int = 32,
    ) -> dict[str, float]:
        if not available():
            raise MetricUnavailableError(
                "BERTScore needs the optional `bert-score` package (it pulls torch): "
                "`pip install bert-score`; reground's reports skip it otherwise."
            )
        if not model_type or not Path(model_type).is_dir():
            raise MetricUnavailableError(
                f"BERTScore needs model_type= a local model directory (got {model_type!r}); "
                "nothing is downloaded at run time."
            )
        from bert_score import score

        _, recall, _ = score(
            predictions,
            references,
            model_type=model_type,
            num_layers=num_layers,
            batch_size=batch_size,
        )
        k_precision, _, _ = score(
            predictions,
            knowledge,
            model_type=model_type,
            num_layers=num_layers,
            batch_size=batch_size,
        )
        return {"bert_recall": float(recall.mean()), "bert_k_precision": float(k_precision.mean())}
