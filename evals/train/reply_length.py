"""How long an extracted reply should be, replayed offline on the judge's collected turns (no graph run).

    .venv/bin/reground judge train --cache DIR          # collects the turns once (about 7 minutes), then trains
    .venv/bin/python -m reground.evals.train.reply_length --cache DIR [--cases $DATA/doc2dial/cases_dev.jsonl ...]

Each turn's sentences are ranked as the graph ranks them (the hand-made score plus the judge's probability); a reply
is built by a length rule and scored by token F1 against the reference reply. The rules: the graph's 'sentence'
length, and 'conversation' (sentences of the best passage scoring at least `ratio` of the best, until the reply has
as many words as the assistant's replies before it, their median; a first turn as 'sentence'). Reported on the
doc2dial validation dialogues (sha1 in [0.6, 0.8): inside the judge's training range, never trained on) where the
default was chosen, and on MTRAG-UN dev's answerable tasks for reference (not tuned on).
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
from reground.evals.train.judge import DOC2DIAL, MTRAG, TurnRows, _f1, load_turns

VALIDATION = (0.6, 0.8)  # the judge's validation dialogues (evals/train/judge.py)
RATIOS = (0.0, 0.5, 0.7)
MOST = (4, 6)


def _share(dial_id: str) -> float:
    return int(hashlib.sha1(dial_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def assistant_words(cases: Sequence[Path]) -> dict[str, list[int]]:
    """Per case id, the word counts of the assistant's replies before the question."""
    out: dict[str, list[int]] = {}
    for path in cases:
        for line in path.read_text(encoding="utf-8").splitlines():
            case = json.loads(line)
            history = case.get("history", [])
            out[case["case_id"]] = [len(t["text"].split()) for t in history if t.get("role") != "user"]
    return out


def replies(turn: TurnRows, before: list[int], ratio: float, most: int, *, conversation: bool) -> str:
    from reground.tools.signals.judge import SCALAR_NAMES, shipped_judge, sigmoid

    inputs = turn.inputs
    strength = inputs[:, SCALAR_NAMES.index("evidence_score")] + sigmoid(shipped_judge().sentence_logits(inputs))
    passage = inputs[:, SCALAR_NAMES.index("passage_rank")]
    order = np.argsort(-strength, kind="stable")
    best = order[0]
    picked = [best]
    if not conversation or not before:  # 'sentence': at most two of the best passage, at 0.9 of the best
        ratio, most, before = 0.9, 2, []
    target = float(np.median(before)) if before else float("inf")
    words = len(turn.texts[best].split())
    for i in order[1:]:
        if words >= target or len(picked) >= most or strength[i] < ratio * strength[best]:
            break
        if passage[i] == passage[best]:
            picked.append(i)
            words += len(turn.texts[i].split())
    return " ".join(turn.texts[i] for i in picked)


def measure(turns: Sequence[TurnRows], words: dict[str, list[int]]) -> dict[str, Any]:
    def mean_f1(**rule: Any) -> float:
        return round(
            float(np.mean([_f1(replies(t, words.get(t.case_id, []), **rule), t.gold_answer) for t in turns])), 4
        )

    rows: dict[str, Any] = {"turns": len(turns), "sentence": mean_f1(ratio=0.9, most=2, conversation=False)}
    for ratio in RATIOS:
        for most in MOST:
            rows[f"conversation ratio {ratio} at most {most}"] = mean_f1(ratio=ratio, most=most, conversation=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reground.evals.train.reply_length", description=__doc__)
    parser.add_argument("--cache", type=Path, required=True, help="the folder `reground judge train --cache` wrote")
    parser.add_argument(
        "--cases", type=Path, nargs="+", default=[DOC2DIAL / "cases_dev.jsonl", MTRAG / "cases_dev.jsonl"]
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the table here (JSON)")
    args = parser.parse_args(argv)
    words = assistant_words(args.cases)
    usable = [t for t in load_turns(args.cache / "doc2dial.npz") if len(t.texts) and t.gold_answer]
    validation = [t for t in usable if VALIDATION[0] <= _share(t.dial_id) < VALIDATION[1]]
    mtrag = [
        t
        for t in load_turns(args.cache / "mtrag.npz")
        if len(t.texts) and t.gold_answer and t.answerability in ("ANSWERABLE", "PARTIAL")
    ]
    table = {"doc2dial_validation": measure(validation, words), "mtrag_dev_answerable": measure(mtrag, words)}
    text = json.dumps(table, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
