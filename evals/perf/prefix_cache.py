"""How much of each turn's prompt the llama.cpp prefix cache serves, read from the local server's own log.

    offset=$(stat -c %s ~/.local/share/reground/run/llm-server.log)
    .venv/bin/reground eval answers ... --systems reground-write --out RUN
    .venv/bin/python -m reground.evals.perf.prefix_cache --offset "$offset" --run RUN --system reground-write

Every call of a turn is laid out on one shared prefix (system, passages, dialogue; nodes/common.grounded_messages),
so after a turn's first call the server should evaluate only the call's own task. llama-cpp-python logs, per
request, "Llama.generate: H prefix-match hit, remaining R prompt tokens to eval": H tokens came from the cache of
the request before, R were evaluated. The run's cases.jsonl says how many calls each turn made (`llm_calls`), in
the order they ran, so the log's requests after `offset` are attributed to turns in that order; the module refuses
a log whose request count differs from the run's, since the attribution would then be wrong.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_GENERATE = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")


def cache_reads(log_text: str) -> list[tuple[int, int]]:
    """(tokens served from the cache, tokens evaluated) for every request the log records, in order."""
    return [(int(m.group(1)), int(m.group(2))) for m in _GENERATE.finditer(log_text)]


def per_turn(reads: Sequence[tuple[int, int]], calls_per_turn: Sequence[int]) -> list[dict[str, Any]]:
    """The requests grouped by turn: per turn its calls, prompt tokens, tokens served from the cache and their
    share (None for a turn that made no call)."""
    if len(reads) != sum(calls_per_turn):
        raise ValueError(
            f"the log holds {len(reads)} requests but the run's turns made {sum(calls_per_turn)} calls: "
            "give the log offset from just before the run, and a run no other client shared the server with"
        )
    turns: list[dict[str, Any]] = []
    start = 0
    for calls in calls_per_turn:
        own = reads[start : start + calls]
        start += calls
        cached = sum(hit for hit, _ in own)
        prompt = cached + sum(rest for _, rest in own)
        turns.append(
            {
                "calls": calls,
                "prompt_tokens": prompt,
                "cached_tokens": cached,
                "cached_share": round(cached / prompt, 4) if prompt else None,
            }
        )
    return turns


def summarize(turns: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Shares over the turns that called the model, and over those with more than one call (where a shared prefix
    can be served at all: a turn's first call follows another turn's)."""

    def shares(subset: Sequence[dict[str, Any]]) -> dict[str, Any]:
        values = [t["cached_share"] for t in subset]
        prompt = sum(t["prompt_tokens"] for t in subset)
        return {
            "turns": len(subset),
            "median_share": round(statistics.median(values), 4) if values else None,
            "mean_share": round(statistics.mean(values), 4) if values else None,
            "tokens_share": round(sum(t["cached_tokens"] for t in subset) / prompt, 4) if prompt else None,
        }

    called = [t for t in turns if t["calls"]]
    return {
        "turns": len(turns),
        "with_calls": shares(called),
        "with_several_calls": shares([t for t in called if t["calls"] > 1]),
        "calls_per_turn_mean": round(statistics.mean(t["calls"] for t in turns), 3) if turns else None,
    }


def call_shares(reads: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Per request: how many read at least half their prompt from the cache (a call after another on the same
    passages and dialogue: a check or a refinement after the answer), and the share those got; the others follow a
    call with another prompt (the question rewrite before retrieval, a re-ground's new passages, another turn)."""
    served = [(hit, rest) for hit, rest in reads if hit >= rest]
    prompt = sum(hit + rest for hit, rest in served)
    return {
        "calls": len(reads),
        "mostly_cached_calls": len(served),
        "mostly_cached_tokens_share": round(sum(hit for hit, _ in served) / prompt, 4) if prompt else None,
    }


def measure(log: Path, offset: int, run: Path, system: str, end: int | None = None) -> dict[str, Any]:
    with log.open("rb") as fh:
        fh.seek(offset)
        text = fh.read(None if end is None else end - offset).decode("utf-8", errors="replace")
    rows = [json.loads(line) for line in (run / system / "cases.jsonl").read_text(encoding="utf-8").splitlines()]
    reads = cache_reads(text)
    turns = per_turn(reads, [int(row.get("llm_calls") or 0) for row in rows])
    return {"run": str(run), "system": system, **summarize(turns), "per_call": call_shares(reads)}


def main(argv: Sequence[str] | None = None) -> int:
    from reground.tools.adapters.paths import state_dir

    parser = argparse.ArgumentParser(prog="python -m reground.evals.perf.prefix_cache", description=__doc__)
    parser.add_argument("--log", type=Path, default=None, help="the server log (default: the recorded server's)")
    parser.add_argument("--offset", type=int, required=True, help="the log's size in bytes just before the run")
    parser.add_argument("--end", type=int, default=None, help="the log's size just after the run (default: its end)")
    parser.add_argument("--run", type=Path, required=True, help="the `eval answers` output directory")
    parser.add_argument("--system", required=True, help="the one system the run asked the server for")
    parser.add_argument("--out", type=Path, default=None, help="write the summary here (JSON)")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    log = args.log or state_dir(args.data_dir) / "llm-server.log"
    result = measure(log, args.offset, args.run, args.system, args.end)
    text = json.dumps(result, indent=2) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
