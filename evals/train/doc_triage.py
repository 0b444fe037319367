"""Train and measure the documentation triage (tools/signals/doc_triage.py), leave-one-corpus-out.

    python -m reground.evals.train.doc_triage train --docs ../shared/data/techdocs/docs.jsonl \
        --cases ../shared/data/techdocs/cases_dev.jsonl --data-dir DIR --chat-model local:default

1. **Collect.** The graph runs LLM-free on every techdocs dev turn (all four classes), scoped to its collection;
   every answer unit of the turn's candidates is read (evals/train/unit_ranker.py's collector, kept whole); with
   `--chat-model`, once more with that model's rewrites of the follow-ups (both readings are fitted on).
2. **Per held-out collection**: the unit ranker is fitted on the other collection's answerable turns; with it each
   turn's passages are chosen as the graph chooses them (the three pages' chunks with the best units) and its
   features measured; the two heads are fitted on the other collection's turns (and on each of its answerable turns
   again with its gold pages' candidates taken out: a constructed unanswerable) and their thresholds calibrated
   there, on each training turn's probabilities from heads fitted without its own collection (abstain on at most
   `MAX_ANSWERABLE_ABSTAINED` and ask back on at most `MAX_ANSWERABLE_ASKED` of the answerable turns; answer at
   most `MAX_UNANSWERABLE_ANSWERED` of the unanswerable ones confidently): the hedge is a decision calibrated
   leave-one-corpus-out, not a default; then the held-out collection's turns are decided once, as triage decides
   (`graph_decision`). Their behaviour per class is the figure reported.
3. The shipped heads and thresholds are fitted on both collections (the shipped unit ranker likewise). Writes
   reground/data/units/doc_triage.json and evals/results/units/doc_triage.json.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from reground.evals.train.unit_ranker import Turn, collect_readings, collected_only, train_parser, trainer_options
from reground.evals.train.unit_ranker import fit as fit_ranker
from reground.tools.signals.judge import Head
from reground.tools.signals.units import FEATURE_NAMES as UNIT_FEATURES

MAX_ANSWERABLE_ABSTAINED = 0.0
MAX_ANSWERABLE_ASKED = 0.02
# Set on each turn's probability from heads that never saw its collection, so the share holds on a new collection
# (on in-sample probabilities 0.05 was needed and most answers hedged). With the held-words rule below, eight sets
# held out: UNANSWERABLE answered 0.125 (mean over collections) at 0.10, 0.156 at 0.15.
MAX_UNANSWERABLE_ANSWERED = 0.10
# The best unit's share of the question's words answers beside the head (tools/signals/doc_triage.py): eight sets
# held out, ANSWERABLE answered 0.424 (mean over collections) against 0.378 without it, UNANSWERABLE 0.125 / 0.094.
MAX_UNANSWERABLE_HELD_WORDS = 0.05
L2 = 1.0
STEPS = 2000
LEARNING_RATE = 0.1
PASSAGES = 3
ANSWERED = ("ANSWERABLE", "PARTIAL")
WEIGHTS = Path("reground/data/units/doc_triage.json")
SUMMARY = Path("evals/results/units/doc_triage.json")
# Per held-out collection, the unit ranker and triage fitted without it: what a leave-one-corpus-out run of the graph
# loads (REGROUND_DOC_MODELS=evals/results/units/loco/<collection>, tools/signals/units.py).
FOLD_MODELS = Path("evals/results/units/loco")
SECTION = UNIT_FEATURES.index("section_lexical")  # the unit rows' heading overlap (signals/units.py)
CONSTRUCTED = "#without-gold"  # the case id's mark of an answerable turn taken again without its gold pages


@dataclass
class Decided:
    case_id: str
    collection: str
    answerability: str
    decision: str


def without_gold(turn: Turn) -> Turn | None:
    """The same answerable turn with its gold pages' candidates taken out (a constructed unanswerable: the documents
    hold only what is near the answer), or None when no other candidate is left."""
    from dataclasses import replace

    keep = [i for i, number in enumerate(turn.passages) if turn.candidate_doc_ids[number - 1] not in turn.gold_doc_ids]
    if not keep or len(keep) == len(turn.passages):
        return None
    return replace(
        turn,
        case_id=f"{turn.case_id}{CONSTRUCTED}",
        answerability="UNANSWERABLE",
        units=[turn.units[i] for i in keep],
        rows=turn.rows[keep],
        labels=np.zeros(len(keep), dtype=np.float32),
        passages=[turn.passages[i] for i in keep],
        texts=[turn.texts[i] for i in keep],
    )


def with_constructed(turns: Sequence[Turn]) -> list[Turn]:
    """The turns, and each answerable one again without its gold pages (training data only)."""
    constructed = [without_gold(t) for t in turns if t.answerability in ANSWERED]
    return [*turns, *(t for t in constructed if t is not None)]


def turn_rows(turns: Sequence[Turn], ranker: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """Each turn's features, its passages chosen by the given unit ranker as rerank chooses them."""
    from dataclasses import replace

    from reground.tools.signals.answerability import coverage
    from reground.tools.signals.doc_triage import doc_triage_features, page_scores

    weights, mean, scale = ranker
    rows = []
    for turn in turns:
        scores = ((turn.rows - mean) / scale) @ weights
        units = [replace(u, unit_score=float(s)) for u, s in zip(turn.units, scores, strict=True)]
        best: dict[int, float] = {}
        for unit in units:
            best[unit.passage] = max(best.get(unit.passage, -math.inf), float(unit.unit_score or 0.0))
        kept = sorted(best, key=lambda n: -best[n])[:PASSAGES]
        passage_units = [u for u in units if u.passage in kept]
        covered, _ = coverage(turn.asked, [turn.candidate_texts[n - 1] for n in kept])
        pages = page_scores(units, turn.candidate_doc_ids)
        # The units' section_lexical (signals/units.py): heading_match's share, per unit's passage.
        held = [float(turn.rows[i, SECTION]) for i, unit in enumerate(turn.units) if unit.passage in kept]
        heading = max(held, default=0.0)
        rows.append(doc_triage_features(turn.asked, turn.history, passage_units, pages, covered, heading))
    return np.asarray(rows, dtype=np.float32)


