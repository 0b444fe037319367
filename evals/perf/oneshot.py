"""A one-shot `reground ask` on a documentation collection of a few thousand chunks, beside the warm turn.

    .venv/bin/python -m reground.evals.perf.bench oneshot --docs $DATA/techdocs/docs.jsonl \
        --cases $DATA/techdocs/cases_dev.jsonl --data-dir /tmp/bench --runs 5

The collection is ingested as `reground ingest DOCS --collection techdocs` does (kept in --data-dir for reruns).
Each of `runs` opening questions of the cases (after one unmeasured run that warms the file cache) is asked by a
fresh `reground ask ... --json --quiet` process, twice: alone (the process imports, opens the collection, loads the
models and answers) and with `reground worker start --collection techdocs` running (the process hands the question
to the warm worker). Reported: the median and slowest wall time of each, the client's CPU seconds, and the warm
turn (the result's own `seconds`, measured inside the worker); whether both ways gave the same replies; and the
LLM calls (none: the extract default, against a stub endpoint that counts calls).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reground.evals.perf.processes import StubHandler, reground_command, stub_llm, timed_process

COLLECTION = "techdocs"


def _opening_questions(cases: Path, n: int) -> list[str]:
    """The first n distinct opening questions (no earlier dialogue) of the case file."""
    found: list[str] = []
    with cases.open(encoding="utf-8") as lines:
        for line in lines:
            case = json.loads(line)
            if not case.get("history") and case["question"] not in found:
                found.append(case["question"])
            if len(found) == n:
                break
    return found


def _ensure_collection(docs: Path, data_dir: Path, env: dict[str, str]) -> int:
    """The collection's chunk count, ingesting the documents first when it does not exist yet."""
    from reground.tools.stores.store import PassageStore

    if not any(row["collection"] == COLLECTION for row in PassageStore.describe(data_dir=str(data_dir))):
        timed_process(
            [*reground_command(), "ingest", str(docs), "--collection", COLLECTION, "--data-dir", str(data_dir)], env
        )
    (row,) = PassageStore.describe(COLLECTION, data_dir=str(data_dir))
    return int(row["chunks"])


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def bench_oneshot(docs: Path, cases: Path, work: Path, runs: int) -> dict[str, Any]:
    """One-shot `reground ask` alone and through a warm worker, on the same questions (see the module docstring)."""
    data_dir = work / "oneshot"
    questions = _opening_questions(cases, runs + 1)
    reground = reground_command()
    where = ["--collection", COLLECTION, "--data-dir", str(data_dir)]
    measured: dict[str, dict[str, list[float]]] = {"alone": {}, "worker": {}}
    replies: dict[str, list[str]] = {"alone": [], "worker": []}
    with stub_llm() as url:
        env = {**os.environ, "REGROUND_LOCAL_LLM_URL": url, "ANONYMIZED_TELEMETRY": "False"}
        chunks = _ensure_collection(docs, data_dir, env)
        load_before = os.getloadavg()[0]
        for way in ("alone", "worker"):
            if way == "worker":
                start_s, _, _ = timed_process([*reground, "worker", "start", *where], env)
            try:
                for number, question in enumerate(questions):
                    wall, cpu, out = timed_process([*reground, "ask", question, *where, "--json", "--quiet"], env)
                    if number == 0:
                        continue  # the unmeasured first run
                    result = json.loads(out)
                    for key, value in (("wall_s", wall), ("cpu_s", cpu), ("turn_s", float(result["seconds"]))):
                        measured[way].setdefault(key, []).append(value)
                    replies[way].append(result["answer"])
            finally:
                if way == "worker":
                    timed_process([*reground, "worker", "stop", "--data-dir", str(data_dir)], env)
        stub_calls = StubHandler.calls
    return {
        "collection": COLLECTION,
        "chunks": chunks,
        "runs": runs,
        "questions": questions[1:],
        **{way: {key: _summary(values) for key, values in parts.items()} for way, parts in measured.items()},
        "worker_start_s": round(start_s, 3),
        "same_replies": sum(a == b for a, b in zip(replies["alone"], replies["worker"], strict=True)),
        "stub_llm_calls": stub_calls,
        "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
