"""Leave-one-corpus-out over every documentation set: each fitted part trained without collection X, the graph on X.

    python -m reground.evals.train.loco run --out evals/results/techdocs_loco8 [--chat-model local:default] \
        [--collections fastapi,uv] [--skip-train] [--work .reground-data/loco8] [--data-dir DIR] [--set F=V]

1. **Split.** The documentation sets (`--sets`, default `$DATA/techdocs` and `$DATA/techdocs_wide`: eight collections)
   are written one collection a file (`WORK/sets/X.docs.jsonl`, `X.cases.jsonl`), so that each is ingested into a
   collection of its own once (the eval store is named by the file's content, so reruns reuse it).
2. **Collect** (cached under `WORK/cache/`, keyed by the graph's code and the collection's files, so a code change
   collects again): every turn as the graph reads it without an LLM and, with `--chat-model`, with that model's
   rewrites of follow-ups: the answer units of its candidates (evals/train/unit_ranker.py) and the paragraph pools
   (evals/train/chunk_ranker.py).
3. **Train without X**, for every X at once: the documentation trainers are called as they are
   (`python -m reground.evals.train.doc_triage train --cache ... --out WORK/models`: the unit ranker, both triage
   heads and their thresholds per fold; the chunk ranker likewise), each writing `WORK/models/loco/X/`, and the
   models fitted on every collection into `WORK/models/` (`--ship` copies those into the package; see below).
4. **Answer X** with `REGROUND_DOC_MODELS=WORK/models/loco/X` (`reground eval answers --systems reground`, every turn
   of X, in a process of its own so no model of another fold is cached), with the chat model when one is given,
   else the scripted one (no LLM: follow-ups are not rewritten, replies are extracted as by default).
5. **Score** per collection, with the mean over collections and the worst: ANSWERABLE useful (holds every
   `must_contain`), stated as an answer (not a hedge, abstention or ask-back), asked back, its three passages holding
   every `must_contain`; UNANSWERABLE answered confidently; UNDERSPECIFIED asked back; PARTIAL useful; follow-up
   replies equal to the previous turn's reply; replies with site markup; cautions (none of these sets is poisoned,
   so every caution is a false one); the median turn. Writes OUT/summary.json, OUT/summary.md and OUT/X/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SETS = (Path("../shared/data/techdocs"), Path("../shared/data/techdocs_wide"))
WORK = Path(".reground-data/loco8")
# What a collected turn depends on: the graph's code (a change there collects again).
CODE_DIRS = ("tools", "nodes", "graph", "prompts")
CODE_FILES = ("evals/train/unit_ranker.py", "evals/train/chunk_ranker.py", "evals/runs/llm_free.py")
LLM_FREE = "llm_free"
REWRITTEN = "rewritten"
ANSWERED = ("answer",)  # behaviour_of's "answer": the graph's answer or partial (not a hedge, abstention, ask-back)
PASSAGES = 3
TRAINERS = ("doc_triage", "chunk_ranker")  # each writes its folds under --out/loco/X; doc_triage the unit ranker too


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_if_changed(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write the rows unless the file already holds them (the eval store is named by the file's content)."""
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def split_sets(sets: Sequence[Path], work: Path) -> dict[str, tuple[Path, Path]]:
    """{collection: (docs file, cases file)}, one collection a file, from every set's docs.jsonl and
    cases_dev.jsonl; a clear error for a set without them or a case whose collection has no documents."""
    docs: dict[str, list[dict[str, Any]]] = {}
    cases: dict[str, list[dict[str, Any]]] = {}
    for folder in sets:
        for name in ("docs.jsonl", "cases_dev.jsonl"):
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder / name} is missing: --sets takes folders holding {name}")
        for row in _read_jsonl(folder / "docs.jsonl"):
            docs.setdefault(str(row["collection"]), []).append(row)
        for row in _read_jsonl(folder / "cases_dev.jsonl"):
            cases.setdefault(str(row["collection"]), []).append(row)
    missing = sorted(set(cases) - set(docs))
    if missing:
        raise ValueError(f"cases name collections with no documents: {missing}")
    out: dict[str, tuple[Path, Path]] = {}
    for collection in sorted(cases):
        paths = (work / "sets" / f"{collection}.docs.jsonl", work / "sets" / f"{collection}.cases.jsonl")
        _write_if_changed(paths[0], docs[collection])
        _write_if_changed(paths[1], cases[collection])
        out[collection] = paths
    return out