def fit_head(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    z = (x - mean) / scale
    weights, bias = np.zeros(x.shape[1]), 0.0
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-(z @ weights + bias)))
        weights -= LEARNING_RATE * (z.T @ (p - y) / len(y) + L2 * weights / len(y))
        bias -= LEARNING_RATE * float((p - y).mean())
    return weights.astype(np.float32), bias, mean.astype(np.float32), scale.astype(np.float32)


def _quantile_at(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, int(share * len(ordered))))]) if ordered else 0.0


def fit_heads(turns: Sequence[Turn], rows: np.ndarray) -> tuple[Head, Head]:
    """(answerable head: ANSWERABLE and PARTIAL against UNANSWERABLE; underspecified head: UNDERSPECIFIED against the
    rest)."""
    classes = [t.answerability for t in turns]
    answerable = np.asarray([c in ANSWERED for c in classes], dtype=float)
    keep = np.asarray([c != "UNDERSPECIFIED" for c in classes])
    head_a = fit_head(rows[keep], answerable[keep])
    head_u = fit_head(rows, np.asarray([c == "UNDERSPECIFIED" for c in classes], dtype=float))
    return head_a, head_u


def unseen_collection_probabilities(turns: Sequence[Turn], rows: np.ndarray) -> tuple[list[float], list[float]]:
    """Each turn's two probabilities from heads fitted without its collection (in-sample with one collection): what
    the thresholds are calibrated on, since a collection the heads never saw is what they decide on. Calibrated on
    in-sample probabilities, the hedge band was most answerable turns of a new collection (techdocs dev: 0.64 of
    them hedged)."""
    from reground.tools.signals.judge import logistic

    collections = [t.collection for t in turns]
    p_a, p_u = [0.0] * len(turns), [0.0] * len(turns)
    for held in sorted(set(collections)):
        inside = [i for i, c in enumerate(collections) if c != held] or list(range(len(turns)))
        head_a, head_u = fit_heads([turns[i] for i in inside], rows[inside])
        for i, c in enumerate(collections):
            if c == held:
                p_a[i], p_u[i] = float(logistic(head_a, rows[i])), float(logistic(head_u, rows[i]))
    return p_a, p_u


def fit_triage(turns: Sequence[Turn], rows: np.ndarray) -> Any:
    """The heads fitted on every turn given, their thresholds calibrated on the turns' unseen-collection
    probabilities: abstain on at most MAX_ANSWERABLE_ABSTAINED and ask back on at most MAX_ANSWERABLE_ASKED of the
    answerable turns, answer at most MAX_UNANSWERABLE_ANSWERED of the unanswerable ones."""
    from reground.tools.signals.doc_triage import BEST_LEXICAL, DocTriage

    head_a, head_u = fit_heads(turns, rows)
    p_a, p_u = unseen_collection_probabilities(turns, rows)
    # The constructed unanswerables teach the heads; the thresholds are set on the turns as asked.
    real = [i for i, t in enumerate(turns) if not t.case_id.endswith(CONSTRUCTED)]
    p_a, p_u = [p_a[i] for i in real], [p_u[i] for i in real]
    classes = [turns[i].answerability for i in real]
    ans_a = [p for p, c in zip(p_a, classes, strict=True) if c in ANSWERED]
    unans_a = [p for p, c in zip(p_a, classes, strict=True) if c == "UNANSWERABLE"]
    ans_u = [p for p, c in zip(p_u, classes, strict=True) if c in ANSWERED]
    hedge = _quantile_at(ans_a, MAX_ANSWERABLE_ABSTAINED)
    answer = max(_quantile_at(unans_a, 1 - MAX_UNANSWERABLE_ANSWERED) + 1e-4, hedge)
    ask_back = _quantile_at(ans_u, 1 - MAX_ANSWERABLE_ASKED) + 1e-4
    # When the best unit holds the question's words, the reply is an answer: a raw feature, so its threshold is set
    # on the unanswerable turns as they are (answering at most MAX_UNANSWERABLE_HELD_WORDS of them by it).
    lexical = [float(rows[i, BEST_LEXICAL]) for i in real if turns[i].answerability == "UNANSWERABLE"]
    held_words = _quantile_at(lexical, 1 - MAX_UNANSWERABLE_HELD_WORDS) + 1e-4 if lexical else None
    return DocTriage(head_a, head_u, hedge, answer, ask_back, held_words)


