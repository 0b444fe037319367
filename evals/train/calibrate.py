"""Threshold calibration from answers runs, ReGround's way (a low percentile over the cases that should pass):

- the **groundedness threshold**: the value that 95% of written answers whose retrieval was correct exceed (the
  5th percentile of their groundedness). Extracted answers are the documents' own sentences, grounded by
  construction, so only runs whose graph wrote its answers (`--set answer_style=write`) calibrate it;
- the **support threshold** (abstain below it): the value that 97% of the answerable cases exceed (the 3rd
  percentile of triage's support over cases with a gold answer, or labelled ANSWERABLE / PARTIAL). Runs with
  MTRAG-UN labels also report the share of UNANSWERABLE tasks under it, the abstentions it buys.

    reground eval calibrate --run runs/answers [--run runs/more] [--system reground] [--also-repo]
                            [--support-percentile 3] [--for-collection]

The support percentile is the share of answerable cases a corpus may refuse: lower it when the corpus's answerable
questions are also asked back (MTRAG-UN dev: 2.4% of its answerable tasks get a clarifying question, so its
refusals and clarifications stay within 5% at the 2nd percentile, evals/README.md).

Several runs pool their cases. Writes `<data_dir>/calibration.json` (values already there and not recalibrated are
kept), which the graph's Context reads as its default thresholds, and optionally `evals/results/calibration.json`.
With `--for-collection` the values are written for the runs' collection only (its entry under "collections"),
which a Context of that collection prefers to the file's own: a corpus whose answerable questions match its
passages more closely than another's (MTRAG-UN's against doc2dial's) keeps its own abstention cut.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from reground.evals.records import latest_by_case, read_jsonl
from reground.evals.runs.answers import GRAPH_SYSTEMS, shown_path
from reground.tools.adapters.paths import CALIBRATION_FILE, read_calibrated_threshold
from reground.tools.adapters.paths import data_dir as default_data_dir
from reground.tools.errors import DataError

__all__ = ["CalibrationError", "calibrate_run", "calibrated_threshold", "read_calibrated_threshold"]

REPO_RESULTS = Path(__file__).resolve().parents[1] / "results"
PERCENTILE = 5.0
SUPPORT_PERCENTILE = 3.0
ANSWERED = ("ANSWERABLE", "PARTIAL")


class CalibrationError(DataError, ValueError):
    """The run cannot calibrate (no scores, no correct retrievals): its data is missing (exit 3); the
    message says what to run."""


def calibrated_threshold(rows: Sequence[Mapping[str, Any]], percentile: float = PERCENTILE) -> dict[str, Any]:
    """The threshold and what it was computed from, over rows with the gold document retrieved."""
    scored = [r for r in rows if not r.get("error") and r.get("groundedness") is not None]
    correct = [float(r["groundedness"]) for r in scored if r.get("gold_in_top3")]
    # gold_in_top3 None: a case without gold passages (MTRAG-UN's unanswerable) is neither.
    wrong = [float(r["groundedness"]) for r in scored if r.get("gold_in_top3") is False]
    if not correct:
        raise CalibrationError(
            "no answers with a groundedness score and the gold document retrieved: run "
            "`reground eval answers --systems reground ...` on the dev cases first"
        )
    threshold = float(np.percentile(correct, percentile))
    return {
        "groundedness_threshold": round(threshold, 4),
        "percentile": percentile,
        "n_correct_retrieval": len(correct),
        "n_wrong_retrieval": len(wrong),
        "mean_groundedness_correct": float(np.mean(correct)),
        "mean_groundedness_wrong": float(np.mean(wrong)) if wrong else None,
        # How many wrong retrievals the threshold would send back to re-grounding.
        "wrong_below_threshold": (sum(g < threshold for g in wrong) / len(wrong)) if wrong else None,
    }


def calibrated_support(rows: Sequence[Mapping[str, Any]], percentile: float = SUPPORT_PERCENTILE) -> dict[str, Any]:
    """The support threshold (triage's abstention cut) and what it buys, over rows that carry `signals.support`."""
    scored = [r for r in rows if not r.get("error") and (r.get("signals") or {}).get("support") is not None]

    def answerable(row: Mapping[str, Any]) -> bool:
        label = row.get("answerability")
        return label in ANSWERED if label else row.get("gold_answer") is not None

    supports = [float(r["signals"]["support"]) for r in scored if answerable(r)]
    if not supports:
        raise CalibrationError(
            "no answerable cases with a support signal: run `reground eval answers --systems reground "
            "--set triage.support_threshold=0 ...` on cases with gold answers first"
        )
    threshold = float(np.percentile(supports, percentile))
    unanswerable = [float(r["signals"]["support"]) for r in scored if r.get("answerability") == "UNANSWERABLE"]
    return {
        "support_threshold": round(threshold, 4),
        "support_percentile": percentile,
        "n_answerable": len(supports),
        "answerable_below": sum(s < threshold for s in supports) / len(supports),
        "n_unanswerable": len(unanswerable),
        "unanswerable_below": (sum(s < threshold for s in unanswerable) / len(unanswerable)) if unanswerable else None,
    }


def _wrote_answers(run: Path, system: str) -> bool:
    """Whether the system's graph wrote its answers in this run (answer_style 'write', from the run's overrides or the
    system's own); extracted answers are grounded by construction and say nothing about the groundedness threshold."""
    try:
        config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    overrides = {**(config.get("context_overrides") or {}), **GRAPH_SYSTEMS.get(system, {})}
    return overrides.get("answer_style") == "write"


def runs_collection(runs: Sequence[Path]) -> str:
    """The one collection the runs were answered from (their config.json's "collection")."""
    found: set[str] = set()
    for run in runs:
        try:
            config = json.loads((run / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            config = {}
        name = config.get("collection") if isinstance(config, dict) else None
        if not name:
            raise CalibrationError(
                f"{run}/config.json names no collection: re-run `reground eval answers` with this version, or "
                "calibrate without --for-collection"
            )
        found.add(str(name))
    if len(found) != 1:
        raise CalibrationError(f"the runs come from {len(found)} collections ({', '.join(sorted(found))}): one only")
    return found.pop()


def calibrate_run(
    run_dir: str | Path | Sequence[str | Path],
    *,
    system: str = "reground",
    data_dir: str | Path | None = None,
    also_repo: bool = False,
    percentile: float = PERCENTILE,
    support_percentile: float = SUPPORT_PERCENTILE,
    for_collection: bool = False,
) -> dict[str, Any]:
    """Calibrate from one or more answers runs and write the config file(s); returns what was written."""
    runs = [Path(run_dir)] if isinstance(run_dir, str | Path) else [Path(r) for r in run_dir]
    collection = runs_collection(runs) if for_collection else ""
    rows: list[dict[str, Any]] = []
    written_rows: list[dict[str, Any]] = []
    for run in runs:
        path = run / system / "cases.jsonl"
        if not path.is_file():
            raise CalibrationError(
                f"{path} not found: run `reground eval answers --systems {system} --out {run}` first"
            )
        found = list(latest_by_case(read_jsonl(path)).values())
        rows += found
        if _wrote_answers(run, system):
            written_rows += found
    result: dict[str, Any] = {}
    if written_rows:
        result.update(calibrated_threshold(written_rows, percentile))
    if any((r.get("signals") or {}).get("support") is not None for r in rows):
        result.update(calibrated_support(rows, support_percentile))
    if not result:
        raise CalibrationError(
            "nothing to calibrate: the runs' answers were extracted (no groundedness to calibrate; add "
            "--set answer_style=write) and carry no support signal (run them with this version of reground)"
        )
    result.update(
        system=system,
        runs=[shown_path(run) for run in runs],
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    if collection:
        result["collection"] = collection
    targets = [default_data_dir(data_dir) / CALIBRATION_FILE]
    if also_repo:
        REPO_RESULTS.mkdir(parents=True, exist_ok=True)
        targets.append(REPO_RESULTS / CALIBRATION_FILE)
    for target in targets:
        try:
            kept = json.loads(target.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            kept = {}
        kept = kept if isinstance(kept, dict) else {}
        if collection:
            entries = kept.get("collections")
            scoped: dict[str, Any] = entries if isinstance(entries, dict) else {}
            merged = {**kept, "collections": {**scoped, collection: {**scoped.get(collection, {}), **result}}}
        else:
            merged = {**kept, **result}
        target.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    result["written"] = [str(t) for t in targets]
    return result
