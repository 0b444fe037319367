"""The evaluation report: `OUT/report.md` with tables and PNG plots from retrieval and answers runs.

    reground eval report --runs runs/retrieval runs/answers --out runs/report

A run directory is recognised by its `summary.json`: a retrieval run has `recall@k` per system,
an answers run has `"kind": "answers"` and per-system `<system>/cases.jsonl` files. Answers runs on
labelled cases (MTRAG-UN) add the behaviour per class (table and stacked bars), and graph systems
the answer-relevance signal's correlations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from reground.evals.records import latest_by_case, read_jsonl
from reground.evals.runs.behaviour import ANSWERABILITY, KINDS
from reground.evals.runs.correlation import FINALS, PROXIES, correlation_report
from reground.tools.errors import InputError

ANSWER_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (summary key, column title, format)
    ("n_cases", "cases", "d"),
    ("gold_in_top3", "gold doc in top 3", ".3f"),
    ("token_f1", "token F1", ".3f"),
    ("k_precision", "K-Precision", ".3f"),
    ("recall", "Recall", ".3f"),
    ("rougeL", "ROUGE-L", ".3f"),
    ("bleu1", "BLEU-1", ".3f"),
    ("bleu4", "BLEU-4", ".3f"),
    ("sacrebleu", "SacreBLEU", ".2f"),
    ("meteor", "METEOR", ".3f"),
    ("words", "words", ".1f"),
    ("llm_calls", "LLM calls", ".2f"),
    ("latency_median_s", "median s", ".2f"),
    ("latency_p90_s", "p90 s", ".2f"),
    ("hallucination_rate", "hallucination rate", ".3f"),
)
LOOP_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("reground_attempts", "re-ground attempts (mean)", ".2f"),
    ("refine_iterations", "refine iterations (mean)", ".2f"),
    ("groundedness", "groundedness (mean)", ".3f"),
    ("passed", "passed", ".3f"),
    ("fallbacks", "fallbacks", "d"),
    ("prompt_tokens", "prompt tokens (mean)", ".0f"),
    ("completion_tokens", "completion tokens (mean)", ".0f"),
    ("n_errors", "errors", "d"),
)
BAR_METRICS = (
    ("token_f1", "token F1"),
    ("k_precision", "K-Precision"),
    ("recall", "Recall"),
    ("rougeL", "ROUGE-L"),
    ("meteor", "METEOR"),
    ("bleu1", "BLEU-1"),
)


# What each MTRAG-UN class expects (shared/data/mtrag/README.md).
EXPECTED = {
    "ANSWERABLE": "answer",
    "UNANSWERABLE": "abstain",
    "UNDERSPECIFIED": "clarify",
    "PARTIAL": "answer (the covered part)",
}
KIND_COLOURS = {"answer": "#4c72b0", "hedge": "#8172b3", "abstain": "#dd8452", "clarify": "#55a868"}


class ReportError(InputError):
    """A run directory cannot be read; the message names it and what it should contain."""


# --- reading runs ---------------------------------------------------------------------------------


def _load_summary(run: Path) -> dict[str, Any]:
    path = run / "summary.json"
    if not path.is_file():
        raise ReportError(f"{path} not found: pass directories written by `reground eval retrieval|answers`")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path} is not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("systems"), dict):
        raise ReportError(f"{path} has no 'systems' object")
    return data


def _is_retrieval(summary: Mapping[str, Any]) -> bool:
    return summary.get("kind") != "answers" and any(
        any(str(k).startswith("recall@") for k in (m or {})) for m in summary["systems"].values()
    )


def _unique(name: str, taken: Mapping[str, Any], run: Path) -> str:
    return name if name not in taken else f"{name} ({run.name})"


def _fmt(value: Any, spec: str) -> str:
    if value is None:
        return "–"
    try:
        return format(int(value) if spec == "d" else float(value), spec)
    except (TypeError, ValueError):
        return str(value)


def _table(rows: Sequence[tuple[str, Mapping[str, Any]]], columns: Sequence[tuple[str, str, str]]) -> str:
    used = [c for c in columns if any(m.get(c[0]) is not None for _, m in rows)]
    head = "| system | " + " | ".join(title for _, title, _ in used) + " |"
    sep = "|---|" + "---|" * len(used)
    body = ["| " + " | ".join([name, *(_fmt(m.get(k), f) for k, _, f in used)]) + " |" for name, m in rows]
    return "\n".join([head, sep, *body])


# --- plots ----------------------------------------------------------------------------------------


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def plot_recall_curves(systems: Mapping[str, Mapping[str, Any]], path: Path) -> str:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, metrics in systems.items():
        ks = sorted(int(k.split("@")[1]) for k in metrics if re.fullmatch(r"recall@\d+", str(k)))
        ax.plot(ks, [metrics[f"recall@{k}"] for k in ks], marker="o", label=name)
    ax.set(xlabel="k (documents)", ylabel="recall@k", title="Document recall@k", ylim=(0, 1.02))
    ax.set_xticks(sorted({int(k.split("@")[1]) for m in systems.values() for k in m if str(k).startswith("recall@")}))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def plot_metric_bars(systems: Mapping[str, Mapping[str, Any]], path: Path) -> str:
    metrics = [(k, t) for k, t in BAR_METRICS if any(s.get(k) is not None for s in systems.values())]
    names = list(systems)
    fig, ax = plt.subplots(figsize=(max(7, 1.4 * len(metrics) + 0.5 * len(names)), 4.8))
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(metrics))]
        ys = [systems[name].get(k) or 0.0 for k, _ in metrics]
        bars = ax.bar(xs, ys, width=width, label=name)
        ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
    ax.set_xticks(range(len(metrics)), [t for _, t in metrics])
    ax.set(ylabel="score (0-1)", title="Answer metrics per system and ablation")
    ax.set_ylim(0, max(1.0, *(systems[n].get(k) or 0 for n in names for k, _ in metrics)) * 1.08)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def _counts(values: Sequence[int], support: Sequence[int]) -> list[int]:
    return [sum(1 for v in values if v == s) for s in support]


def plot_histograms(rows: Mapping[str, Sequence[Mapping[str, Any]]], path: Path) -> str:
    fields = (
        ("reground_attempts", "re-ground attempts"),
        ("refine_iterations", "refine iterations"),
        ("llm_calls", "LLM calls per turn"),
    )
    fig, axes = plt.subplots(1, len(fields), figsize=(13, 4))
    names = list(rows)
    width = 0.8 / max(len(names), 1)
    for ax, (key, title) in zip(axes, fields, strict=True):
        support = sorted({int(r.get(key) or 0) for rs in rows.values() for r in rs}) or [0]
        for i, name in enumerate(names):
            counts = _counts([int(r.get(key) or 0) for r in rows[name]], support)
            xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(support))]
            ax.bar(xs, counts, width=width, label=name)
        ax.set_xticks(range(len(support)), [str(s) for s in support])
        ax.set(title=title, xlabel=title, ylabel="cases")
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(names), 5), fontsize=8)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def plot_latency(rows: Mapping[str, Sequence[Mapping[str, Any]]], path: Path) -> str:
    names = list(rows)
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(names)), 4.5))
    data = [[float(r["seconds"]) for r in rows[n]] or [0.0] for n in names]
    ax.boxplot(data, showfliers=True)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=20, ha="right", fontsize=8)
    ax.set(ylabel="seconds per turn", title="Latency per turn")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_proxy_vs_final(rows: Mapping[str, Sequence[Mapping[str, Any]]], path: Path) -> str:
    """Row 1: ProMiSe's faithfulness proxy (every system); row 2: groundedness (graph systems)."""
    finals = (("k_precision", "K-Precision"), ("token_f1", "token F1"))
    proxies = (
        ("faithfulness", "faithfulness proxy (ROUGE-L answer vs passages)"),
        ("groundedness", "groundedness score (graph)"),
    )
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5))
    for row_axes, (proxy, proxy_title) in zip(axes, proxies, strict=True):
        for ax, (final, title) in zip(row_axes, finals, strict=True):
            for index, (name, rs) in enumerate(rows.items()):
                points = [
                    (float(v), float(r["metrics"][final]))
                    for r in rs
                    if (v := r.get(proxy) if proxy == "groundedness" else (r.get("principle_scores") or {}).get(proxy))
                    is not None
                    and r["metrics"].get(final) is not None
                ]
                if points:
                    xs, ys = zip(*points, strict=True)
                    ax.scatter(xs, ys, s=14, alpha=0.6, label=name, color=f"C{index % 10}")
            ax.set(xlabel=proxy_title, ylabel=title, xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
            ax.set_title(f"{proxy} vs {title}", fontsize=10)
            ax.grid(alpha=0.3)
            if ax.has_data():
                ax.legend(fontsize=7)
            else:
                ax.text(0.5, 0.5, "no scores in these runs", ha="center", va="center", color="grey")
    return _save(fig, path)


def _classes(answers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    found = {c for m in answers.values() for c in (m.get("behaviour") or {})}
    return [c for c in ANSWERABILITY if c in found] + sorted(found - set(ANSWERABILITY))


def plot_behaviour(answers: Mapping[str, Mapping[str, Any]], path: Path) -> str:
    """One panel per answerability class: a bar per system, stacked answer / abstain / clarify."""
    classes = _classes(answers)
    names = [n for n, m in answers.items() if m.get("behaviour")]
    fig, axes = plt.subplots(1, len(classes), figsize=(max(3.2, 1.0 + 1.2 * len(names)) * len(classes), 4.6))
    axes = list(axes) if len(classes) > 1 else [axes]
    for ax, label in zip(axes, classes, strict=True):
        bottoms = [0.0] * len(names)
        for kind in KINDS:
            ys = [float(((answers[n].get("behaviour") or {}).get(label) or {}).get(kind) or 0.0) for n in names]
            bars = ax.bar(range(len(names)), ys, bottom=bottoms, color=KIND_COLOURS[kind], label=kind)
            ax.bar_label(bars, labels=[f"{y:.2f}" if y >= 0.08 else "" for y in ys], label_type="center", fontsize=7)
            bottoms = [b + y for b, y in zip(bottoms, ys, strict=True)]
        counts = [((answers[n].get("behaviour") or {}).get(label) or {}).get("n", 0) for n in names]
        ax.set_xticks(range(len(names)), [f"{n}\n(n={c})" for n, c in zip(names, counts, strict=True)], fontsize=7)
        ax.set(ylim=(0, 1.02), title=f"{label}\nexpected: {EXPECTED.get(label, '?')}")
        ax.title.set_fontsize(9)
    axes[0].set_ylabel("share of replies")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(KINDS), fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _behaviour_table(answers: Mapping[str, Mapping[str, Any]]) -> str:
    """system × class: n, the share of each behaviour, and token F1 / gold in passages where a class has them."""
    lines = [
        "| system | class (expected) | n | " + " | ".join(KINDS) + " | token F1 | gold in passages |",
        "|---|---|---|" + "---|" * len(KINDS) + "---|---|",
    ]
    for label in _classes(answers):
        for name, m in answers.items():
            row = (m.get("behaviour") or {}).get(label)
            if not row:
                continue
            cells = [
                name,
                f"{label} ({EXPECTED.get(label, '?')})",
                str(row["n"]),
                *(_fmt(row.get(k), ".2f") for k in KINDS),
                _fmt(row.get("token_f1"), ".3f"),
                _fmt(row.get("gold_in_passages"), ".3f"),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _behaviour_source_line(answers: Mapping[str, Mapping[str, Any]]) -> str:
    parts = []
    for name, m in answers.items():
        src = m.get("behaviour_source")
        if src:
            parts.append(f"{name}: {src.get('graph', 0)} from the graph's `kind`, {src.get('rule', 0)} by the rule")
    return "Where each class came from — " + "; ".join(parts) + "." if parts else ""


def _spearman_cell(cell: Mapping[str, Any] | None) -> str:
    if not cell or cell.get("spearman") is None:
        return "–" if not cell else f"– (n={cell.get('n', 0)})"
    return f"{cell['spearman']:.2f} (n={cell['n']})"


def _relevance_table(answers: Mapping[str, Mapping[str, Any]]) -> str:
    """Per system: the signal's and the old proxy's Spearman with token F1 / K-Precision, and F1 by
    side of the threshold."""
    rows = [(n, m["correlations"]) for n, m in answers.items() if m.get("correlations")]
    if not rows:
        return ""
    lines = [
        "| system | cases | signal | Spearman vs token F1 | Spearman vs K-Precision |",
        "|---|---|---|---|---|",
    ]
    for name, c in rows:
        for key, title in (("relevance", "`result.relevance`"), ("relevance_proxy", "old proxy (ROUGE-L)")):
            block = c.get(key)
            if block is None:
                lines.append(f"| {name} | {c.get('cases')} | {title} | not in this run | – |")
                continue
            cells = [_spearman_cell(block.get("token_f1")), _spearman_cell(block.get("k_precision"))]
            lines.append(f"| {name} | {c.get('cases')} | {title} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| system | threshold | cases below | token F1 below | cases at or above | token F1 at or above | gap |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, c in rows:
        t = c.get("threshold") or {}
        cells = [
            f"{t.get('value')} ({t.get('source')})",
            str(t.get("n_below", 0)),
            _fmt(t.get("f1_below"), ".3f"),
            str(t.get("n_at_or_above", 0)),
            _fmt(t.get("f1_at_or_above"), ".3f"),
            _fmt(t.get("f1_gap"), "+.3f"),
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- the report -----------------------------------------------------------------------------------


def _correlation_table(report: Mapping[str, Any]) -> str:
    pooled = report.get("all") or {}
    finals = [f for f in FINALS if any(f in (pooled.get(p) or {}) for p in PROXIES)]
    if not finals:
        return "_Not enough cases for correlations._"
    lines = ["| proxy \\ final | " + " | ".join(finals) + " |", "|---|" + "---|" * len(finals)]
    for proxy in PROXIES:
        if proxy not in pooled:
            continue
        cells = []
        for final in finals:
            c = pooled[proxy].get(final)
            if not c or c.get("spearman") is None:
                cells.append("–")
            else:
                cells.append(f"{c['spearman']:.2f} / {c['kendall']:.2f} (n={c['n']})")
        lines.append(f"| {proxy} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


JUDGE_NOTE = (
    "Hallucination rate: share of judged answers the ReGround judge called hallucinated. "
    "G-Eval and rubric: 1-5. In brackets: verdicts that did not parse (counted, never guessed)."
)
JUDGE_KEYS = (
    ("hallucination_rate", "hallucination_unparseable", "hallucination rate"),
    ("geval_relevance", "geval_relevance_unparseable", "relevance"),
    ("geval_readability", "geval_readability_unparseable", "readability"),
    ("geval_truthfulness", "geval_truthfulness_unparseable", "truthfulness"),
    ("geval_usability", "geval_usability_unparseable", "usability"),
    ("rubric", "rubric_unparseable", "rubric"),
)


def _judge_check_line(run: Path, check: Mapping[str, Any]) -> str:
    """How the hallucination judge did on labelled items (`reground eval judge-check`)."""
    balanced = check.get("balanced_accuracy")
    verdict = "trusted" if check.get("trusted") else "NOT trusted: its hallucination rate measures the judge"
    shown = "–" if balanced is None else f"{balanced:.2f}"
    return (
        f"Judge check (`{run}`, {check.get('judge_model')}): balanced accuracy {shown} on {check.get('n')} "
        f"labelled items ({check.get('unparseable')} unparseable; threshold {check.get('trust_threshold')}) "
        f"— {verdict}.\n"
    )


def _judge_table(answers: Mapping[str, Mapping[str, Any]]) -> str:
    """One column per judge: 'mean (unparseable)'; empty when no run was judged."""
    keys = [k for k in JUDGE_KEYS if any(k[1] in m for m in answers.values())]
    if not keys:
        return ""
    lines = ["| system | " + " | ".join(t for _, _, t in keys) + " |", "|---|" + "---|" * len(keys)]
    for name, m in answers.items():
        cells = []
        for mean, bad, _ in keys:
            if bad not in m:
                cells.append("–")
                continue
            value = "–" if m.get(mean) is None else f"{m[mean]:.2f}"
            cells.append(f"{value} ({m[bad]})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(run_dirs: Sequence[str | Path], out_dir: str | Path) -> Path:
    """Read the runs, draw the plots, write `out_dir/report.md`; returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    retrieval: dict[str, dict[str, Any]] = {}
    answers: dict[str, dict[str, Any]] = {}
    rows: dict[str, list[dict[str, Any]]] = {}
    followups: dict[str, dict[str, Any]] = {}
    pairwise: dict[str, Any] = {}
    configs: list[tuple[Path, dict[str, Any]]] = []
    correlations: list[tuple[Path, dict[str, Any]]] = []
    judge_checks: list[tuple[Path, dict[str, Any]]] = []
    for raw in run_dirs:
        run = Path(raw)
        summary = _load_summary(run)
        if _is_retrieval(summary):
            for name, metrics in summary["systems"].items():
                retrieval[_unique(name, retrieval, run)] = metrics
            for name, metrics in (summary.get("followups") or {}).items():
                followups[_unique(name, followups, run)] = metrics
            configs.append((run, {k: v for k, v in summary.items() if k != "systems"}))
            continue
        configs.append((run, summary.get("config", {})))
        pairwise.update(summary.get("pairwise") or {})
        if summary.get("judge_check"):
            judge_checks.append((run, summary["judge_check"]))
        for name, metrics in summary["systems"].items():
            key = _unique(name, answers, run)
            answers[key] = metrics
            found = latest_by_case(read_jsonl(run / name / "cases.jsonl"))
            rows[key] = [r for r in found.values() if not r.get("error")]
        correlations.append((run, correlation_report(run, list(summary["systems"]))))

    lines = ["# reground evaluation report", ""]
    for run, config in configs:
        if not config:
            lines.append(f"- `{run}`")
            continue
        shown = {k: v for k, v in config.items() if k not in ("systems",) and not isinstance(v, dict | list)}
        lines.append(f"- `{run}`: " + ", ".join(f"{k}={v}" for k, v in shown.items()))
    lines.append("")
    if retrieval:
        lines += ["## Retrieval (document level)", ""]
        ks = sorted(
            {int(k.split("@")[1]) for m in retrieval.values() for k in m if re.fullmatch(r"recall@\d+", str(k))}
        )
        cols = [(f"recall@{k}", f"recall@{k}", ".3f") for k in ks] + [("mrr", "MRR", ".3f")]
        timing = [("ms_per_case", "ms / case", ".1f")]
        lines += [_table(list(retrieval.items()), cols + timing), ""]
        if followups:
            lines += ["Follow-up turns only (the question alone is ambiguous there):", ""]
            lines += [_table(list(followups.items()), cols), ""]
        lines += [f"![recall@k]({plot_recall_curves(retrieval, out / 'recall_at_k.png')})", ""]
    if answers:
        lines += ["## Answers", "", _table(list(answers.items()), ANSWER_COLUMNS), ""]
        skipped = {m.get("meteor_skipped") for m in answers.values() if m.get("meteor_skipped")}
        for note in skipped:
            lines += [f"METEOR skipped: {note}", ""]
        lines += [f"![metrics]({plot_metric_bars(answers, out / 'answer_metrics.png')})", ""]
        judge_table = _judge_table(answers)
        if judge_table:
            lines += ["### LLM judges", "", JUDGE_NOTE, "", judge_table, ""]
        lines += [_judge_check_line(run, check) for run, check in judge_checks]
        if pairwise:
            lines += [
                "### Pairwise (both orders; a disagreement between orders counts as a tie)",
                "",
            ]
            lines += [
                "| A vs B | A wins | B wins | ties | order disagreements | unparseable |",
                "|---|---|---|---|---|---|",
            ]
            for label, p in pairwise.items():
                cells = [p["A"], p["B"], p["tie"], p["order_disagreements"], p["unparseable"]]
                lines.append(f"| {label} | " + " | ".join(str(c) for c in cells) + " |")
            lines.append("")
        if any(m.get("behaviour") for m in answers.values()):
            lines += [
                "## Answer, abstain or ask (behaviour per answerability class)",
                "",
                "Share of replies per class: graph systems report their own `kind`; baseline replies are "
                "classified by the rule in `evals/runs/behaviour.py`. Token F1 and gold in passages only where "
                "the class has a reference answer.",
                "",
                _behaviour_table(answers),
                "",
            ]
            source = _behaviour_source_line(answers)
            lines += [source, ""] if source else []
            lines += [f"![behaviour]({plot_behaviour(answers, out / 'behaviour.png')})", ""]
        relevance = _relevance_table(answers)
        if relevance:
            lines += [
                "## Answer relevance: is the signal worth a loop?",
                "",
                "Spearman correlation of the graph's `result.relevance` and of the old proxy "
                "(`principle_scores.relevance`) with token F1 and K-Precision, and mean token F1 under vs at or "
                "above the relevance threshold: a signal is worth a loop only if answers under its threshold "
                "have clearly lower F1.",
                "",
                relevance,
                "",
            ]
        lines += ["## Loops, cost and latency", "", _table(list(answers.items()), LOOP_COLUMNS), ""]
        lines += [
            f"![loops and LLM calls]({plot_histograms(rows, out / 'loops_llm_calls.png')})",
            "",
        ]
        lines += [f"![latency]({plot_latency(rows, out / 'latency.png')})", ""]
        lines += ["## Proxy metrics vs final metrics", ""]
        lines += [
            "Spearman / Kendall over all cases of all systems (per-system values in each run's `correlation.json`).",
            "",
        ]
        for run, report in correlations:
            lines += [f"Run `{run}`:", "", _correlation_table(report), ""]
        lines += [f"![proxy vs final]({plot_proxy_vs_final(rows, out / 'proxy_vs_final.png')})", ""]
    if not retrieval and not answers:
        raise ReportError("no runs to report: pass --runs with retrieval or answers run directories")
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
