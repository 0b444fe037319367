"""Benchmark reground on the real `langgraph dev` server with the local LLM, through the SDK client.

    .venv/bin/python -m reground.evals.perf.bench_server --llm smollm2-135m --concurrency 10 20

Measures, on this machine: time to the first progress event (stream_mode "custom") and to the final
answer of one turn; then N threads started at once (one turn each): wall time, throughput, error
rate and per-run latency. The servers run from temporary directories and are stopped by PID.
Writes evals/results/server_bench.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reground.tools.tuning.stores import INGEST

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "evals" / "results" / "server_bench.json"

# The settings profiles a run can use: the product's defaults, or the plumbing profile of the tests.
PROFILES: dict[str, dict[str, Any]] = {
    "default": {},
    "fast": {
        "models": {"max_answer_tokens": 40},
        "groundedness": {"use_llm_groundedness_judge": False, "max_reground_attempts": 0},
        "evidence": {"use_self_check": False},
        "use_principle_refinement": False,
    },
}


def _servers() -> Any:
    """The launcher shared with the integration tests (stops everything it starts by PID)."""
    sys.path.insert(0, str(REPO / "tests" / "integration"))
    import servers

    return servers


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index], 2)


def one_turn(client: Any, assistant_id: str, question: str, context: dict[str, Any]) -> dict[str, Any]:
    """Stream one turn on a new thread: seconds to the first progress event and to the end."""
    thread_id = client.threads.create()["thread_id"]
    started = time.perf_counter()
    first_progress = None
    first_token = None
    errors: list[Any] = []
    for part in client.runs.stream(
        thread_id,
        assistant_id,
        input={"messages": [{"role": "user", "content": question}]},
        context=context,
        stream_mode=["custom", "messages-tuple", "updates"],
    ):
        now = time.perf_counter() - started
        if part.event == "custom" and first_progress is None:
            first_progress = now
        elif part.event == "messages" and first_token is None:
            first_token = now
        elif part.event == "error":
            errors.append(part.data)
    total = time.perf_counter() - started
    result = client.threads.get_state(thread_id)["values"].get("result", {})
    return {
        "first_progress_s": round(first_progress, 2) if first_progress is not None else None,
        "first_token_s": round(first_token, 2) if first_token is not None else None,
        "final_answer_s": round(total, 2),
        "llm_calls": result.get("llm_calls"),
        "passed": result.get("passed"),
        "errors": errors,
    }


def concurrent_turns(
    client: Any, assistant_id: str, questions: Sequence[str], context: dict[str, Any], n: int
) -> dict[str, Any]:
    """Start n threads' runs at once, wait for all; throughput, error rate and latency per run."""
    started = time.perf_counter()
    jobs = []
    for i in range(n):
        thread_id = client.threads.create(metadata={"bench_user": i})["thread_id"]
        question = questions[i % len(questions)]
        run = client.runs.create(
            thread_id,
            assistant_id,
            input={"messages": [{"role": "user", "content": question}]},
            context=context,
        )
        jobs.append((thread_id, run["run_id"], question))
    latencies: list[float] = []
    failures: list[str] = []
    mixed_up = 0
    for thread_id, run_id, question in jobs:
        output = client.runs.join(thread_id, run_id)
        run = client.runs.get(thread_id, run_id)
        if run["status"] != "success":
            error = output.get("__error__", {}) if isinstance(output, dict) else {}
            failures.append(f"{run['status']}: {error.get('error', '?')}: {str(error.get('message', ''))[:120]}")
            continue
        latencies.append(time.perf_counter() - started)  # joined in order: an upper bound per run
        state = client.threads.get_state(thread_id)["values"]
        if state.get("question") != question:
            mixed_up += 1
    wall = time.perf_counter() - started
    return {
        "threads": n,
        "wall_s": round(wall, 1),
        "throughput_turns_per_min": round(60 * len(latencies) / wall, 2),
        "error_rate": round(len(failures) / n, 3),
        "failures": failures,
        "answers_on_the_wrong_thread": mixed_up,
        "completion_s_p50": _percentile(latencies, 0.5),
        "completion_s_p90": _percentile(latencies, 0.9),
        "completion_s_max": _percentile(latencies, 1.0),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--llm",
        default="smollm2-135m",
        help="local model to serve (smollm2-135m, qwen2.5-0.5b, ...)",
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default="default", help="context settings")
    parser.add_argument("--single-runs", type=int, default=3, help="single-turn repetitions (median reported)")
    parser.add_argument("--concurrency", type=int, nargs="*", default=[10, 20], help="thread counts to run at once")
    parser.add_argument("--n-jobs-per-worker", type=int, default=10, help="langgraph dev's concurrent runs")
    parser.add_argument("--llm-url", default="", help="use this running OpenAI-style server instead of starting one")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    from langgraph_sdk import get_sync_client
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    from reground.demo import DEMO_COLLECTION, DEMO_ESCALATION, DEMO_SCOPE, DEMO_TURNS, demo_corpus_path

    servers = _servers()
    corpus = demo_corpus_path()
    if not corpus.exists():
        raise SystemExit(f"demo corpus {corpus} is missing: reinstall reground (pip install -e .)")
    llm = dev = None
    with tempfile.TemporaryDirectory(prefix="reground-bench-") as tmp:
        root = Path(tmp)
        try:
            store = PassageStore.open(DEMO_COLLECTION, data_dir=root / "data", create=True)
            ingest([corpus], store, progress=False, max_tokens=INGEST.chunk_tokens)
            t0 = time.perf_counter()
            if args.llm_url:
                llm = servers.LocalLLM(url=servers.openai_base(args.llm_url), pid=0, model=args.llm)
            else:
                llm = servers.start_local_llm(args.llm, root / "llm-state")
            llm_start_s = time.perf_counter() - t0
            env = {
                "REGROUND_DATA_DIR": str(root / "data"),
                "REGROUND_LOCAL_LLM_URL": llm.url,
                "REGROUND_STATE_DIR": str(root / "state"),
            }
            dev = servers.start_langgraph_dev(root / "server", env, n_jobs_per_worker=args.n_jobs_per_worker)
            client = get_sync_client(url=dev.url, timeout=3600.0)
            assistant_id = client.assistants.search(graph_id="reground")[0]["assistant_id"]
            context = {
                "collection": DEMO_COLLECTION,
                "metadata_filter": DEMO_SCOPE,
                "escalation": DEMO_ESCALATION,
                "chat_model": f"local:{args.llm}",
                **PROFILES[args.profile],
            }
            one_turn(client, assistant_id, DEMO_TURNS[0], context)  # warm-up: model load, prompt cache
            singles = [one_turn(client, assistant_id, DEMO_TURNS[0], context) for _ in range(args.single_runs)]
            concurrency = []
            for n in args.concurrency:
                concurrency.append(concurrent_turns(client, assistant_id, DEMO_TURNS, context, n))
                print(json.dumps(concurrency[-1]), file=sys.stderr)
        finally:
            if dev is not None:
                dev.stop()
            if llm is not None:
                llm.stop()

    report = {
        "what": "reground on `langgraph dev` with the local llama.cpp server, via langgraph_sdk",
        "llm": args.llm,
        "profile": args.profile,
        "context": context,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "server_startup_s": round(dev.startup_s, 1) if dev else None,
        "llm_startup_s": None if args.llm_url else round(llm_start_s, 1),
        "llm_url_given": bool(args.llm_url),
        "load_average_at_end": os.getloadavg(),
        "n_jobs_per_worker": args.n_jobs_per_worker,
        "single_turn": {
            "runs": singles,
            "first_progress_s_median": statistics.median(s["first_progress_s"] or float("nan") for s in singles),
            "final_answer_s_median": statistics.median(s["final_answer_s"] for s in singles),
        },
        "concurrent": concurrency,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("llm", "profile", "single_turn", "concurrent")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
