"""Does improving the loop's proxies improve the final metrics? (ProMiSe's question, per case.)

For every system of an answers run, Spearman and Kendall correlation (via the `correlation` metric
module) of each proxy the graph optimises — the three principle scores and the groundedness — with
each final metric: token F1, K-Precision, Recall, ROUGE-L and, when judged, the judge scores.
Writes `RUN/correlation.json`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reground.evals.answers import latest_by_case, read_jsonl
from reground.evals.metrics import load_metric

PROXIES = ("specificity", "faithfulness", "relevance", "groundedness")
FINALS = (
    "token_f1",
    "k_precision",
    "recall",
    "rouge_l",
    "faithful",
    "geval_truthfulness",
    "rubric",
)


def case_values(row: Mapping[str, Any], judge: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The proxy and final values of one finished case (missing ones are left out)."""
    values: dict[str, float] = {}
    for name, value in (row.get("principle_scores") or {}).items():
        if name in PROXIES and value is not None:
            values[name] = float(value)
    if row.get("groundedness") is not None:
        values["groundedness"] = float(row["groundedness"])
    for name in ("token_f1", "k_precision", "recall", "rouge_l"):
        values[name] = float(row["metrics"][name])
    if judge:
        if judge.get("hallucination") is not None:
            values["faithful"] = 0.0 if judge["hallucination"] else 1.0
        truth = (judge.get("geval") or {}).get("truthfulness")
        if truth is not None:
            values["geval_truthfulness"] = float(truth)
        if judge.get("rubric") is not None:
            values["rubric"] = float(judge["rubric"])
    return values


def correlate(points: Sequence[Mapping[str, float]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{proxy: {final: {spearman, kendall, n, ...}}} over the cases that have both values."""
    metric = load_metric("correlation")
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for proxy in PROXIES:
        for final in FINALS:
            pairs = [(p[proxy], p[final]) for p in points if proxy in p and final in p]
            if len(pairs) < 3:
                continue
            xs, ys = zip(*pairs, strict=True)
            result = metric.compute(predictions=list(xs), references=list(ys))
            out.setdefault(proxy, {})[final] = {
                k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.items()
            }
    return out


def run_points(run_dir: Path, system: str) -> list[dict[str, float]]:
    rows = latest_by_case(read_jsonl(run_dir / system / "cases.jsonl"))
    judges = latest_by_case(read_jsonl(run_dir / system / "judges.jsonl"))
    return [case_values(row, judges.get(cid)) for cid, row in rows.items() if not row.get("error")]


def correlation_report(run_dir: str | Path, systems: Sequence[str] | None = None) -> dict[str, Any]:
    """Correlations per system and pooled over all systems; written to RUN/correlation.json."""
    run = Path(run_dir)
    if systems is None:
        systems = sorted(p.parent.name for p in run.glob("*/cases.jsonl"))
    if not systems:
        raise FileNotFoundError(f"no <system>/cases.jsonl under {run}: run `reground eval answers` first")
    per_system = {s: run_points(run, s) for s in systems}
    report = {
        "systems": {s: correlate(points) for s, points in per_system.items()},
        "all": correlate([p for points in per_system.values() for p in points]),
    }
    (run / "correlation.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report
