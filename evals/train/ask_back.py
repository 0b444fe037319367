"""Train and measure the ask-back model (tools/signals/ask_back.py): when a question is too underspecified to answer.

    .venv/bin/python -m reground.evals.train.ask_back      # about 8 minutes; deterministic

1. **Collect.** The graph runs LLM-free (scripted model, as `evals/runs/passages.py`) on every MTRAG-UN dev task
   (scoped to its collection, as `eval answers` runs it) and on every doc2dial dev turn with a gold answer; each turn's
   features are read from its final state as triage read them.
2. **Fit** a logistic model: MTRAG-UN's UNDERSPECIFIED tasks against its other tasks and against the turns of the
   doc2dial dialogues the judge trains on (every one answerable, and most of them follow-ups in long dialogues: what
   must not be asked back), MTRAG-UN in 5 folds by conversation. The threshold asks back on at most
   `MAX_ANSWERABLE_ASKED_BACK` of MTRAG-UN's answerable and partly answerable tasks out of fold and of those doc2dial
   turns, whichever is higher. The shipped model is then fitted on all of them.
3. **Measure** out of fold on MTRAG-UN dev (how often each class is asked back) and, with the shipped model, on the
   doc2dial dialogues held out from the judge (every turn there is answerable: each ask-back is a false one).
   Writes reground/data/judge/ask_back.json and evals/results/judge/ask_back.json. Measured with only MTRAG-UN in the
   fit, out of fold: UNDERSPECIFIED asked back 0.52, ANSWERABLE 0.03, but doc2dial held-out turns 0.044 (training
   dialogues 0.077); with the doc2dial threshold alone 0.11 / 0.02 / 0.015.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from reground.evals.data.datasets import held_out
from reground.evals.train.judge import DOC2DIAL, FOLDS, MTRAG, auc, task_fold, train_logistic
from reground.tools.signals.ask_back import FEATURE_NAMES, AskBackModel, ask_back_features, ask_back_path
from reground.tools.signals.judge import logistic

MAX_ANSWERABLE_ASKED_BACK = 0.03
POSITIVE = "UNDERSPECIFIED"


def collect(docs: Path, cases: Path, *, scoped: bool, held_out_only: bool | None = None) -> list[dict[str, Any]]:
    """Each case's features (and its label) as triage read them in the graph's final state, LLM-free."""
    from langgraph.checkpoint.memory import InMemorySaver
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.llm_free import llm_free_graph
    from reground.tools.signals.answerability import readings, unresolved_references

    # The model's own decision off: a turn it would ask back must still read to its end, as it did before the model.
    run = llm_free_graph(docs, checkpointer=InMemorySaver(), overrides={"triage": {"learned_ask_back": False}})
    base = run.context
    out = []
    for case in load_cases(cases, only_with_answer=not scoped):
        if held_out_only is not None and held_out(case.dial_id) != held_out_only:
            continue
        state = run.final_state(case, scoped=scoped)
        signals = state.get("signals", {})
        question, history = str(state.get("question", case.question)), list(state.get("history", []))
        row = ask_back_features(
            question,
            history,
            references=len(unresolved_references(question, history)),
            readings=len(readings(state.get("candidates", []), base.triage.reading_ratio)),
            answerable=float(signals.get("answerable", 0.0)),
            support=float(signals.get("support", 0.0)),
            coverage=float(signals.get("coverage", 0.0)),
        )
        out.append(
            {
                "case_id": case.case_id,
                "conversation": case.dial_id or case.case_id.rsplit("_", 1)[0],
                "answerability": case.answerability or "ANSWERABLE",
                "features": [float(v) for v in row],
            }
        )
    return out


def asked_back_shares(scores: Sequence[float], classes: Sequence[str], threshold: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted(set(classes)):
        group = [s for s, c in zip(scores, classes, strict=True) if c == name]
        out[name] = {"tasks": len(group), "asked_back": round(sum(s >= threshold for s in group) / len(group), 4)}
    return out


def calibrated_threshold(*groups: Sequence[float]) -> float:
    """The lowest probability that asks back on at most MAX_ANSWERABLE_ASKED_BACK of each group of answerable turns."""
    out = 0.0
    for scores in groups:
        ranked = sorted(scores, reverse=True)
        if ranked:
            out = max(out, float(ranked[int(MAX_ANSWERABLE_ASKED_BACK * len(ranked))]) + 1e-4)
    return round(out, 4)


def train_and_measure(
    mtrag: list[dict[str, Any]], doc2dial_train: list[dict[str, Any]], doc2dial: list[dict[str, Any]]
) -> tuple[AskBackModel, dict[str, Any]]:
    x = np.asarray([r["features"] for r in mtrag], dtype=np.float32)
    y = np.asarray([r["answerability"] == POSITIVE for r in mtrag], dtype=np.float64)
    negatives = np.asarray([r["features"] for r in doc2dial_train], dtype=np.float32).reshape(-1, x.shape[1])
    classes = [r["answerability"] for r in mtrag]
    folds = np.asarray([task_fold(r["conversation"]) for r in mtrag])
    out_of_fold = np.zeros(len(mtrag))
    for k in range(FOLDS):
        fit = folds != k
        head = train_logistic(np.vstack([x[fit], negatives]), np.concatenate([y[fit], np.zeros(len(negatives))]))
        out_of_fold[~fit] = logistic(head, x[~fit])
    weights, bias, mean, scale = train_logistic(
        np.vstack([x, negatives]), np.concatenate([y, np.zeros(len(negatives))])
    )
    head = (weights, bias, mean, scale)
    answerable = [s for s, c in zip(out_of_fold, classes, strict=True) if c in ("ANSWERABLE", "PARTIAL")]
    threshold = calibrated_threshold(answerable, list(logistic(head, negatives)))
    model = AskBackModel(weights=weights, bias=bias, mean=mean, scale=scale, threshold=threshold)
    held = [model.probability(np.asarray(r["features"], dtype=np.float32)) for r in doc2dial]
    summary = {
        "features": list(FEATURE_NAMES),
        "mtrag_dev_tasks": len(mtrag),
        "doc2dial_training_turns": len(negatives),
        "folds": f"MTRAG-UN: {FOLDS} folds by conversation, sha1(conversation id) mod {FOLDS}",
        "auc_underspecified_vs_rest_out_of_fold": round(auc(list(out_of_fold), list(y > 0)), 4),
        "threshold": threshold,
        "threshold_rule": f"asks back on at most {MAX_ANSWERABLE_ASKED_BACK:.0%} of MTRAG-UN ANSWERABLE + PARTIAL out "
        "of fold and of the doc2dial training turns, whichever is higher",
        "out_of_fold_asked_back": asked_back_shares(list(out_of_fold), classes, threshold),
        "doc2dial_held_out_turns": len(held),
        "doc2dial_held_out_asked_back": round(sum(p >= threshold for p in held) / max(len(held), 1), 4),
        "weights": dict(zip(FEATURE_NAMES, (round(float(w), 4) for w in weights), strict=True)),
    }
    return model, summary


def model_card(summary: dict[str, Any]) -> str:
    """The card beside the weights: what the model reads, its data and split, its measured numbers, the licence."""
    shares = summary["out_of_fold_asked_back"]
    rows = "\n".join(f"| {name} | {v['tasks']} | {v['asked_back']:.3f} |" for name, v in shares.items())
    return f"""# reground ask-back model

