"""METEOR (mean over examples, 0-1) with NLTK's implementation and WordNet synonyms.

WordNet comes from Debian's packages (see `reground.evals.data.setup_wordnet`); without it `compute`
raises a clear error and callers skip METEOR. Tokenised with `word_tokenize(preserve_line=True)`,
which needs no punkt model.
"""

from __future__ import annotations

import datasets
import evaluate
from nltk.tokenize import word_tokenize
from nltk.translate.meteor_score import meteor_score
from reground.evals.data.setup_wordnet import ensure_wordnet
from reground.evals.metrics import MetricUnavailableError


def _tokens(text: str) -> list[str]:
    return word_tokenize(text.lower(), preserve_line=True)


class Meteor(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Mean sentence METEOR (0-1), NLTK implementation with WordNet synonyms.",
            citation="Banerjee & Lavie 2005, METEOR",
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
        self,
        predictions: list[str],
        references: list[str] | list[list[str]],
        alpha: float = 0.9,
        beta: float = 3.0,
        gamma: float = 0.5,
    ) -> dict[str, object]:
        if ensure_wordnet() is None:
            raise MetricUnavailableError(
                "METEOR needs WordNet: `apt-get install -y wordnet-base wordnet-sense-index`, then "
                "`python -m reground.evals.data.setup_wordnet`, or leave METEOR out."
            )
        scores = []
        for pred, ref in zip(predictions, references, strict=True):
            refs = [ref] if isinstance(ref, str) else list(ref)
            scores.append(
                float(
                    meteor_score(
                        [_tokens(r) for r in refs],
                        _tokens(pred),
                        alpha=alpha,
                        beta=beta,
                        gamma=gamma,
                    )
                )
            )
        return {"meteor": sum(scores) / len(scores) if scores else 0.0, "scores": scores}
