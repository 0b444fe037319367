"""Benchmarks of everything but the answers' quality, on this machine (numbers go in the README).

    .venv/bin/python -m reground.evals.perf.bench ingest overhead --docs ../shared/data/doc2dial/docs.jsonl \
        --cases ../shared/data/doc2dial/cases_dev.jsonl
    .venv/bin/python -m reground.evals.perf.bench llm --models smollm2-135m,qwen2.5-0.5b,qwen2.5-1.5b
    .venv/bin/python -m reground.evals.perf.bench startup
    .venv/bin/python -m reground.evals.perf.bench oneshot --docs $DATA/techdocs/docs.jsonl \
        --cases $DATA/techdocs/cases_dev.jsonl   # evals/perf/oneshot.py

- ingest: chunks/s when ingesting the demo corpus and the 274 doc2dial documents into a fresh store
  (load, chunk, embed, write Chroma + BM25), against a naive loop that embeds one passage at a time;
  and the latency of embedding one (uncached) query.
- overhead: a whole graph turn with a zero-latency scripted chat model over the 274-document
  collection, i.e. everything but the LLM (refine, keywords, retrieval, rerank, scoring, routing); wall and CPU
  (this process's, all threads) per turn, and the median seconds of each node (the turn's trace).
- startup: what a `reground` process costs before it answers: `reground --help`; importing the graph; and
  `reground ask` on the demo collection until its first answer (extract default, no LLM call: an OpenAI-compatible
  stub answers the reachability probe and counts any call), minus the turn's own seconds. Fresh processes, wall
  and CPU (user + sys) each.
- llm: for each local model, the server's load time, prompt tokens/s (a long prompt, one output token)
  and generation tokens/s (a short prompt, up to 128 tokens), each the median of a few requests.
  Servers are started side by side on free ports and stopped; the recorded `reground llm serve`
  server is not touched.

Results merge into evals/results/bench.json (or --out), one section per benchmark.
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
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from reground.evals.data.datasets import EVAL_CHUNK_TOKENS
from reground.evals.perf.processes import StubHandler, reground_command, stub_llm, timed_process
from reground.tools.tuning.stores import INGEST

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "evals" / "results" / "bench.json"
# The demo corpus as installed with the package (as reground/demo.py finds it), so a wheel finds it too.
DEMO_CORPUS = Path(str(resources.files("reground") / "data" / "hr_policies.jsonl"))
NAIVE_SAMPLE = 200  # passages embedded one at a time for the naive baseline


def _stats_ms(seconds: Sequence[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {
        "median_ms": round(1000 * statistics.median(ordered), 2),
        "p90_ms": round(1000 * p90, 2),
        "min_ms": round(1000 * ordered[0], 2),
        "n": len(ordered),
    }


def _timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - started, value


def _one_at_a_time_per_s(embedder: Any, texts: Sequence[str]) -> float:
    from reground.tools.adapters.embeddings import embed_passages

    seconds, _ = _timed(lambda: [embed_passages(embedder, [t]) for t in texts])
    return len(texts) / seconds


class _TimedEmbedder:
    """The embedder with a stopwatch: how long ingest spent inside it (its utilisation during the ingest)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dimension, self.seconds, self.passages = inner, inner.name, inner.dimension, 0.0, 0

    def embed(self, texts: Sequence[str]) -> Any:
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)

    def embed_passages_with_spans(self, texts: Sequence[str], spans: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.embed_passages_with_spans(texts, spans)
        finally:
            self.seconds += time.perf_counter() - started
            self.passages += len(texts)


def bench_ingest(docs: Path, cases: Path | None, work: Path) -> dict[str, Any]:
    """Fresh-store ingest throughput per corpus and, for doc2dial, its ratio to the embedder's own one-at-a-time
    passages/s measured in the same run (before and after the ingest, averaged: the machine is shared); query
    latency."""
    from reground.tools.adapters.embeddings import DEFAULT_SPEC, embed_passages, load_embedder
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore
    from reground.tools.text.chunking import chunk_document
    from reground.tools.text.loaders import load_paths

    embedder = load_embedder(DEFAULT_SPEC)
    embedder.embed(["warm up the session"])
    documents, _ = load_paths([docs])
    texts = [c["text"] for d in documents for c in chunk_document(d, max_tokens=EVAL_CHUNK_TOKENS)][:NAIVE_SAMPLE]
    out: dict[str, Any] = {"embedding": embedder.name, "corpora": {}}
    for name, path in (("demo_hr", DEMO_CORPUS), ("doc2dial_274", docs)):
        before = _one_at_a_time_per_s(embedder, texts) if name == "doc2dial_274" else 0.0
        timed = _TimedEmbedder(embedder)
        store = PassageStore.open(f"bench-{name.replace('_', '-')}", data_dir=work / name, embedder=timed, create=True)
        seconds, summary = _timed(ingest, [path], store, progress=False)
        words = [len(c["text"].split()) for c in store.all_chunks()]
        rate = summary.chunks_added / seconds
        out["corpora"][name] = {
            "documents": summary.documents,
            "chunks": summary.chunks_added,
            "mean_words_per_chunk": round(statistics.mean(words), 1),
            "seconds": round(seconds, 2),
            "chunks_per_s": round(rate, 1),
            # The embedder's own rate inside this ingest (its batches, this run's load) and the share of the
            # ingest's wall time it was busy: what the pipeline is for.
            "embedder_in_ingest_per_s": round(timed.passages / max(timed.seconds, 1e-9), 1),
            "embedder_busy_share": round(timed.seconds / seconds, 3),
        }
        if name == "doc2dial_274":
            after = _one_at_a_time_per_s(embedder, texts)
            batched_s, _ = _timed(embed_passages, embedder, texts)
            own = (before + after) / 2
            out["embedding_only"] = {
                "passages": len(texts),
                "mean_words": round(statistics.mean(len(t.split()) for t in texts), 1),
                "one_at_a_time_per_s": round(own, 1),
                "one_at_a_time_before_after_per_s": [round(before, 1), round(after, 1)],
                "batched_per_s": round(len(texts) / batched_s, 1),
            }
            out["corpora"][name]["ratio_to_embedder_one_at_a_time"] = round(rate / own, 3)
    if cases is not None:
        from reground.evals.data.datasets import load_cases

        questions = list(dict.fromkeys(c.question for c in load_cases(cases, limit=300, seed=1)))[:200]
        timings = [_timed(embedder.embed, [q])[0] for q in questions]
        out["query_embedding"] = _stats_ms(timings)
    return out


def bench_overhead(docs: Path, cases: Path, work: Path, turns: int) -> dict[str, Any]:
    """A graph turn with a zero-latency scripted model: what reground itself costs per turn.

    Turns alternate between the current stack and the same stack with its per-turn savings off (passage
    sentences embedded every turn instead of read from the store, the store's version read from Chroma on every
    search): `turns` dev follow-ups each, different ones, on the same collection in the same process, so the
    comparison holds on a shared machine. CPU seconds (the process's, every thread) say what a turn costs where
    wall time also counts waiting for a core another job holds."""
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.answers import graph_messages
    from reground.evals.runs.retrieval import collection_name, open_eval_store
    from reground.graph.builder import build_graph, run_config
    from reground.nodes.context import Context

    from reground.testing.fake_chat import ScriptedChatModel, first_passage_reply

    data_dir = work / "overhead"
    store: Any = open_eval_store(docs, data_dir=data_dir, max_tokens=EVAL_CHUNK_TOKENS)  # the answer evals' collection
    model = ScriptedChatModel(script={"answer": [first_passage_reply]})
    graph = build_graph(chat_model=model, store=store)
    context = Context(collection=collection_name(docs, EVAL_CHUNK_TOKENS), data_dir=str(data_dir))
    sample = load_cases(cases, limit=2 * turns + 1, seed=2, only_followups=True)
    current = store.index.settings
    timings: dict[str, list[float]] = {"current": [], "savings_off": []}
    cpu: list[float] = []
    nodes: dict[str, list[float]] = defaultdict(list)
    calls: list[int] = []
    passed = 0
    for index, case in enumerate(sample):  # odd turns current, even turns savings off: no case (cache) is shared
        mode = "current" if index % 2 else "savings_off"
        store.index.settings = replace(current, stored_sentence_vectors=mode == "current")
        store.cache_version = mode == "current"
        model.reset()
        messages = {"messages": graph_messages(case)}
        started_cpu = time.process_time()
        seconds, out = _timed(_turn_with_trace, graph, messages, context, run_config(context))
        if index == 0:
            continue  # the first turn pays for loading the snapshot and the BM25 index
        timings[mode].append(seconds)
        if mode == "current":
            cpu.append(time.process_time() - started_cpu)
            for node, spent in out["node_seconds"].items():
                nodes[node].append(spent)
            calls.append(len(model.calls))
            passed += int(bool(out["result"]["passed"]))
    store.index.settings, store.cache_version = current, True
    return {
        "collection_chunks": store.count(),
        "turn": _stats_ms(timings["current"]),
        "turn_cpu": _stats_ms(cpu),
        # Median seconds per node over the turns it ran in (the trace's own stopwatch), most first.
        "node_median_ms": {
            node: round(1000 * statistics.median(spent), 2)
            for node, spent in sorted(nodes.items(), key=lambda kv: -statistics.median(kv[1]))
        },
        "turn_savings_off": _stats_ms(timings["savings_off"]),
        "scripted_llm_calls_per_turn": {"min": min(calls), "median": statistics.median(calls), "max": max(calls)},
        "passed": passed,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def _turn_with_trace(graph: Any, messages: dict[str, Any], context: Any, config: dict[str, Any]) -> dict[str, Any]:
    """One turn streamed by node updates: its result and the seconds each node's trace event records."""
    spent: dict[str, float] = defaultdict(float)
    result: dict[str, Any] = {}
    for update in graph.stream(messages, context=context, config=config, stream_mode="updates"):
        for node_update in update.values():
            if not isinstance(node_update, dict):
                continue
            for event in node_update.get("trace", []):
                spent[event["node"]] += float(event.get("seconds", 0.0))
            result = node_update.get("result", result)
    return {"result": result, "node_seconds": dict(spent)}


def bench_startup(work: Path, runs: int) -> dict[str, Any]:
    """`reground --help`, `import reground.graph.builder`, and `reground ask` to its first answer on the demo
    collection (ingested here first), each `runs` times in fresh processes after one unmeasured run (it warms the
    file cache); median wall and CPU seconds, and for `ask` its process start: the wall time less the turn's own
    seconds (the result's `seconds`: from the end of start_turn, which opens the store, to finalize; the first
    turn's loading of the reader and the judge counts in the turn)."""
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    from reground.demo import DEMO_COLLECTION, DEMO_SCOPE, DEMO_TURNS, demo_corpus_path

    data_dir = work / "startup"
    store = PassageStore.open(DEMO_COLLECTION, data_dir=str(data_dir), create=True)
    ingest([demo_corpus_path()], store, progress=False, max_tokens=INGEST.chunk_tokens)
    reground = reground_command()
    ask = [
        *reground,
        *("ask", DEMO_TURNS[0], "--collection", DEMO_COLLECTION, "--data-dir", str(data_dir)),
        *("--filter", json.dumps(DEMO_SCOPE), "--json", "--quiet"),
    ]
    commands = {
        "help": [*reground, "--help"],
        "import_graph": [sys.executable, "-c", "import reground.graph.builder"],
        "ask": ask,
    }
    measured: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in commands}
    answers: set[str] = set()
    passed = llm_calls = 0
    with stub_llm() as url:
        env = {**os.environ, "REGROUND_LOCAL_LLM_URL": url, "ANONYMIZED_TELEMETRY": "False"}
        for run in range(runs + 1):
            for name, command in commands.items():
                wall, cpu, out = timed_process(command, env)
                if run == 0:
                    continue  # the unmeasured first run
                measured[name]["wall"].append(wall)
                measured[name]["cpu"].append(cpu)
                if name == "ask":
                    result = json.loads(out)
                    measured[name]["turn"].append(float(result["seconds"]))
                    measured[name]["process_start"].append(wall - float(result["seconds"]))
                    answers.add(result["answer"])
                    passed += int(bool(result["passed"]))
                    llm_calls += int(result["llm_calls"])
        stub_calls = StubHandler.calls

    def seconds(values: Sequence[float]) -> float:
        return round(statistics.median(values), 3)

    return {
        "runs": runs,
        **{name: {f"{key}_s": seconds(values) for key, values in parts.items()} for name, parts in measured.items()},
        "ask_question": DEMO_TURNS[0],
        "ask_answers": sorted(answers),
        "ask_passed": passed,
        "llm_calls": llm_calls,
        "stub_llm_calls": stub_calls,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


LONG_PROMPT = " ".join(
    f"Paragraph {n}: employees may request leave through the portal, and managers approve it within five days."
    for n in range(30)
)


def _chat(url: str, prompt: str, max_tokens: int) -> tuple[float, dict[str, int]]:
    import httpx

    body = {
        "model": "local",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
    }
    started = time.perf_counter()
    response = httpx.post(f"{url}/chat/completions", json=body, timeout=300.0)
    response.raise_for_status()
    return time.perf_counter() - started, response.json()["usage"]


def bench_llm(models: Sequence[str], repeats: int) -> dict[str, Any]:
    from reground.tools.adapters.local_server import launch, stop_launched

    out: dict[str, Any] = {}
    for model in models:
        with tempfile.TemporaryDirectory() as tmp:
            server = launch(model, log=Path(tmp) / "llm.log")
            try:
                prompt_rates, gen_rates = [], []
                for n in range(repeats):
                    # A distinct prefix each time, so llama.cpp's prompt cache does not skip the work.
                    seconds, usage = _chat(server.url, f"Run {n}. {LONG_PROMPT}\nSummarise in one word.", 1)
                    prompt_rates.append(usage["prompt_tokens"] / seconds)
                    seconds, usage = _chat(server.url, f"Run {n}. Write a long story about a cat and a ship.", 128)
                    gen_rates.append(usage["completion_tokens"] / seconds)
                out[model] = {
                    "load_seconds": server.load_seconds,
                    "gguf_mb": round(server.gguf.stat().st_size / 1e6),
                    "prompt_tokens_per_s": round(statistics.median(prompt_rates), 1),
                    "generation_tokens_per_s": round(statistics.median(gen_rates), 1),
                    "repeats": repeats,
                }
            finally:
                stop_launched(server)
    return out


def _merge(out: Path, section: str, value: dict[str, Any]) -> None:
    data = json.loads(out.read_text()) if out.exists() else {}
    data[section] = value
    data["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("benchmarks", nargs="+", choices=["ingest", "overhead", "llm", "startup", "oneshot"])
    parser.add_argument("--docs", type=Path, help="documents .jsonl (ingest, overhead)")
    parser.add_argument("--cases", type=Path, help="cases .jsonl (query latency, overhead)")
    parser.add_argument("--turns", type=int, default=50, help="graph turns for overhead (default 50)")
    parser.add_argument("--models", default="smollm2-135m,qwen2.5-0.5b,qwen2.5-1.5b", help="local models for llm")
    parser.add_argument("--repeats", type=int, default=3, help="requests per measurement for llm (default 3)")
    parser.add_argument(
        "--runs", type=int, default=5, help="fresh processes per command for startup and oneshot (default 5)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the benchmarks' collections live (kept, so a rerun skips the ingest; default: a temporary dir)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    needs_docs = {"ingest", "overhead", "oneshot"} & set(args.benchmarks)
    if needs_docs and args.docs is None:
        parser.error(f"{', '.join(sorted(needs_docs))} needs --docs")
    needs_cases = {"overhead", "oneshot"} & set(args.benchmarks)
    if needs_cases and args.cases is None:
        parser.error(f"{', '.join(sorted(needs_cases))} needs --cases")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    with tempfile.TemporaryDirectory(prefix="reground-bench-") as tmp:
        work = args.data_dir or Path(tmp)
        for name in args.benchmarks:
            if name == "ingest":
                result = bench_ingest(args.docs, args.cases, Path(tmp))  # always fresh stores: it times the ingest
            elif name == "overhead":
                result = bench_overhead(args.docs, args.cases, work, args.turns)
            elif name == "startup":
                result = bench_startup(work, args.runs)
            elif name == "oneshot":
                from reground.evals.perf.oneshot import bench_oneshot

                result = bench_oneshot(args.docs, args.cases, work, args.runs)
            else:
                result = bench_llm([m.strip() for m in args.models.split(",") if m.strip()], args.repeats)
            _merge(args.out, name, result)
            print(json.dumps({name: result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
