"""`reground worker`: a warm process answers `reground ask` for its data dir with the reply the command gives alone,
serves only clients with its own settings, hands a user's error back as the same one-line error, and stops."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reground.tools.errors import InputError

from reground.cli import main
from reground.commands.ask_worker import ask_worker, read_record
from tests.conftest import copy_of_hr_store

pytestmark = pytest.mark.integration

QUESTION = "How many days of annual leave do full-time employees in Germany get?"


@pytest.fixture(scope="module")
def data_dir(hr_store_dir: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    return copy_of_hr_store(hr_store_dir, tmp_path_factory, "worker-store")


@pytest.fixture(scope="module")
def model() -> Iterator[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
    from fake_openai import FakeOpenAI

    llm = FakeOpenAI(structured=True).start()
    yield llm.spec
    llm.stop()


def reground(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reground", *argv], capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def worker(data_dir: str) -> Iterator[dict[str, Any]]:
    started = reground("worker", "start", "--data-dir", data_dir, "--collection", "test-hr")
    assert started.returncode == 0, started.stderr[-2000:]
    record = read_record(data_dir)
    assert record is not None and "worker serving" in started.stdout
    yield record
    reground("worker", "stop", "--data-dir", data_dir)


def _args(data_dir: str, model: str, question: str = QUESTION, **extra: Any) -> argparse.Namespace:
    values = {"collection": "test-hr", "data_dir": data_dir, "store": None, "model": model, "filter": None}
    values |= {"thread": "worker-test", "set": [], "review": None, "question": question, **extra}
    return argparse.Namespace(**values)


def _reply(result: dict[str, Any]) -> tuple[Any, ...]:
    return result["kind"], result["answer"], [c["doc_id"] for c in result["citations"]], result["passed"]


def test_the_worker_answers_as_the_command_alone(
    worker: dict[str, Any], data_dir: str, model: str, capfd: pytest.CaptureFixture[str]
) -> None:
    progress: list[str] = []
    served = ask_worker(_args(data_dir, model, thread="served"), progress.append)
    assert served is not None and progress, "the worker served the turn and streamed its progress"
    alone = _args(data_dir, model, review="off", thread="alone")  # a reviewer: the command runs the turn itself
    assert ask_worker(alone, None) is None
    argv = ["ask", QUESTION, "--collection", "test-hr", "--data-dir", data_dir, "--model", model, "--json", "--quiet"]
    assert main([*argv, "--review", "off", "--thread", "alone"]) == 0
    assert _reply(json.loads(capfd.readouterr().out)) == _reply(served)
    assert "30" in served["answer"]


def test_a_client_with_other_settings_runs_alone(
    worker: dict[str, Any], data_dir: str, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGROUND_TRIAGE__READING_RATIO", "0.7")
    assert ask_worker(_args(data_dir, model), None) is None


def test_a_user_error_comes_back_as_itself(worker: dict[str, Any], data_dir: str, model: str) -> None:
    with pytest.raises(InputError, match="no letters or digits"):
        ask_worker(_args(data_dir, model, question="???"), None)
    with pytest.raises(InputError, match="--set"):
        ask_worker(_args(data_dir, model, set=["triage.no_such_field=1"]), None)


def test_stop_ends_it(worker: dict[str, Any], data_dir: str, model: str) -> None:
    status = reground("worker", "status", "--data-dir", data_dir)
    assert status.returncode == 0 and f"pid {worker['pid']}" in status.stdout
    stopped = reground("worker", "stop", "--data-dir", data_dir)
    assert stopped.returncode == 0 and f"stopped the ask worker (pid {worker['pid']})" in stopped.stdout
    assert read_record(data_dir) is None and ask_worker(_args(data_dir, model), None) is None
    with pytest.raises(ProcessLookupError):
        os.kill(int(worker["pid"]), 0)
    assert reground("worker", "status", "--data-dir", data_dir).returncode == 1
