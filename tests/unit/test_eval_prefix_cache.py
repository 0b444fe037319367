"""The prefix-cache share read from the local server's log (evals/perf/prefix_cache.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reground.evals.perf.prefix_cache import cache_reads, measure, per_turn

LOG = """INFO:     127.0.0.1:42068 - "POST /v1/chat/completions HTTP/1.1" 200 OK
Llama.generate: 4 prefix-match hit, remaining 696 prompt tokens to eval
llama_perf_context_print: prompt eval time =    6314.10 ms /   696 tokens
Llama.generate: 650 prefix-match hit, remaining 50 prompt tokens to eval
Llama.generate: 600 prefix-match hit, remaining 100 prompt tokens to eval
Llama.generate: 3 prefix-match hit, remaining 297 prompt tokens to eval
"""


def test_each_request_reads_its_cached_and_evaluated_tokens() -> None:
    assert cache_reads(LOG) == [(4, 696), (650, 50), (600, 100), (3, 297)]


def test_requests_are_attributed_to_turns_in_order_and_a_turn_without_calls_has_no_share() -> None:
    turns = per_turn(cache_reads(LOG), [3, 0, 1])
    assert [t["calls"] for t in turns] == [3, 0, 1]
    assert turns[0]["prompt_tokens"] == 2100 and turns[0]["cached_tokens"] == 1254
    assert turns[0]["cached_share"] == pytest.approx(1254 / 2100, abs=1e-4)
    assert turns[1]["cached_share"] is None and turns[2]["cached_share"] == 0.01


def test_a_log_that_does_not_match_the_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="4 requests but the run's turns made 3 calls"):
        per_turn(cache_reads(LOG), [2, 1])
    log = tmp_path / "llm-server.log"
    log.write_text("an earlier run\n" + LOG, encoding="utf-8")
    run = tmp_path / "run"
    (run / "reground-write").mkdir(parents=True)
    rows = [{"case_id": "a", "llm_calls": 3}, {"case_id": "b", "llm_calls": 1}]
    (run / "reground-write" / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary = measure(log, len("an earlier run\n"), run, "reground-write")
    assert summary["with_several_calls"]["turns"] == 1
    assert summary["with_several_calls"]["tokens_share"] == pytest.approx(1254 / 2100, abs=1e-4)
    assert summary["with_calls"]["turns"] == 2
    assert summary["per_call"] == {"calls": 4, "mostly_cached_calls": 2, "mostly_cached_tokens_share": 0.8929}
