"""Train and measure the unit ranker (tools/signals/units.py) on documentation with code, leave-one-corpus-out.

    python -m reground.evals.train.unit_ranker train --docs ../shared/data/techdocs/docs.jsonl \
        --cases ../shared/data/techdocs/cases_dev.jsonl --data-dir DIR --chat-model local:default

1. **Collect.** The graph runs LLM-free (scripted model, as evals/train/judge.py) on every techdocs dev turn, scoped to
   its collection; every answer unit of the turn's candidates is read as rerank reads it (lexical overlap, cosines).
   With `--chat-model` (`reground llm serve` up) every turn is read a second time with that model's rewrites of the
   follow-ups, as the graph runs when an LLM is up; each fit reads both readings, each figure is given per reading.
2. **Label.** A unit is a positive when it holds every `must_contain` string of the turn (the exact call, flag or
   value a useful reply gives); turns with no such unit among the candidates teach nothing and are left out.
3. **Fit** a conditional logit (softmax over a turn's units, L2), standardised inputs, fixed steps.
4. **Measure leave-one-corpus-out**: fitted on one collection (fastapi or uv), measured on the other: the share of
   answerable turns whose best unit, the units a reply takes (`EVIDENCE.unit_reply_units`) and the three best
   passages (by their best unit) hold every `must_contain`, beside the graph's ranking without it (the judge and the
   hand-made score). The shipped weights are then fitted on both. Writes reground/data/units/unit_ranker.json,
   evals/results/units/summary.json and the model card (reground/data/units/MODEL_CARD.md).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
from reground.evals.runs.usefulness import holds_every
from reground.tools.tuning.turn import EVIDENCE

L2 = 0.1
STEPS = 400
LEARNING_RATE = 0.5
PASSAGES = 3
WEIGHTS = Path("reground/data/units/unit_ranker.json")
SUMMARY = Path("evals/results/units/summary.json")
CARD = Path("reground/data/units/MODEL_CARD.md")
LLM_FREE = "llm_free"  # the turns as the graph reads them without an LLM (follow-ups unrewritten)
REWRITTEN = "rewritten"  # ... and with a chat model's rewrites of the follow-ups
Item = TypeVar("Item")


@dataclass
class Turn:
    """One turn: its candidates' units (feature rows), which hold the answer, and where each sits."""

    case_id: str
    collection: str
    answerability: str
    question: str  # what the turn's units were read against (the standalone question, when there is one)
    asked: str  # the message as the user wrote it (what the documentation triage reads)
    history: list[dict[str, str]]
    units: list[Any]  # the candidates' units (signals/evidence.Evidence), in the graph's ranking without the ranker
    rows: np.ndarray
    labels: np.ndarray
    passages: list[int]  # per unit, its candidate's number
    baseline: np.ndarray  # the graph's ranking without the unit ranker (the hand-made score + the judge)
    texts: list[str]
    candidate_texts: list[str]
    candidate_doc_ids: list[str]
    must_contain: list[str]
    gold_doc_ids: list[str]


