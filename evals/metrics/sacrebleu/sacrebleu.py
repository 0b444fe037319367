"""SacreBLEU (corpus BLEU, 0-100), sacrebleu's default 13a tokenisation; one or more references."""

from __future__ import annotations

import datasets
import evaluate
import sacrebleu as scb


class SacreBleu(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Corpus-level SacreBLEU (0-100), as sacrebleu.corpus_bleu computes it.",
            citation="Post 2018, A Call for Clarity in Reporting BLEU Scores",
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
        self, predictions: list[str], references: list[str] | list[list[str]], tokenize: str = "13a"
    ) -> dict[str, object]:
        refs = [[r] if isinstance(r, str) else list(r) for r in references]
        n_refs = max((len(r) for r in refs), default=0)
        if any(len(r) != n_refs for r in refs):
            raise ValueError("sacrebleu needs the same number of references for every prediction")
        streams = [[r[i] for r in refs] for i in range(n_refs)]
        result = scb.corpus_bleu(predictions, streams, tokenize=tokenize)
        return {
            "score": result.score,
            "precisions": list(result.precisions),
            "bp": result.bp,
            "sys_len": result.sys_len,
            "ref_len": result.ref_len,
        }