def code_key(root: Path = Path()) -> str:
    """A digest of the code a collected turn depends on."""
    digest = hashlib.sha1()
    files = sorted(p for d in CODE_DIRS for p in (root / d).rglob("*.py")) + [root / f for f in CODE_FILES]
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _file_key(*paths: Path) -> str:
    digest = hashlib.sha1()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def _cached(path: Path, collect: Any, *, reuse: bool = False) -> Any:
    """The value kept at `path`, else collected and kept there (`reuse`: the newest kept for another code key)."""
    if reuse and not path.is_file():
        stem = path.name.rsplit("-", 1)[0]
        kept = sorted(path.parent.glob(f"{stem}-*.pkl"), key=lambda p: p.stat().st_mtime)
        path = kept[-1] if kept else path
    if path.is_file():
        return pickle.loads(path.read_bytes())
    started = time.monotonic()
    value = collect()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(pickle.dumps(value))
    tmp.replace(path)
    print(f"collected {path.name} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return value


def collect(
    split: Mapping[str, tuple[Path, Path]],
    work: Path,
    *,
    data_dir: str | None,
    chat_model: str | None,
    reuse: bool = False,
    overrides: Sequence[str] = (),
) -> tuple[Path, Path]:
    """Every collection's turns (units) and paragraph pools in each reading, cached per collection and reading;
    merged into the two caches the trainers read (`--cache`)."""
    from reground.evals.train.chunk_ranker import collect as collect_pools
    from reground.evals.train.unit_ranker import collect_turns
    from reground.nodes.context import parse_overrides

    settings = parse_overrides(list(overrides))  # the units are read from the candidates these settings choose
    key = code_key() + (hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:6] if settings else "")
    readings = {LLM_FREE: None, **({REWRITTEN: chat_model} if chat_model else {})}
    units: dict[str, list[Any]] = {name: [] for name in readings}
    pools: dict[str, list[Any]] = {name: [] for name in readings}
    for collection, (docs, cases) in split.items():
        files = _file_key(docs, cases)
        for name, spec in readings.items():
            stem = f"{collection}-{name}{'-' + spec.replace(':', '_') if spec else ''}-{files}-{key}"
            units[name] += _cached(
                work / "cache" / f"units-{stem}.pkl",
                lambda d=docs, c=cases, s=spec: collect_turns(
                    d, c, data_dir=data_dir, answerable_only=False, chat_model_spec=s, overrides=settings
                ),
                reuse=reuse,
            )
            pools[name] += _cached(
                work / "cache" / f"pools-{stem}.pkl",
                lambda d=docs, c=cases, s=spec: collect_pools(d, c, data_dir=data_dir, chat_model_spec=s),
                reuse=reuse,
            )
    merged = (work / "cache" / f"units-all-{key}.pkl", work / "cache" / f"pools-all-{key}.pkl")
    merged[0].write_bytes(pickle.dumps(units))
    merged[1].write_bytes(pickle.dumps(pools))
    return merged


SCORER_WORK = Path(".reground-data/scorer")  # evals/train/unit_scorer.py pairs --out: the weak pairs, their features