def collect_turns(
    docs: Path,
    cases: Path,
    *,
    data_dir: str | None,
    answerable_only: bool = True,
    overrides: dict[str, Any] | None = None,
    chat_model_spec: str | None = None,
) -> list[Turn]:
    """Run the graph LLM-free on every turn (only the answerable ones with `must_contain`, by default) and read its
    candidates' units. `chat_model_spec`: run it with that model instead (its rewrites of follow-ups)."""
    from langgraph.checkpoint.memory import InMemorySaver
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.llm_free import llm_free_graph
    from reground.tools.services import Services
    from reground.tools.signals.reading import read_turn
    from reground.tools.signals.units import unit_feature_rows

    settings = {**(overrides or {}), "evidence": {"unit_ranking": "off"}}
    run = llm_free_graph(
        docs, data_dir=data_dir, checkpointer=InMemorySaver(), overrides=settings, chat_model_spec=chat_model_spec
    )
    services = Services(store=run.store)
    retriever = services.retriever(run.context)
    judge, reader = services.judge(run.context), services.reader()
    weights = run.context.evidence_weights()
    out: list[Turn] = []
    for case in load_cases(cases):
        answerable = case.answerability in ("ANSWERABLE", "PARTIAL") and bool(case.must_contain)
        if answerable_only and not answerable:
            continue
        state = run.final_state(case, scoped=True)
        candidates = list(state.get("candidates", []))
        asked = str(state.get("question", case.question))
        question = str(state.get("standalone_question") or asked)
        history = list(state.get("history", []))
        units = read_turn(
            question, asked, history, candidates, retriever.embed, weights, judge=judge, reader=reader
        ).evidence
        if not units:
            continue
        out.append(
            Turn(
                case_id=case.case_id,
                collection=case.collection or "",
                answerability=case.answerability or "ANSWERABLE",
                question=question,
                asked=asked,
                history=history,
                units=units,
                rows=unit_feature_rows(question, units, candidates),
                labels=np.asarray(
                    [answerable and holds_every(u.text, case.must_contain) for u in units], dtype=np.float32
                ),
                passages=[u.passage for u in units],
                baseline=-np.arange(len(units), dtype=np.float32),  # read_turn's order: the graph's ranking
                texts=[u.text for u in units],
                candidate_texts=[c["text"] for c in candidates],
                candidate_doc_ids=[c["doc_id"] for c in candidates],
                must_contain=list(case.must_contain),
                gold_doc_ids=list(case.gold_doc_ids),
            )
        )
    return out


def collect_readings(
    docs: Path,
    cases: Path,
    *,
    data_dir: str | None,
    chat_model_spec: str | None,
    answerable_only: bool = True,
    cache: Path | None = None,
) -> dict[str, list[Turn]]:
    """Every turn as the graph reads it without an LLM and, with `chat_model_spec`, with that model's rewrites of the
    follow-ups too: the units' cosines and overlaps move with the rewrite, so models fitted on one reading alone
    misjudge the other (the graph runs with the local LLM when one is up, without it otherwise)."""
    return readings_cached(
        cache,
        chat_model_spec,
        lambda spec: collect_turns(
            docs, cases, data_dir=data_dir, answerable_only=answerable_only, chat_model_spec=spec
        ),
    )


def readings_cached(
    cache: Path | None, chat_model_spec: str | None, collect: Callable[[str | None], list[Item]]
) -> dict[str, list[Item]]:
    """The documentation trainers' collection (this module's turns, chunk_ranker.py's paragraph pools): read
    without an LLM and, with `chat_model_spec`, with that model's rewrites; kept in `cache` and read back from it."""
    if cache is not None and cache.exists():
        return read_readings(cache)
    readings = {LLM_FREE: collect(None)}
    if chat_model_spec:
        readings[REWRITTEN] = collect(chat_model_spec)
    if cache is not None:
        cache.write_bytes(pickle.dumps(readings))
    return readings


def read_readings(cache: Path) -> dict[str, Any]:
    """What a trainer's `--cache` kept (a clear error when it is not there)."""
    if not cache.is_file():
        raise FileNotFoundError(
            f"no collected turns at {cache}: collect them first (`train ... --collect-only --cache`)"
        )
    loaded: dict[str, Any] = pickle.loads(cache.read_bytes())
    return loaded


def training_data(
    docs: Path, cases: Path, chat_model_spec: str | None, readings: Mapping[str, Sequence[Labelled]], item: str
) -> dict[str, Any]:
    """A ranker summary's `data`: what it was fitted on, per reading, and what its positives are."""
    return {
        "docs": str(docs),
        "cases": str(cases),
        "chat_model": chat_model_spec,
        "readings": {name: len(reading) for name, reading in readings.items()},
        f"turns_with_a_holding_{item}": {
            name: sum(bool(t.labels.any()) for t in reading) for name, reading in readings.items()
        },
        "label": f"a {item} holding every must_contain string of its turn",
    }


