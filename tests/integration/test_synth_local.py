"""`reground eval synth` end to end: the CLI, the real llama.cpp server (SmolLM2, as the rest of the suite) and the
real HR test store make 2 dialogues whose every kept case is valid and whose every rejection is counted.

About a minute on a quiet 2-core machine; on one shared by LLM runs SmolLM2 fell to under 1 token/s here, hence the
generous timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
MODEL = "smollm2-135m"


def _cli(*args: str, env: dict[str, str], timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reground", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    pytest.importorskip("llama_cpp", reason="local LLM stack not installed; `make test` installs it")
    from reground.tools.adapters.local_server import LocalServerError, resolve_gguf

    try:
        resolve_gguf(MODEL)
    except LocalServerError as exc:
        pytest.skip(str(exc))
    state = tmp_path_factory.mktemp("llm-state")
    env = {**os.environ, "REGROUND_STATE_DIR": str(state)}
    env.pop("REGROUND_LOCAL_LLM_URL", None)
    started = _cli("llm", "serve", "--model", MODEL, "--n-ctx", "2048", env=env)
    assert started.returncode == 0, started.stderr
    try:
        yield env
    finally:
        _cli("llm", "stop", env=env)


def test_two_dialogues_from_the_real_model(served: dict[str, str], hr_store_dir: str, tmp_path: Path) -> None:
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.synth import REASONS

    out = tmp_path / "synth" / "cases.jsonl"
    args = ["eval", "synth", "--collection", "test-hr", "--data-dir", hr_store_dir, "--dialogues", "2"]
    args += ["--turns", "3", "--unanswerable-share", "0.3", "--out", str(out), "--seed", "1"]
    done = _cli(*args, env=served)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "synth" / "cases.summary.json").read_text())
    assert summary["dialogues_done"] == 2 and summary["llm_calls"] >= 2
    assert set(summary["rejected"]) == set(REASONS)
    # every generated turn is either a written case or a counted rejection
    assert summary["turns_generated"] == summary["cases"] + summary["turns_rejected"]
    docs = {}
    for line in (tmp_path / "synth" / "cases.docs.jsonl").read_text().splitlines():
        row = json.loads(line)
        docs[row["doc_id"]] = row["text"]
    cases = load_cases(out) if summary["cases"] else []
    for case in cases:
        synth = case.extra["synth"]
        assert synth["model"] == "local:default" and synth["seed"] == 1 and synth["collection"] == "test-hr"
        assert case.question.strip() and case.gold_answer
        if case.answerable:
            assert case.gold_span in docs[case.gold_doc_id]
            assert synth["checks"]["history_rank"] is not None
        if synth["kind"] == "unanswerable":
            assert synth["checks"]["support"] < summary["support"]["threshold"]

    # A rerun with the same --out makes nothing new.
    again = _cli(*args, env=served)
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "synth" / "cases.summary.json").read_text())["cases"] == summary["cases"]