A logistic model over what triage measures of a turn ({", ".join(summary["features"])}) that says whether a question
is too underspecified to answer; triage then asks back, naming the documents the judge reads as answering it. Code:
`tools/signals/ask_back.py`; training and measurement: `evals/train/ask_back.py`.

- Weights: `ask_back.json`, sha256 `{summary["sha256"]}` (pinned in `tools/signals/ask_back.py`); threshold
  {summary["threshold"]} ({summary["threshold_rule"]}).
- Reproduce (from the repository root, with `../shared/data` beside it; deterministic): `{summary["command"]}`.

## Data
- MTRAG-UN dev (Rosenthal et al. 2026; Apache-2.0): {summary["mtrag_dev_tasks"]} tasks, UNDERSPECIFIED against the
  rest; {summary["folds"]}, reported out of fold; the shipped model is fitted on all.
- doc2dial dev (Feng et al. 2020; CC BY 3.0): the {summary["doc2dial_training_turns"]} turns of the dialogues the judge
  trains on, as negatives (every one is answerable); the {summary["doc2dial_held_out_turns"]} turns of its held-out
  dialogues measure false ask-backs.
- Each turn is read by the graph LLM-free, with this model off, as triage reads it.

## Measured
AUC underspecified vs the rest, out of fold: {summary["auc_underspecified_vs_rest_out_of_fold"]}.

| MTRAG-UN dev class | tasks | asked back (out of fold) |
|---|---|---|
{rows}

doc2dial held-out turns asked back: {summary["doc2dial_held_out_asked_back"]:.3f} (all answerable).

## Limits
27 underspecified tasks are few: the out-of-fold shares move by 0.04 a task. The model reads the same signals as the
judge, so an unanswerable question with an unnamed referent ("Isn't the hummingbird part of songbirds?") looks
underspecified to it; the judge's reading of each offered document is what keeps such turns from asking back.
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reground.evals.train.ask_back", description=__doc__)
    parser.add_argument("--doc2dial", type=Path, default=DOC2DIAL, help="folder with docs.jsonl and cases_dev.jsonl")
    parser.add_argument("--mtrag", type=Path, default=MTRAG, help="folder with docs.jsonl and cases_dev.jsonl")
    parser.add_argument("--weights", type=Path, default=None, help="default: the package's ask_back.json")
    parser.add_argument("--out", type=Path, default=Path("evals/results/judge/ask_back.json"))
    parser.add_argument("--cache", type=Path, default=None, help="keep the collected features here and reuse them")
    args = parser.parse_args(argv)
    if args.cache is not None and args.cache.exists():
        rows = json.loads(args.cache.read_text())
    else:
        print("reading MTRAG-UN dev and doc2dial dev turns ...", file=sys.stderr)
        rows = {
            "mtrag": collect(args.mtrag / "docs.jsonl", args.mtrag / "cases_dev.jsonl", scoped=True),
            **{
                name: collect(
                    args.doc2dial / "docs.jsonl", args.doc2dial / "cases_dev.jsonl", scoped=False, held_out_only=kept
                )
                for name, kept in (("doc2dial_train", False), ("doc2dial", True))
            },
        }
        if args.cache is not None:
            args.cache.parent.mkdir(parents=True, exist_ok=True)
            args.cache.write_text(json.dumps(rows))
    model, summary = train_and_measure(rows["mtrag"], rows["doc2dial_train"], rows["doc2dial"])
    weights = args.weights or ask_back_path()
    weights.parent.mkdir(parents=True, exist_ok=True)
    weights.write_text(model.to_json() + "\n")
    summary["sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    summary["command"] = "python -m reground.evals.train.ask_back"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    weights.with_name("ASK_BACK_CARD.md").write_text(model_card(summary))
    print(f"weights {weights.name} sha256 {summary['sha256']}: pin it as ASK_BACK_SHA256 in tools/signals/ask_back.py")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
