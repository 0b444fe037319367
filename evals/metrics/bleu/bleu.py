"""BLEU-1..4 (corpus level, 0-1) as ConvRAG reported them: NLTK corpus_bleu, cumulative weights.

Tokenised like rouge-score (lowercase, alphanumeric tokens) so the four numbers are comparable to
ROUGE; smoothing method 1 keeps short corpora from scoring exactly zero.
"""

from __future__ import annotations

import datasets
import evaluate
from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu
from reground.tools.signals.scoring import rouge_tokens

WEIGHTS = {
    "bleu1": (1.0, 0.0, 0.0, 0.0),
    "bleu2": (0.5, 0.5, 0.0, 0.0),
    "bleu3": (1 / 3, 1 / 3, 1 / 3, 0.0),
    "bleu4": (0.25, 0.25, 0.25, 0.25),
}


class Bleu(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Cumulative corpus BLEU-1, -2, -3 and -4 (0-1), NLTK implementation.",
            citation="Papineni et al. 2002; Bird et al., NLTK",
            inputs_description="predictions: list of str; references: list of (list of) str.",
            features=[
                datasets.Features(
                    {
                        "predictions": datasets.Value("string"),
                        "references": datasets.Sequence(datasets.Value("string")),
                    }
                ),
                datasets.Features(
                    {
                        "predictions": datasets.Value("string"),
                        "references": datasets.Value("string"),
                    }
                ),
            ],
        )

    def _compute(
        self, predictions: list[str], references: list[str] | list[list[str]], smooth: bool = True
    ) -> dict[str, float]:
        refs = [[rouge_tokens(r)] if isinstance(r, str) else [rouge_tokens(x) for x in r] for r in references]
        hyps = [rouge_tokens(p) for p in predictions]
        smoothing = SmoothingFunction().method1 if smooth else None
        return {
            name: float(corpus_bleu(refs, hyps, weights=weights, smoothing_function=smoothing))
            for name, weights in WEIGHTS.items()
        }
