"""The passages an answer sees, reground's graph against history RAG's retrieval, on every dev case, LLM-free.

    .venv/bin/python -m reground.evals.runs.passages --docs ../shared/data/doc2dial/docs.jsonl \
        --cases ../shared/data/doc2dial/cases_dev.jsonl --out evals/results/passages_dev

`eval answers` compares "gold document in the 3 passages" on 100 cases, where one case is 0.01. Here the graph
runs every case that has a gold answer with a scripted model (no LLM: a follow-up whose retrieval is unsure keeps
its question unrewritten, and replies are extracted, as by default; their token F1 against the human reply is
recorded too), and history RAG's retrieval (question plus the last ~100 tokens of dialogue, top 3,
`evals/runs/baselines.py`) runs on the same cases, so the two are compared on thousands of cases with no model noise.
Writes summary.json and one row per case.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reground.evals.data.datasets import held_out
from reground.evals.runs.baselines import rag_passages


def compare_passages(
    docs: Path,
    cases: Path,
    *,
    data_dir: str | None = None,
    limit: int | None = None,
    overrides: dict[str, Any] | None = None,
    store: Any = None,
) -> dict[str, Any]:
    """Per case, whether the graph's final passages and history RAG's hold the gold document; and the shares.
    `store`: a search store holding the same documents (e.g. the engine backend's), instead of the eval collection."""
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.answers import graph_messages
    from reground.evals.runs.llm_free import llm_free_graph
    from reground.graph.builder import run_config
    from reground.tools.retrieval.search import HybridRetriever
    from reground.tools.signals.scoring import token_f1

    run = llm_free_graph(docs, data_dir=data_dir, overrides=overrides, store=store)
    store, model, graph, context = run.store, run.model, run.graph, run.context
    retriever = HybridRetriever(store)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for case in load_cases(cases, limit=limit, only_with_answer=True):
        model.reset()
        out = graph.invoke({"messages": graph_messages(case)}, context=context, config=run_config(context))
        baseline = rag_passages(retriever, history=case.history, question=case.question, use_history=True)
        rows.append(
            {
                "case_id": case.case_id,
                "judge_held_out": held_out(case.dial_id),
                "followup": bool(case.history),
                "kind": out["result"]["kind"],
                "reground": case.gold_doc_id in {p["doc_id"] for p in out["result"]["passages"]},
                "history_rag": case.gold_doc_id in {p["doc_id"] for p in baseline},
                "reply_token_f1": round(token_f1(out["result"]["answer"], case.gold_answer or ""), 4),
            }
        )
    return {"summary": summarize(rows, docs, cases, time.perf_counter() - started), "rows": rows}


def summarize(rows: Sequence[dict[str, Any]], docs: Path, cases: Path, seconds: float) -> dict[str, Any]:
    def share(system: str, subset: Sequence[dict[str, Any]]) -> float | None:
        return round(statistics.mean(float(r[system]) for r in subset), 4) if subset else None

    followups = [r for r in rows if r["followup"]]
    unseen = [r for r in rows if r.get("judge_held_out")]
    return {
        "cases": len(rows),
        "gold_doc_in_passages": {s: share(s, rows) for s in ("reground", "history_rag")},
        "followups": {"n": len(followups), **{s: share(s, followups) for s in ("reground", "history_rag")}},
        "only_reground": sum(r["reground"] and not r["history_rag"] for r in rows),
        "only_history_rag": sum(r["history_rag"] and not r["reground"] for r in rows),
        # The graph's own reply (extracted, LLM-free) against the human one, every case (clarifications included).
        "reground_reply_token_f1": round(statistics.mean(r["reply_token_f1"] for r in rows), 4) if rows else None,
        # The dialogues the judge (evals/train/judge.py) was not trained on.
        "judge_held_out": {
            "cases": len(unseen),
            "reground_reply_token_f1": round(statistics.mean(r["reply_token_f1"] for r in unseen), 4)
            if unseen
            else None,
            "gold_doc_in_passages": {s: share(s, unseen) for s in ("reground", "history_rag")},
        },
        "kinds": {k: sum(1 for r in rows if r["kind"] == k) for k in sorted({r["kind"] for r in rows})},
        "docs": str(docs),
        "cases_path": str(cases),
        "seconds": round(seconds, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reground.evals.runs.passages", description=__doc__)
    parser.add_argument("--docs", type=Path, required=True)
    parser.add_argument("--cases", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="output directory (summary.json, cases.jsonl)")
    parser.add_argument("--limit", type=int, default=None, help="first N cases with a gold answer")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=JSON",
        help="a Context field for the graph, GROUP.FIELD for a group's (repeatable): --set triage.reading_ratio=0.7",
    )
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = json.loads(value)
    result = compare_passages(args.docs, args.cases, data_dir=args.data_dir, limit=args.limit, overrides=overrides)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(result["summary"], indent=2) + "\n", encoding="utf-8")
    with (args.out / "cases.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row) + "\n" for row in result["rows"])
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
