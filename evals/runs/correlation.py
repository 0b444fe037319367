"""Does improving the loop's proxies improve the final metrics? (ProMiSe's question, per case.)

For every system of an answers run, Spearman and Kendall correlation (via the `correlation` metric
module) of each proxy the graph optimises — the three principle scores and the groundedness — with
each final metric: token F1, K-Precision, Recall, ROUGE-L and, when judged, the judge scores.
Writes `RUN/correlation.json`.

The question for the graph's answer-relevance signal (`result["relevance"]`, 0-1) is narrower:
is it worth a loop? `relevance_report` gives, per system, its Spearman correlation with token F1 and
K-Precision beside the old proxy's (ROUGE-L of the answer vs the question and the last two turns,
computed from each row), and the mean token F1 of the cases under the threshold vs at or above it: a
signal is worth a loop only if answers under its threshold have clearly lower F1. Labelled cases
(MTRAG-UN) count only when answerable (ANSWERABLE / PARTIAL): against a reference refusal or
clarifying question, token F1 says nothing about an answer's relevance.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reground.evals.metrics import load_metric
from reground.evals.records import latest_by_case, read_jsonl

PROXIES = ("specificity", "faithfulness", "relevance", "groundedness", "answer_relevance")
RELEVANCE_FINALS = ("token_f1", "k_precision")
ANSWERED = ("ANSWERABLE", "PARTIAL")
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
    if row.get("relevance") is not None:
        values["answer_relevance"] = float(row["relevance"])
    for name in ("token_f1", "k_precision", "recall", "rouge_l"):
        if row["metrics"].get(name) is not None:  # None: the case has no gold answer
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


def _spearman(pairs: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """{spearman, spearman_p, n} through the correlation module (None when fewer than 3 or constant)."""
    if len(pairs) < 3:
        return {"spearman": None, "spearman_p": None, "n": len(pairs)}
    xs, ys = zip(*pairs, strict=True)
    result = load_metric("correlation").compute(predictions=list(xs), references=list(ys))
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.items()}
    return {"spearman": clean["spearman"], "spearman_p": clean["spearman_p"], "n": len(pairs)}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def old_relevance_proxy(row: Mapping[str, Any]) -> float | None:
    """The relevance proxy the graph used before the signal: ROUGE-L F of the answer against the question and the
    last two turns (ProMiSe's relevance metric), computed from the row so both score the same answers."""
    from reground.tools.signals.scoring import rouge_l

    if not row.get("answer"):
        return None
    recent = " ".join(str(t.get("text", "")) for t in (row.get("history") or [])[-2:])
    return rouge_l(str(row["answer"]), f"{row.get('question', '')} {recent}").fmeasure


def relevance_report(
    rows: Sequence[Mapping[str, Any]], *, threshold: float, threshold_source: str = "default"
) -> dict[str, Any]:
    """The answer-relevance signal vs the old proxy, and F1 under vs over the threshold (see above)."""
    labelled = any(r.get("answerability") for r in rows)
    cases = [
        r
        for r in rows
        if not r.get("error")
        and (r.get("metrics") or {}).get("token_f1") is not None
        and (not labelled or r.get("answerability") in ANSWERED)
    ]
    signals = {
        "relevance": lambda r: r.get("relevance"),
        "relevance_proxy": old_relevance_proxy,
    }
    out: dict[str, Any] = {"cases": "+".join(ANSWERED) if labelled else "with a gold answer", "n": len(cases)}
    for name, get in signals.items():
        scored = [(float(v), r) for r in cases if (v := get(r)) is not None]
        out[name] = (
            {final: _spearman([(v, float(r["metrics"][final])) for v, r in scored]) for final in RELEVANCE_FINALS}
            if scored
            else None
        )
    pairs = [(float(r["relevance"]), float(r["metrics"]["token_f1"])) for r in cases if r.get("relevance") is not None]
    below = [f1 for v, f1 in pairs if v < threshold]
    above = [f1 for v, f1 in pairs if v >= threshold]
    f1_below, f1_above = _mean(below), _mean(above)
    out["threshold"] = {
        "value": threshold,
        "source": threshold_source,
        "n_below": len(below),
        "f1_below": f1_below,
        "n_at_or_above": len(above),
        "f1_at_or_above": f1_above,
        "f1_gap": None if f1_below is None or f1_above is None else f1_above - f1_below,
    }
    return out