def named_weights(features: Sequence[str], weights: np.ndarray) -> dict[str, float]:
    return {name: round(float(w), 4) for name, w in zip(features, weights, strict=True)}


class Labelled(Protocol):
    """A turn's items to rank (units here, paragraphs in evals/train/chunk_ranker.py): feature rows and labels."""

    rows: np.ndarray
    labels: np.ndarray


def standardiser(turns: Sequence[Labelled]) -> tuple[np.ndarray, np.ndarray]:
    rows = np.concatenate([t.rows for t in turns])
    return rows.mean(axis=0), rows.std(axis=0) + 1e-6


def fit(turns: Sequence[Labelled]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, mean, scale) of the conditional logit over each turn's items (its holding ones share the target)."""
    mean, scale = standardiser(turns)
    taught = [t for t in turns if t.labels.any()]
    weights = np.zeros(mean.shape[0])
    for _ in range(STEPS):
        gradient = np.zeros_like(weights)
        for turn in taught:
            z = (turn.rows - mean) / scale
            logits = z @ weights
            p = np.exp(logits - logits.max())
            p /= p.sum()
            gradient += z.T @ (p - turn.labels / turn.labels.sum())
        weights -= LEARNING_RATE * (gradient / max(len(taught), 1) + L2 * weights)
    return weights, mean, scale


def _standing(turn: Turn) -> list[int]:
    from reground.tools.signals.evidence import stands_as_reply

    return [i for i, text in enumerate(turn.texts) if stands_as_reply(text) and not text.rstrip().endswith("?")]


def measure(turns: Sequence[Turn], scores: Sequence[np.ndarray]) -> dict[str, float]:
    """Shares of the turns whose best unit, the units a reply takes and three best passages hold every must_contain."""
    top1 = top2 = passages = 0
    for turn, score in zip(turns, scores, strict=True):
        order = sorted(_standing(turn), key=lambda i: -score[i])
        top1 += holds_every(" ".join(turn.texts[i] for i in order[:1]), turn.must_contain)
        top2 += holds_every(" ".join(turn.texts[i] for i in order[: EVIDENCE.unit_reply_units]), turn.must_contain)
        best: dict[int, float] = {}
        for i, number in enumerate(turn.passages):
            best[number] = max(best.get(number, -np.inf), float(score[i]))
        kept = sorted(best, key=lambda n: -best[n])[:PASSAGES]
        passages += holds_every(" ".join(turn.candidate_texts[n - 1] for n in kept), turn.must_contain)
    n = max(len(turns), 1)
    return {"turns": len(turns), "best_unit": top1 / n, "best_reply_units": top2 / n, "three_passages": passages / n}


Readings = dict[str, list[Turn]]


def answerable(readings: Mapping[str, Sequence[Turn]]) -> Readings:
    """The turns a unit ranker learns from and is measured on: answerable, with `must_contain`."""
    return {
        name: [t for t in reading if t.answerability in ("ANSWERABLE", "PARTIAL") and t.must_contain]
        for name, reading in readings.items()
    }


def fold_readings(specs: Sequence[str]) -> dict[str, Readings]:
    """`HELD=CACHE` pairs: per held-out collection, the turns collected with the chunk ranker fitted without it
    (`REGROUND_DOC_MODELS=evals/results/units/loco/HELD ... train --collect-only --cache CACHE`), so that each fold's
    candidates are chosen as its graph run chooses them."""
    folds: dict[str, Readings] = {}
    for spec in specs:
        held, _, path = spec.partition("=")
        if not held or not path:
            raise ValueError(f"--fold-cache takes HELD=PATH, not {spec!r}")
        folds[held] = read_readings(Path(path))
    return folds


class Ranked(Labelled, Protocol):
    """What a leave-one-corpus-out fold reads of a turn: its collection and the graph's ranking without the model."""

    collection: str
    baseline: np.ndarray


