"""Check the hallucination judge on labelled items before trusting its rate.

A small local model can return the same verdict for every answer, or parrot the definition it was
given; its "hallucination rate" then measures the judge, not the system. The items here have known
labels and come from a finished answers run, so they look like the real inputs (same dialogues,
same retrieved passages):

- faithful: a sentence copied from one of the passages shown;
- unsupported: a sentence taken from another case's passages (about something else);
- honest: the graph's "not in the documents" reply, which the definition says is not a hallucination.

Balanced accuracy (the mean of the accuracy on hallucinated and on faithful items) is 0.5 for a
constant judge, whatever the label mix; below `TRUST_THRESHOLD` the judge's rate is reported as
untrusted. The judge reads its verdict from the token log-probabilities (evals/runs/judges.py), so the check also
reports the ROC AUC of its probability of "hallucinated" over the readable items: 0.5 is no signal, and an AUC
well above a balanced accuracy near 0.5 says the judge ranks the items but its yes/no is biased. Writes
`RUN/judge_check.json`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reground.evals.records import latest_by_case, read_jsonl
from reground.evals.runs.answers import judge_inputs, passage_texts
from reground.prompts.answer import NOT_FOUND
from reground.prompts.judges import HALLUCINATED

if TYPE_CHECKING:  # the chat stack loads when a check runs, not when the CLI lists this command's options
    from langchain_core.language_models import BaseChatModel
    from reground.evals.runs.judges import Judgement

TRUST_THRESHOLD = 0.7
LABELLED_ITEMS = 40  # items a check judges by default (`reground eval judge-check --n`)
KINDS = ("faithful", "unsupported", "honest")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _sentences(text: str) -> list[str]:
    """Sentences of answer length (8-35 words), the size of a real two-sentence answer's part."""
    return [s.strip() for s in _SENTENCE_END.split(text) if 8 <= len(s.split()) <= 35]


def _passage_texts(row: Mapping[str, Any]) -> list[str]:
    return passage_texts(row.get("passages") or [])[:3]


def validation_items(
    rows: Sequence[Mapping[str, Any]], *, n: int = LABELLED_ITEMS, seed: int = 0
) -> list[dict[str, Any]]:
    """Up to n labelled items, the three kinds in turn; `hallucinated` is the label."""
    usable = [r for r in rows if any(_sentences(t) for t in _passage_texts(r))]
    if len(usable) < 2:
        raise ValueError("need at least 2 answered cases with passages to build judge-check items")
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    for index in range(min(n, len(usable))):
        row = usable[index]
        other = usable[(index + len(usable) // 2) % len(usable)]
        kind = KINDS[index % len(KINDS)]
        if kind == "faithful":
            answer = rng.choice([s for t in _passage_texts(row) for s in _sentences(t)])
        elif kind == "unsupported":
            answer = rng.choice([s for t in _passage_texts(other) for s in _sentences(t)])
        else:
            answer = NOT_FOUND.format(escalation="please contact the team that owns these documents")
        items.append(
            {
                "case_id": row.get("case_id"),
                "kind": kind,
                "hallucinated": kind == "unsupported",
                "history": row.get("history") or [],
                "question": row.get("question") or "",
                "passages": _passage_texts(row),
                "answer": answer,
            }
        )
    return items


def roc_auc(labels: Sequence[bool], scores: Sequence[float]) -> float | None:
    """The probability that a random positive scores above a random negative (ties count half); None if a class
    is missing."""
    positives = [s for s, y in zip(scores, labels, strict=True) if y]
    negatives = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def score_verdicts(
    items: Sequence[Mapping[str, Any]],
    verdicts: Sequence[bool | None],
    p_hallucinated: Sequence[float | None] | None = None,
) -> dict[str, Any]:
    """Accuracy per kind, balanced accuracy, unparseable count, and whether the judge is trusted; with the judge's
    probabilities of "hallucinated" (None where unreadable), their ROC AUC too."""
    per_kind: dict[str, dict[str, int]] = {}
    for item, verdict in zip(items, verdicts, strict=True):
        counts = per_kind.setdefault(item["kind"], {"n": 0, "correct": 0, "unparseable": 0})
        counts["n"] += 1
        if verdict is None:
            counts["unparseable"] += 1
        elif verdict == item["hallucinated"]:
            counts["correct"] += 1

    def accuracy(selected: list[tuple[Mapping[str, Any], bool | None]]) -> float | None:
        return sum(v == i["hallucinated"] for i, v in selected) / len(selected) if selected else None

    pairs = list(zip(items, verdicts, strict=True))
    on_positive = accuracy([(i, v) for i, v in pairs if i["hallucinated"]])
    on_negative = accuracy([(i, v) for i, v in pairs if not i["hallucinated"]])
    balanced = (on_positive + on_negative) / 2 if on_positive is not None and on_negative is not None else None
    scored: dict[str, Any] = {
        "n": len(items),
        "accuracy": accuracy(pairs),
        "balanced_accuracy": balanced,
        "unparseable": sum(v is None for v in verdicts),
        "per_kind": per_kind,
        "trusted": balanced is not None and balanced >= TRUST_THRESHOLD,
        "trust_threshold": TRUST_THRESHOLD,
    }
    if p_hallucinated is not None:
        readable = [(i["hallucinated"], p) for i, p in zip(items, p_hallucinated, strict=True) if p is not None]
        scored["auc"] = roc_auc([y for y, _ in readable], [p for _, p in readable])
    return scored


def _p_hallucinated(judgement: Judgement) -> float | None:
    return None if judgement.value is None else judgement.probabilities.get(HALLUCINATED)


def check_hallucination_judge(
    run_dir: str | Path,
    judge_model: BaseChatModel,
    *,
    judge_model_spec: str,
    system: str = "history_rag",
    n: int = LABELLED_ITEMS,
    seed: int = 0,
) -> dict[str, Any]:
    """Judge the labelled items built from `system`'s rows of a run; write RUN/judge_check.json."""
    run = Path(run_dir)
    rows = list(latest_by_case(read_jsonl(run / system / "cases.jsonl")).values())
    if not rows:
        raise FileNotFoundError(f"{run / system / 'cases.jsonl'} has no finished cases: run `reground eval answers`")
    from reground.evals.runs.judges import hallucination

    items = validation_items(rows, n=n, seed=seed)
    judged = [hallucination(judge_model, **judge_inputs(item)) for item in items]
    result = {
        "judge_model": judge_model_spec,
        "items_from": system,
        "seed": seed,
        **score_verdicts(items, [j.value for j in judged], [_p_hallucinated(j) for j in judged]),
        "sources": {s: sum(j.source == s for j in judged) for s in sorted({j.source for j in judged})},
        "mean_coverage": sum(j.coverage for j in judged) / len(judged),
        # Every item's verdict, in the seeded order, to audit the judge or rescore the first n (kept out of summaries).
        "examples": [
            {
                "case_id": i["case_id"],
                "kind": i["kind"],
                "answer": i["answer"],
                "verdict": j.value,
                "p_hallucinated": j.probabilities.get(HALLUCINATED),
                "coverage": round(j.coverage, 4),
                "raw": j.raw[:300],
            }
            for i, j in zip(items, judged, strict=True)
        ],
    }
    (run / "judge_check.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result