def scorer_folds(
    units: Path,
    split_names: Sequence[str],
    models: Path,
    *,
    weak: Path | None,
    sources: Sequence[str] | None = None,
    write_models: bool = True,
) -> tuple[Path, dict[str, Path]]:
    """The unit scorer per fold (its head fitted on the weak pairs and the other collections' labelled pairs; into
    MODELS/loco/X/) and on all (MODELS/), and the collected turns with the scorer's logit as the unit ranker's last
    input, each turn's from the head fitted without its collection: (that cache, {} as no fold needs its own)."""
    from reground.evals.train import unit_scorer as us
    from reground.tools.signals.units import scorer_column, scorer_reads

    readings: dict[str, list[Any]] = pickle.loads(units.read_bytes())
    turns = [t for reading in readings.values() for t in reading]
    labelled = us.labelled_pairs(turns)
    weak_pairs: list[Any] = []
    if weak is not None:
        weak_pairs = [us.Pair(**row) for row in _read_jsonl(weak / "weak_pairs.jsonl")]
        weak_pairs = [p for p in weak_pairs if sources is None or p.source in sources]
    reader = us.PooledReader(us.body_with_pooled(us.READER_ONNX, units.parent / "body.onnx"))
    reads = [scorer_reads(t.rows) for t in turns]  # the units the scorer reads, as at run time
    every_unit = [
        us.Pair(t.question, t.texts[i], 0.0, "", "unit", t.collection)
        for t, r in zip(turns, reads, strict=True)
        for i in r
    ]
    unit_vectors = us.read_features(every_unit, reader, units.parent / "unit_features.npz")
    by_pair = {(p.question, p.text): unit_vectors[i] for i, p in enumerate(every_unit)}
    weak_features = (
        us.read_features(weak_pairs, reader, weak / "features.npz") if weak is not None else np.zeros((0, 384))
    )
    pairs = [*labelled, *weak_pairs]
    features = np.concatenate([np.stack([by_pair[(p.question, p.text)] for p in labelled]), weak_features])
    offsets = np.cumsum([0, *(len(r) for r in reads)])

    heads: dict[frozenset[str], tuple[np.ndarray, float]] = {}

    def head(without: frozenset[str]) -> tuple[np.ndarray, float]:
        """The head fitted on every pair but those of the `without` collections (kept: each is fitted once)."""
        if without not in heads:
            heads[without] = us.fit_pairs(pairs, features, lambda p: p.collection not in without)
        return heads[without]

    def scored() -> dict[str, list[Any]]:
        """The turns with the scorer's input, each from the head fitted without its own collection (out of fold: a
        held-out collection's turns are read by its fold's scorer, and the unit ranker is fitted on inputs from
        scorers that had not seen the turns either, so it does not learn to trust a scorer on its own pairs)."""
        from dataclasses import replace

        out: dict[str, list[Any]] = {}
        k = 0
        for name, reading in readings.items():
            out[name] = []
            for turn in reading:
                weights, bias = head(frozenset({turn.collection}))
                logits = unit_vectors[offsets[k] : offsets[k + 1]] @ weights + bias
                column = scorer_column(turn.rows, reads[k], logits)
                out[name].append(replace(turn, rows=np.column_stack([turn.rows, column]).astype(np.float32)))
                k += 1
        return out

    for held in split_names if write_models else ():
        us.with_head(us.READER_ONNX, models / "loco" / held / "unit_scorer-int8.onnx", *head(frozenset({held})))
    if write_models:
        us.with_head(us.READER_ONNX, models / "unit_scorer-int8.onnx", *head(frozenset()))
    variant = hashlib.sha1(json.dumps([str(weak), sorted(sources or [])]).encode()).hexdigest()[:8]
    everything = units.parent / f"units-scored-{variant}.pkl"  # one per weak-pair choice: studies run side by side
    everything.write_bytes(pickle.dumps(scored()))
    folds: dict[str, Path] = {}
    return everything, folds


def combined_files(split: Mapping[str, tuple[Path, Path]], work: Path) -> tuple[Path, Path]:
    """Every collection's documents and cases in one file each: what the trainers' summaries name."""
    docs = [row for d, _ in split.values() for row in _read_jsonl(d)]
    cases = [row for _, c in split.values() for row in _read_jsonl(c)]
    paths = (work / "sets" / "all.docs.jsonl", work / "sets" / "all.cases.jsonl")
    _write_if_changed(paths[0], docs)
    _write_if_changed(paths[1], cases)
    return paths