Fitted = Callable[[str, np.ndarray, np.ndarray, np.ndarray], None]  # (held-out collection, weights, mean, scale)


def leave_one_corpus_out(
    readings: Mapping[str, Sequence[Any]],
    folds: Mapping[str, Mapping[str, Sequence[Any]]] | None = None,
    *,
    score: Callable[[Sequence[Any], list[np.ndarray]], dict[str, float]] | None = None,
    names: tuple[str, str] = ("unit_ranker", "without_it"),
    kept: Callable[[Any], Mapping[str, Sequence[Any]]] | None = None,
    fitted: Fitted | None = None,
) -> dict[str, Any]:
    """Per held-out collection: fitted on every reading of the other collection's turns, measured on each reading
    of the held-out one (`folds`: that collection's own collection of turns, where given), by `score` (this
    module's `measure`) with the model and without it (`names`). `kept`: the turns a fit reads (the answerable ones,
    by default); `fitted`: given each fold's model (evals/train/chunk_ranker.py saves them)."""
    score_with = score or measure
    keep = kept or answerable
    out: dict[str, Any] = {}
    for held in sorted({t.collection for reading in readings.values() for t in reading}):
        fold = keep((folds or {}).get(held, readings))
        turns: list[Ranked] = [t for reading in fold.values() for t in reading]
        weights, mean, scale = fit([t for t in turns if t.collection != held])
        if fitted is not None:
            fitted(held, weights, mean, scale)
        out[held] = {"trained_on": sorted({t.collection for t in turns if t.collection != held})}
        for name, reading in fold.items():
            test = [t for t in reading if t.collection == held]
            out[held][name] = {
                names[0]: score_with(test, [((t.rows - mean) / scale) @ weights for t in test]),
                names[1]: score_with(test, [t.baseline for t in test]),
            }
    return out


def train(
    docs: Path,
    cases: Path,
    *,
    data_dir: str | None,
    chat_model_spec: str | None = None,
    cache: Path | None = None,
    folds: dict[str, Readings] | None = None,
) -> dict[str, Any]:
    from reground.tools.signals.units import FEATURE_NAMES, UnitRanker

    collected = collect_readings(
        docs, cases, data_dir=data_dir, chat_model_spec=chat_model_spec, answerable_only=False, cache=cache
    )
    readings = answerable(collected)
    turns = [t for reading in readings.values() for t in reading]
    held_out = leave_one_corpus_out(readings, folds)
    weights, mean, scale = fit(turns)
    sha256 = UnitRanker(weights=weights, mean=mean, scale=scale).save(WEIGHTS)
    summary = {
        "model": {"weights": str(WEIGHTS), "sha256": sha256, "features": list(FEATURE_NAMES), "l2": L2, "steps": STEPS},
        "data": training_data(docs, cases, chat_model_spec, readings, "unit"),
        "leave_one_corpus_out": held_out,
        "weights": named_weights(FEATURE_NAMES, weights),
    }
    SUMMARY.parent.mkdir(parents=True, exist_ok=True)
    SUMMARY.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    CARD.write_text(model_card(summary), encoding="utf-8")
    return summary


