"""Does the local LLM tell answerable MTRAG-UN tasks from unanswerable ones? Measured, not shipped.

The local model's log-probabilities are a candidate input of the answerability head. Here the model
reads each MTRAG-UN dev task's conversation, its question and the five passage sentences the shipped judge ranks
first, and is asked whether they state the answer (one digit, read from the first token's log-probabilities,
evals/runs/judges.py `answerability`). Its log-odds is scored alone and as a sixth input of the head, under the
head's own 5 folds (by task, one task per conversation), out of fold. One call a task; with qwen2.5-1.5b on 2 cores
about 2 s a task, so in the graph it could only run on the turns the head is unsure of.

    python -m reground.evals.train.judge train --cache CACHE
    reground llm serve --model qwen2.5-1.5b
    python -m reground.evals.studies.llm_answerability --cache CACHE --cases ../shared/data/mtrag/cases_dev.jsonl \\
        --model local:qwen2.5-1.5b --out evals/results/judge/llm_answerability.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

TOP_SENTENCES = 5  # the judge's best sentences the model reads
HISTORY_TURNS = 4  # the conversation's last turns the model reads
ODDS_FLOOR = 1e-6  # keeps the log-odds finite when the model puts all its mass on one digit
LLM_WEIGHTS = (0.25, 0.5, 1.0)  # the log-odds' weight beside the head's logit, for the fixed-weight sums


def log_odds(probability: float) -> float:
    p = min(max(probability, ODDS_FLOOR), 1.0 - ODDS_FLOOR)
    return math.log(p / (1.0 - p))


def main(argv: Sequence[str] | None = None) -> int:
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs import judges
    from reground.evals.runs.answers import load_eval_model
    from reground.evals.train.judge import (
        answerable_labels,
        auc,
        head_out_of_fold,
        judged_tasks,
        load_turns,
        task_fold,
        turn_feature_rows,
    )
    from reground.prompts import judges as prompts
    from reground.tools.adapters.chat import CallStats
    from reground.tools.signals.judge import shipped_judge

    parser = argparse.ArgumentParser(prog="python -m reground.evals.studies.llm_answerability", description=__doc__)
    parser.add_argument("--cache", type=Path, required=True, help="the folder `reground judge train --cache` wrote")
    parser.add_argument("--cases", type=Path, required=True, help="MTRAG-UN cases_dev.jsonl (the conversations)")
    parser.add_argument("--model", default="local:default", help="chat model spec (default: the local server)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    cases = {c.case_id: c for c in load_cases(args.cases)}
    turns = judged_tasks(load_turns(args.cache / "mtrag.npz"))
    judge, model, stats = shipped_judge(), load_eval_model(args.model, max_tokens=1), CallStats()
    started = time.perf_counter()
    probabilities: list[float] = []
    unreadable = 0
    for turn in turns:
        case = cases[turn.case_id]
        best = sorted(np.argsort(-judge.sentence_logits(turn.inputs))[:TOP_SENTENCES]) if len(turn.texts) else []
        verdict = judges.answerability(
            model,
            history=[dict(t) for t in case.history][-HISTORY_TURNS:],
            question=case.question,
            passages=[turn.texts[i] for i in best],
            stats=stats,
        )
        unreadable += verdict.value is None
        probabilities.append(verdict.probabilities.get(prompts.ANSWERS, 0.0))
    seconds = time.perf_counter() - started

    answerable = answerable_labels(turns)
    folds = np.asarray([task_fold(t.case_id) for t in turns])
    llm = np.asarray([[log_odds(p)] for p in probabilities], dtype=np.float32)
    rows = turn_feature_rows(turns)
    head = head_out_of_fold(rows, answerable, folds)
    with_llm = head_out_of_fold(np.hstack([rows, llm]), answerable, folds)
    head_logit = np.asarray([log_odds(p) for p in head])
    positives = list(answerable > 0)
    summary: dict[str, Any] = {
        "model": args.model,
        "tasks": len(turns),
        "unreadable": unreadable,
        "seconds_per_task": round(seconds / max(1, len(turns)), 2),
        "auc_llm_alone": round(auc(list(llm[:, 0]), positives), 4),
        "auc_head": round(auc(list(head), positives), 4),
        "auc_head_with_llm_input": round(auc(list(with_llm), positives), 4),
        "auc_head_logit_plus_weighted_llm": {
            str(w): round(auc(list(head_logit + w * llm[:, 0]), positives), 4) for w in LLM_WEIGHTS
        },
        "note": "MTRAG-UN dev, ANSWERABLE + PARTIAL vs UNANSWERABLE; the head out of fold (5 folds by task); "
        "the weighted sums are not fitted (each weight listed), so the best of them is read in-sample",
        "tasks_scored": [
            {"case_id": t.case_id, "answerability": t.answerability, "llm_probability": round(p, 4)}
            for t, p in zip(turns, probabilities, strict=True)
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "tasks_scored"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
