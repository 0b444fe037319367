"""ReGround's threshold calibration, without gold answers: the groundedness threshold is the value
that 95% of answers whose retrieval was correct exceed (the 5th percentile of their groundedness).

    reground eval calibrate --run runs/answers [--system reground] [--also-repo]

Writes `<data_dir>/calibration.json`, which the graph's Context reads as its default threshold
(`read_calibrated_threshold`), and optionally `evals/results/calibration.json` for the record.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from reground.evals.answers import latest_by_case, read_jsonl
from reground.tools.errors import DataError
from reground.tools.paths import CALIBRATION_FILE, read_calibrated_threshold
from reground.tools.paths import data_dir as default_data_dir

__all__ = ["CalibrationError", "calibrate_run", "calibrated_threshold", "read_calibrated_threshold"]

REPO_RESULTS = Path(__file__).resolve().parent / "results"
PERCENTILE = 5.0


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


def calibrate_run(
    run_dir: str | Path,
    *,
    system: str = "reground",
    data_dir: str | Path | None = None,
    also_repo: bool = False,
    percentile: float = PERCENTILE,
) -> dict[str, Any]:
    """Calibrate from an answers run and write the config file(s); returns what was written."""
    run = Path(run_dir)
    path = run / system / "cases.jsonl"
    if not path.is_file():
        raise CalibrationError(f"{path} not found: run `reground eval answers --systems {system} --out {run}` first")
    rows = list(latest_by_case(read_jsonl(path)).values())
    result = {
        **calibrated_threshold(rows, percentile),
        "system": system,
        "run": str(run.resolve()),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    targets = [default_data_dir(data_dir) / CALIBRATION_FILE]
    if also_repo:
        REPO_RESULTS.mkdir(parents=True, exist_ok=True)
        targets.append(REPO_RESULTS / CALIBRATION_FILE)
    for target in targets:
        target.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    result["written"] = [str(t) for t in targets]
    return result