def model_card(summary: dict[str, Any]) -> str:
    rows = []
    for held, entry in summary["leave_one_corpus_out"].items():
        for reading in summary["data"]["readings"]:
            with_it, without = entry[reading]["unit_ranker"], entry[reading]["without_it"]
            for key in ("best_unit", "best_reply_units", "three_passages"):
                rows.append(
                    f"| {held} ({with_it['turns']} turns) | {reading} | {key} | {without[key]:.3f} | "
                    f"**{with_it[key]:.3f}** |"
                )
    chat_model = summary["data"]["chat_model"]
    with_llm = f",\n  `rewritten` with the local LLM's ({chat_model}) rewrites of the follow-ups"
    rewritten = with_llm if chat_model else " (the only reading: no LLM rewrote the follow-ups)"
    weights = ", ".join(f"{k} {v:+.2f}" for k, v in summary["weights"].items())
    return f"""# The unit ranker

A linear scorer over a turn's answer units (a sentence with the code block or table it introduces), trained here on
the development conversations of the documentation sets in its data (the turns of every collection of
`{summary["data"]["cases"]}`) to rank first the unit that holds the exact call, command or value a useful reply gives
(`tools/signals/units.py`). Inputs: {", ".join(summary["model"]["features"])}. Weights (standardised inputs):
{weights}.

- Weights: `{summary["model"]["weights"]}`, sha256 `{summary["model"]["sha256"]}`.
- Data: the answerable turns in each reading ({summary["data"]["readings"]}; with a holding unit among their
  candidates: {summary["data"]["turns_with_a_holding_unit"]}): `llm_free` as the graph reads a turn without an
  LLM{rewritten}. Label: {summary["data"]["label"]}.
- Reproduce: `python -m reground.evals.train.loco ship` (the eight techdocs and techdocs_wide sets: it splits them,
  reads every turn once and calls `python -m reground.evals.train.unit_ranker train --docs ... --cases ...
  --cache ...`; see evals/README.md, "Documentation with code").
- Used when the candidates hold a code block or a table (`evidence.unit_ranking="auto"`); not trained or measured on
  prose-only collections, which keep the judge's ranking.

Leave-one-corpus-out (fitted on the other collections; share of the held-out collection's answerable turns whose
units hold every `must_contain`; "without" is the graph's ranking by the judge and the hand-made score):

| held out | reading | measure | without | unit ranker |
|---|---|---|---|---|
{chr(10).join(rows)}
"""


def train_parser(
    prog: str, description: str, *, folds: bool = False
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The documentation trainers' command line (this module's, evals/train/doc_triage.py's and chunk_ranker.py's):
    the parser and its `train` subcommand, with the arguments they all read (`folds`: and the per-fold turns of the
    two that read answer units)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="collect, fit leave-one-corpus-out, write the weights and summary")
    p.add_argument("--docs", required=True, type=Path)
    p.add_argument("--cases", required=True, type=Path)
    p.add_argument("--data-dir", default=None)
    p.add_argument(
        "--chat-model",
        default=None,
        help="also read every turn with this model's rewrites (e.g. local:default, with `reground llm serve` up)",
    )
    p.add_argument("--cache", type=Path, default=None, help="keep the collected turns here and reuse them")
    if not folds:
        return parser, p
    p.add_argument("--collect-only", action="store_true", help="collect the turns into --cache and stop")
    p.add_argument(
        "--fold-cache",
        action="append",
        default=[],
        metavar="HELD=CACHE",
        help="the turns a held-out collection's fold is fitted and measured on (collected with its chunk ranker)",
    )
    return parser, p


def trainer_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `train` that the documentation trainers' shared command line gives."""
    return {
        "data_dir": args.data_dir,
        "chat_model_spec": args.chat_model,
        "cache": args.cache,
        "folds": fold_readings(args.fold_cache),
    }


def collected_only(args: argparse.Namespace) -> bool:
    """`--collect-only`: collect every turn into `--cache` (the trainers' shared first step) and report it."""
    if not args.collect_only:
        return False
    if args.cache is None:
        raise SystemExit("--collect-only needs --cache")
    readings = collect_readings(
        args.docs,
        args.cases,
        data_dir=args.data_dir,
        chat_model_spec=args.chat_model,
        answerable_only=False,
        cache=args.cache,
    )
    print(f"collected { ({name: len(r) for name, r in readings.items()}) } turns into {args.cache}", file=sys.stderr)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser, _ = train_parser("python -m reground.evals.train.unit_ranker", __doc__.split("\n")[0], folds=True)
    args = parser.parse_args(argv)
    if collected_only(args):
        return 0
    summary = train(args.docs, args.cases, **trainer_options(args))
    print(json.dumps(summary["leave_one_corpus_out"], indent=1))
    print(f"wrote {WEIGHTS}, {SUMMARY}, {CARD}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
