"""`reground engine status|stop` against a real bundled engine: a `pgserver:<dir>` store starts PostgreSQL and leaves
it running after the process that opened it exits; the CLI shows it and stops it (as `reground llm stop` does for the
LLM server), and a spec it did not start is refused with one line."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def reground(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reground", *argv], capture_output=True, text=True, timeout=180, check=False
    )


@pytest.fixture
def engine_dir() -> Iterator[Path]:
    """A directory of its own (see test_engine_store.py); whatever the test leaves running is stopped by its PID."""
    root = Path(tempfile.mkdtemp(prefix="reground-engine-cli-"))
    path = root / "pg"
    try:
        yield path
    finally:
        pid_file = path / "postmaster.pid"
        if pid_file.is_file():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text().splitlines()[0]), signal.SIGTERM)
        shutil.rmtree(root, ignore_errors=True)


def test_a_started_engine_is_shown_and_stopped(engine_dir: Path) -> None:
    import psutil

    spec = f"pgserver:{engine_dir}"
    # Another process opens the store spec and exits: the engine keeps running (that is the design).
    opened = subprocess.run(
        [sys.executable, "-c", f"from reground.tools.stores.postgres import engine_uri; engine_uri({spec!r})"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert opened.returncode == 0, opened.stderr[-2000:]
    pid = int((engine_dir / "postmaster.pid").read_text().splitlines()[0])
    assert psutil.pid_exists(pid)

    status = reground("engine", "status", "--store", spec)
    assert status.returncode == 0, status.stderr
    assert f"pid {pid}" in status.stdout and "ready" in status.stdout, status.stdout

    stop = reground("engine", "stop", "--store", spec)
    assert stop.returncode == 0, stop.stderr
    assert f"stopped the engine in {engine_dir.resolve()} (pid {pid})" in stop.stdout
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not (engine_dir / "postmaster.pid").exists()

    after = reground("engine", "status", "--store", spec)
    assert after.returncode == 1 and "no engine is running" in after.stdout, after.stdout
    again = reground("engine", "stop", "--store", spec)
    assert again.returncode == 0 and "no engine was running" in again.stdout, again.stdout


def test_an_engine_reground_did_not_start_is_refused() -> None:
    done = reground("engine", "stop", "--store", "postgresql://reground:secret@db.internal:5432/reground")
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert "is not a bundled engine" in done.stderr and "secret" not in done.stderr, done.stderr
