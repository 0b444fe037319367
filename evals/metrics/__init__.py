"""Metric modules for `evaluate.load(path)`: one folder per metric, `<name>/<name>.py`.

They are loaded only by path (the hub's metric scripts cannot be downloaded here, and should not be
at run time anywhere), with `HF_EVALUATE_OFFLINE=1` set before `evaluate` is first imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

METRICS_DIR = Path(__file__).resolve().parent

METRIC_NAMES: tuple[str, ...] = (
    "token_f1",
    "exact_match",
    "sacrebleu",
    "bleu",
    "meteor",
    "rouge",
    "recall_kprecision",
    "bertscore",
    "retrieval",
    "levenshtein_accuracy",
    "correlation",
)


class MetricUnavailableError(RuntimeError):
    """A metric needs something not installed here (WordNet, bert-score); the message says what."""


def metric_path(name: str) -> Path:
    """The folder of a metric module; a clear error names the known metrics."""
    path = METRICS_DIR / name
    if not (path / f"{name}.py").is_file():
        raise ValueError(f"unknown metric {name!r}: expected {path}/{name}.py; known: {', '.join(METRIC_NAMES)}")
    return path


def load_metric(name: str, **kwargs: Any) -> Any:
    """`evaluate.load` of one of our modules, by path, offline."""
    os.environ["HF_EVALUATE_OFFLINE"] = "1"
    import evaluate

    return evaluate.load(str(metric_path(name)), **kwargs)