def graph_decision(triage: Any, row: np.ndarray) -> str:
    """The decision triage takes on a row (nodes/triage.py): the heads', with an ask-back kept only when pages answer
    the question differently (doc_triage.pages_answer_differently)."""
    from reground.tools.signals.doc_triage import pages_answer_differently

    decision = str(triage.decide(row)[0])
    if decision == "clarify" and not pages_answer_differently(row):
        decision = str(triage.decide(row, may_ask_back=False)[0])
    return decision


def behaviour(decided: Sequence[Decided]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for label in sorted({d.answerability for d in decided}):
        group = [d for d in decided if d.answerability == label]
        out[label] = {"n": len(group)} | {
            k: round(sum(d.decision == k for d in group) / len(group), 3)
            for k in ("answer", "hedge", "abstain", "clarify")
        }
    return out


def train(
    docs: Path,
    cases: Path,
    *,
    data_dir: str | None,
    cache: Path | None = None,
    out: Path | None = None,
    chat_model_spec: str | None = None,
    folds: dict[str, dict[str, list[Turn]]] | None = None,
) -> dict[str, Any]:
    """Collect (or read the turns a previous run kept in `cache`), fit, measure, write: the shipped models by default;
    with `out`, the unit ranker and triage fitted on these cases into that folder (and their summary). Each fit reads
    every turn in each reading collected; each held-out figure is given per reading."""
    from reground.tools.signals.units import UnitRanker

    readings = collect_readings(
        docs, cases, data_dir=data_dir, chat_model_spec=chat_model_spec, answerable_only=False, cache=cache
    )
    turns = [t for reading in readings.values() for t in reading]
    held_out: dict[str, Any] = {}
    decided: dict[str, list[Decided]] = {name: [] for name in readings}
    for held in sorted({t.collection for t in turns}):
        fold_reading = (folds or {}).get(held, readings)  # the turns as this fold's chunk ranker chose candidates
        train_turns = [t for reading in fold_reading.values() for t in reading if t.collection != held]
        ranker = fit_ranker([t for t in train_turns if t.answerability in ANSWERED])
        taught = with_constructed(train_turns)
        triage = fit_triage(taught, turn_rows(taught, ranker))
        folder = (out or FOLD_MODELS.parent) / "loco" / held
        UnitRanker(*ranker).save(folder / "unit_ranker.json")
        triage.save(folder / "doc_triage.json")
        held_out[held] = {"trained_on": sorted({t.collection for t in train_turns})}
        for name, reading in fold_reading.items():
            test_turns = [t for t in reading if t.collection == held]
            fold = [
                Decided(t.case_id, t.collection, t.answerability, graph_decision(triage, row))
                for t, row in zip(test_turns, turn_rows(test_turns, ranker), strict=True)
            ]
            decided.setdefault(name, []).extend(fold)
            held_out[held][name] = behaviour(fold)
    ranker = fit_ranker([t for t in turns if t.answerability in ANSWERED])
    taught = with_constructed(turns)
    shipped = fit_triage(taught, turn_rows(taught, ranker))
    weights_path, summary_path = (out / "doc_triage.json", out / "summary.json") if out else (WEIGHTS, SUMMARY)
    if out:  # your own documentation: both models in one folder, for REGROUND_DOC_MODELS
        UnitRanker(*ranker).save(out / "unit_ranker.json")
    sha256 = shipped.save(weights_path)
    summary = {
        "model": {"weights": str(weights_path), "sha256": sha256, **shipped.to_json()},
        "data": {
            "docs": str(docs),
            "cases": str(cases),
            "turns": len(turns),
            "readings": {name: len(reading) for name, reading in readings.items()},
            "chat_model": chat_model_spec,
        },
        "calibration": {
            "max_answerable_abstained": MAX_ANSWERABLE_ABSTAINED,
            "max_answerable_asked_back": MAX_ANSWERABLE_ASKED,
            "max_unanswerable_answered": MAX_UNANSWERABLE_ANSWERED,
        },
        "leave_one_corpus_out": held_out,
        "leave_one_corpus_out_pooled": {name: behaviour(d) for name, d in decided.items()},
        "decisions": {name: [d.__dict__ for d in ds] for name, ds in decided.items()},
    }
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser, p = train_parser("python -m reground.evals.train.doc_triage", __doc__.split("\n")[0], folds=True)
    p.add_argument("--out", type=Path, default=None, help="write both models here (default: the shipped ones)")
    args = parser.parse_args(argv)
    if collected_only(args):
        return 0
    summary = train(args.docs, args.cases, out=args.out, **trainer_options(args))
    print(json.dumps({k: summary[k] for k in ("leave_one_corpus_out", "leave_one_corpus_out_pooled")}, indent=1))
    print(f"wrote {summary['model']['weights']} and its summary", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
