"""Rank correlation of a metric with another (proxy vs final metric, metric vs human ratings):
Spearman's rho and Kendall's tau (tau-b) with p-values, and Pearson's r, from scipy."""

from __future__ import annotations

import math

import datasets
import evaluate
from scipy import stats


def _clean(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


class Correlation(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Spearman, Kendall and Pearson correlation between two lists of numbers.",
            citation="scipy.stats",
            inputs_description="predictions: list of float (e.g. a proxy metric); references: "
            "list of float (e.g. the final metric or human ratings). Constant inputs give None.",
            features=datasets.Features(
                {"predictions": datasets.Value("float64"), "references": datasets.Value("float64")}
            ),
        )

    def _compute(self, predictions: list[float], references: list[float]) -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {"n": len(predictions)}
        if len(predictions) < 3 or len(set(predictions)) < 2 or len(set(references)) < 2:
            out.update(
                spearman=None,
                spearman_p=None,
                kendall=None,
                kendall_p=None,
                pearson=None,
                pearson_p=None,
            )
            return out
        rho, rho_p = stats.spearmanr(predictions, references)
        tau, tau_p = stats.kendalltau(predictions, references)
        r, r_p = stats.pearsonr(predictions, references)
        out.update(
            spearman=_clean(rho),
            spearman_p=_clean(rho_p),
            kendall=_clean(tau),
            kendall_p=_clean(tau_p),
            pearson=_clean(r),
            pearson_p=_clean(r_p),
        )
        return out