def _run(command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    print("$ " + " ".join(command), file=sys.stderr)
    subprocess.run(command, check=True, env={**os.environ, **(env or {})})


def train_folds(
    caches: tuple[Path, Path],
    files: tuple[Path, Path],
    models: Path,
    *,
    data_dir: str | None,
    unit_folds: Mapping[str, Path] | None = None,
) -> None:
    """Every fold's models (fitted without its collection) into MODELS/loco/X, and those fitted on all into MODELS:
    each trainer called through its own command line (`unit_folds`: per held-out collection, the turns its fold of
    the unit ranker and triage reads, when they differ by fold: the fold's unit scorer's logits)."""
    units, pools = caches
    for trainer, cache in zip(TRAINERS, (units, pools), strict=True):
        command = [sys.executable, "-m", f"reground.evals.train.{trainer}", "train", "--docs", str(files[0])]
        command += ["--cases", str(files[1]), "--cache", str(cache), "--out", str(models)]
        if trainer == "doc_triage":
            command += [f"--fold-cache={held}={path}" for held, path in (unit_folds or {}).items()]
        _run(command + (["--data-dir", data_dir] if data_dir else []))


def units_held_out(units: Path, unit_folds: Mapping[str, Path] | None) -> dict[str, Any]:
    """The unit ranker's leave-one-corpus-out figures on the collected turns (evals/train/unit_ranker.py's
    measure: the best unit, the reply's units and the three passages holding every `must_contain`), per collection
    and reading, with the pooled share per reading."""
    from reground.evals.train.unit_ranker import answerable, leave_one_corpus_out, read_readings

    folds = {held: read_readings(path) for held, path in (unit_folds or {}).items()}
    per = leave_one_corpus_out(answerable(read_readings(units)), folds or None)
    pooled: dict[str, dict[str, float]] = {}
    for fold in per.values():
        for reading, figures in fold.items():
            if reading == "trained_on":
                continue
            entry = pooled.setdefault(reading, {"turns": 0})
            n = figures["unit_ranker"]["turns"]
            entry["turns"] += n
            for key in ("best_unit", "best_reply_units", "three_passages"):
                entry[key] = entry.get(key, 0.0) + figures["unit_ranker"][key] * n
                entry[f"{key}_without"] = entry.get(f"{key}_without", 0.0) + figures["without_it"][key] * n
    for entry in pooled.values():
        for key in [k for k in entry if k != "turns"]:
            entry[key] = round(entry[key] / max(entry["turns"], 1), 4)
    return {"pooled": pooled, "per_collection": per}


def scripted_model() -> Any:
    """The chat model of a run without an LLM (evals/runs/llm_free.py's): replies extracted, follow-ups kept."""
    from reground.testing.fake_chat import ScriptedChatModel, first_passage_reply

    return ScriptedChatModel(script={"answer": [first_passage_reply]})


def answer_fold(args: argparse.Namespace) -> int:
    """`eval answers --systems reground` over every turn of one collection, in this process (the caller sets
    REGROUND_DOC_MODELS to the fold's models)."""
    from reground.evals.runs.answers import run_answers_eval
    from reground.nodes.context import parse_overrides

    store = None if args.reingest else existing_store(args.docs, args.data_dir)
    run_answers_eval(
        args.docs,
        args.cases,
        systems="reground",
        limit=None,
        seed=None,
        collection=args.collection,
        out_dir=args.out,
        chat_model_spec=args.chat_model or "local:default",
        chat_model=None if args.chat_model else scripted_model(),
        data_dir=args.data_dir,
        context_overrides={**parse_overrides(args.set), **({"collection": store.collection} if store else {})},
        store=store,
    )
    return 0


def existing_store(docs: Path, data_dir: str | None) -> Any:
    """The collection the turns were collected from, as it is (None when it was never ingested: `eval answers`
    ingests it then). Not ingested again: another chunking of the same pages would answer from other chunks than
    the fold's models were fitted on, and re-embedding a collection takes minutes."""
    from reground.evals.data.datasets import EVAL_CHUNK_TOKENS
    from reground.evals.runs.retrieval import collection_name
    from reground.tools.stores.store import PassageStore
    from reground.tools.stores.vector_store import CollectionNotFoundError

    try:
        return PassageStore.open(collection_name(docs, EVAL_CHUNK_TOKENS), data_dir=data_dir)
    except CollectionNotFoundError:
        return None


# --- figures ------------------------------------------------------------------------------------------------------

# (name, higher is better): the per-collection figures, in the order the table shows them.
FIGURES: tuple[tuple[str, bool], ...] = (
    ("answerable_useful", True),
    ("answerable_stated", True),
    ("answerable_asked_back", False),
    ("answerable_three_passages", True),
    ("unanswerable_answered", False),
    ("underspecified_asked_back", True),
    ("partial_useful", True),
    ("followups_repeating", False),
    ("replies_with_markup", False),
    ("replies_cautioned", False),
    ("median_turn_s", False),
)
COUNTS = ("followups_repeating", "replies_with_markup", "replies_cautioned")


def _share(values: Sequence[bool]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def fold_figures(rows: Sequence[Mapping[str, Any]], cases: Sequence[Any]) -> dict[str, Any]:
    """One collection's figures from its `eval answers` rows (one per case) and its cases."""
    from reground.evals.runs.usefulness import holds_every, markup_in
    from reground.prompts.injection import CAUTION

    caution = CAUTION.split("{", 1)[0]
    done = {str(r["case_id"]): r for r in rows if not r.get("error")}
    order = {c.case_id: (c.dial_id, len(c.history)) for c in cases}
    by_turn = {order[case_id]: row for case_id, row in done.items() if case_id in order}

    def group(label: str) -> list[Mapping[str, Any]]:
        return [r for r in done.values() if r.get("answerability") == label]

    def useful(row: Mapping[str, Any]) -> bool:
        return holds_every(str(row.get("answer") or ""), row.get("must_contain") or [])

    def passages_hold(row: Mapping[str, Any]) -> bool:
        texts = [str(p.get("text", "")) for p in (row.get("passages") or [])[:PASSAGES]]
        return holds_every(" ".join(texts), row.get("must_contain") or [])

    answerable, partial = group("ANSWERABLE"), group("PARTIAL")
    repeating = 0
    followups = 0
    for (dial, turn), row in by_turn.items():
        before = [t for d, t in by_turn if d == dial and t < turn]
        if before:
            followups += 1
            repeating += _same(str(row.get("answer") or ""), str(by_turn[(dial, max(before))].get("answer") or ""))
    seconds = [float(r["seconds"]) for r in done.values() if r.get("seconds") is not None]
    return {
        "turns": len(done),
        "errors": len(rows) - len(done),
        "n": {label: len(group(label)) for label in ("ANSWERABLE", "UNANSWERABLE", "UNDERSPECIFIED", "PARTIAL")},
        "answerable_useful": _share([useful(r) for r in answerable]),
        "answerable_stated": _share([r.get("behaviour") in ANSWERED for r in answerable]),
        "answerable_asked_back": _share([r.get("behaviour") == "clarify" for r in answerable]),
        "answerable_hedged": _share([r.get("behaviour") == "hedge" for r in answerable]),
        "answerable_abstained": _share([r.get("behaviour") == "abstain" for r in answerable]),
        "answerable_three_passages": _share([passages_hold(r) for r in answerable]),
        "unanswerable_answered": _share([r.get("behaviour") in ANSWERED for r in group("UNANSWERABLE")]),
        "underspecified_asked_back": _share([r.get("behaviour") == "clarify" for r in group("UNDERSPECIFIED")]),
        "partial_useful": _share([useful(r) for r in partial]),
        "followups": followups,
        "followups_repeating": repeating,
        "replies_with_markup": sum(bool(markup_in(str(r.get("answer") or ""))) for r in done.values()),
        "replies_cautioned": sum(caution in str(r.get("answer") or "") for r in done.values()),
        "median_turn_s": round(statistics.median(seconds), 4) if seconds else None,
    }


def across(folds: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The mean over collections (counts: the sum) and the worst collection's figure, for each figure."""
    mean: dict[str, Any] = {}
    worst: dict[str, Any] = {}
    for name, higher in FIGURES:
        values = [float(f[name]) for f in folds.values() if f.get(name) is not None]
        if not values:
            continue
        mean[name] = int(sum(values)) if name in COUNTS else round(sum(values) / len(values), 4)
        worst[name] = min(values) if higher else max(values)
    return {"mean": mean, "worst": worst}


def table(summary: Mapping[str, Any]) -> str:
    """The summary as a markdown table: a row per collection, then the mean and the worst."""
    names = [name for name, _ in FIGURES]
    head = ["collection", "turns", *names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cell(value: Any) -> str:
        return "–" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))

    for collection, fold in summary["collections"].items():
        lines.append("| " + " | ".join([collection, str(fold["turns"]), *(cell(fold.get(n)) for n in names)]) + " |")
    for row in ("mean", "worst"):
        values = summary[row]
        lines.append("| " + " | ".join([f"**{row}**", "", *(cell(values.get(n)) for n in names)]) + " |")
    return "\n".join(lines) + "\n"


def summarise(out: Path, runs: Path, split: Mapping[str, tuple[Path, Path]], collections: Sequence[str]) -> dict:
    """Each collection's figures from its run under RUNS, the mean and the worst; OUT/summary.json, summary.md and
    OUT/turns.jsonl (each turn's class, behaviour, reply and whether it and its passages hold `must_contain`)."""
    from reground.evals.data.datasets import load_cases
    from reground.evals.records import latest_by_case, read_jsonl
    from reground.evals.runs.usefulness import holds_every

    folds: dict[str, Any] = {}
    turns: list[dict[str, Any]] = []
    for collection in collections:
        rows = list(latest_by_case(read_jsonl(runs / collection / "reground" / "cases.jsonl")).values())
        folds[collection] = fold_figures(rows, load_cases(split[collection][1]))
        for row in rows:
            must = row.get("must_contain") or []
            texts = " ".join(str(p.get("text", "")) for p in (row.get("passages") or [])[:PASSAGES])
            turns.append(
                {
                    "case_id": row["case_id"],
                    "collection": collection,
                    "answerability": row.get("answerability"),
                    "behaviour": row.get("behaviour"),
                    "useful": holds_every(str(row.get("answer") or ""), must) if must else None,
                    "passages_hold": holds_every(texts, must) if must else None,
                    "seconds": row.get("seconds"),
                    "question": row.get("question"),
                    "answer": row.get("answer"),
                    "error": row.get("error"),
                }
            )
    summary = {"collections": folds, **across(folds)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "turns.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in turns), "utf-8")
    return summary


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Split, collect, train every fold, answer every held-out collection with its fold's models, score."""
    work, out = Path(args.work), Path(args.out)
    split = split_sets(args.sets, work)
    collections = args.collections or list(split)
    unknown = sorted(set(collections) - set(split))
    if unknown:
        raise SystemExit(f"--collections names collections the sets do not hold: {unknown} (they hold {list(split)})")
    models = Path(args.models) if args.models else work / "models"
    seconds: dict[str, float] = {}
    started = time.monotonic()
    if not args.skip_train:
        caches = collect(
            split,
            work,
            data_dir=args.data_dir,
            chat_model=args.chat_model,
            reuse=args.reuse_collected,
            overrides=args.set,
        )
        seconds["collect"] = round(time.monotonic() - started, 1)
        unit_folds: dict[str, Path] = {}
        if args.scorer:
            weak = Path(args.weak_pairs) if args.weak_pairs else None
            units, unit_folds = scorer_folds(
                caches[0], list(split), models, weak=weak, sources=args.weak_sources, write_models=not args.units_only
            )
            caches = (units, caches[1])
        held_out = units_held_out(caches[0], unit_folds)
        out.mkdir(parents=True, exist_ok=True)
        (out / "units_held_out.json").write_text(json.dumps(held_out, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(held_out["pooled"], indent=1), file=sys.stderr)
        if args.units_only:
            return held_out
        train_folds(caches, combined_files(split, work), models, data_dir=args.data_dir, unit_folds=unit_folds)
        seconds["train"] = round(time.monotonic() - started - seconds["collect"], 1)
    runs = work / "runs" / out.name
    for collection in collections:
        fold = models / "loco" / collection
        if not (fold / "doc_triage.json").is_file():
            raise SystemExit(f"no models fitted without {collection} at {fold}: run without --skip-train first")
        target = runs / collection
        if target.exists():
            shutil.rmtree(target)  # a fresh run: the fold's models may have changed since
        docs, cases = split[collection]
        command = [sys.executable, "-m", "reground.evals.train.loco", "answer", "--docs", str(docs)]
        command += ["--cases", str(cases), "--collection", collection, "--out", str(target)]
        command += ["--chat-model", args.chat_model] if args.chat_model else []
        command += ["--data-dir", args.data_dir] if args.data_dir else []
        command += [f"--set={item}" for item in args.set]
        begun = time.monotonic()
        _run(command, env={"REGROUND_DOC_MODELS": str(fold.resolve())})
        seconds[f"answer_{collection}"] = round(time.monotonic() - begun, 1)
    summary = summarise(out, runs, split, collections)
    summary["run"] = {
        "command": "python -m reground.evals.train.loco " + " ".join(sys.argv[1:]),
        "chat_model": args.chat_model,
        "overrides": list(args.set),
        "sets": [str(s) for s in args.sets],
        "trained": not args.skip_train,
        "code": code_key(),
        "seconds": seconds,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(table(summary), encoding="utf-8")
    return summary


def ship(args: argparse.Namespace) -> None:
    """The shipped models fitted on every collection: the unit scorer (with `--scorer`) into the package, then each
    trainer without `--out` (weights, cards, summaries into the package and evals/results/units/); prints what to
    pin."""
    work = Path(args.work)
    split = split_sets(args.sets, work)
    caches = collect(split, work, data_dir=args.data_dir, chat_model=args.chat_model, reuse=args.reuse_collected)
    docs, cases = combined_files(split, work)
    units = caches[0]
    names = ["unit_ranker.json", "doc_triage.json", "chunk_ranker.json"]
    if args.scorer:
        weak = Path(args.weak_pairs) if args.weak_pairs else None
        units, folds = scorer_folds(caches[0], list(split), work / "models", weak=weak, sources=args.weak_sources)
        shutil.copyfile(work / "models" / "unit_scorer-int8.onnx", Path("reground/data/units/unit_scorer-int8.onnx"))
        names.append("unit_scorer-int8.onnx")
    for trainer, cache in (("unit_ranker", units), ("doc_triage", units), ("chunk_ranker", caches[1])):
        command = [sys.executable, "-m", f"reground.evals.train.{trainer}", "train", "--docs", str(docs)]
        command += ["--cases", str(cases), "--cache", str(cache)]
        if args.scorer and trainer != "chunk_ranker":
            command += [f"--fold-cache={held}={path}" for held, path in folds.items()]
        _run(command)
    for name in names:
        path = Path("reground/data/units") / name
        print(f"{path}: sha256 {hashlib.sha256(path.read_bytes()).hexdigest()} (pin it)", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reground.evals.train.loco", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--sets", type=Path, nargs="+", default=list(SETS), help="folders of docs.jsonl + cases")
    common.add_argument("--work", type=Path, default=WORK, help="split files, collected turns, fold models, runs")
    common.add_argument("--data-dir", default=None, help="store directory (default: $REGROUND_DATA_DIR)")
    common.add_argument("--chat-model", default=None, help="e.g. local:default (`reground llm serve` up)")
    p = sub.add_parser("run", parents=[common], help="train every fold, answer every held-out collection, score")
    p.add_argument("--out", required=True, type=Path, help="summary.json, summary.md, turns.jsonl")
    p.add_argument("--collections", type=lambda s: [c for c in s.split(",") if c], default=None)
    p.add_argument("--skip-train", action="store_true", help="answer with the fold models WORK/models already holds")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a Context override (repeat)")
    p.add_argument("--models", default=None, help="where the fold models go (default WORK/models)")
    p.add_argument("--units-only", action="store_true", help="stop after the unit ranker's held-out figures")
    shipping = sub.add_parser("ship", parents=[common], help="fit the shipped models on every collection")
    for q in (p, shipping):
        q.add_argument("--scorer", action="store_true", help="fit the unit scorer; the unit ranker reads it")
        q.add_argument("--weak-pairs", default=str(SCORER_WORK), help="`unit_scorer pairs --out` (empty: none)")
        q.add_argument("--weak-sources", type=lambda s: [x for x in s.split(",") if x], default=None)
        q.add_argument(
            "--reuse-collected",
            action="store_true",
            help="fit on the turns collected last even if the code changed since (a change that moves no candidate)",
        )
    a = sub.add_parser("answer", help="(one fold; `run` calls it with REGROUND_DOC_MODELS set)")
    a.add_argument("--docs", required=True, type=Path)
    a.add_argument("--cases", required=True, type=Path)
    a.add_argument("--collection", required=True)
    a.add_argument("--out", required=True, type=Path)
    a.add_argument("--chat-model", default=None)
    a.add_argument("--data-dir", default=None)
    a.add_argument("--set", action="append", default=[])
    a.add_argument("--reingest", action="store_true", help="ingest the collection again before answering")
    args = parser.parse_args(argv)
    if args.command == "answer":
        return answer_fold(args)
    if args.command == "ship":
        ship(args)
        return 0
    summary = run(args)
    if args.units_only:
        print(f"wrote {args.out}/units_held_out.json", file=sys.stderr)
        return 0
    print(table(summary))
    print(f"wrote {args.out}/summary.json, summary.md, turns.jsonl", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
