"""`reground engine status|stop` without starting PostgreSQL: what a postmaster.pid says is read as PostgreSQL writes
it, a dead or missing server is "not running", and a spec reground did not start is refused without its password."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from reground.tools.stores.engine.process import EngineError, local_engine_dir_of, local_engine_status

from reground.cli import main


def _postmaster_pid(path: Path, pid: int, state: str = "ready") -> None:
    path.mkdir(parents=True, exist_ok=True)
    lines = [str(pid), str(path), "1765000000", "54321", "/tmp/sock", "127.0.0.1", "  1234567   98765", state]
    (path / "postmaster.pid").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_running_server_is_read_from_its_pid_file(tmp_path: Path) -> None:
    _postmaster_pid(tmp_path / "pg", os.getpid())  # a live process stands in for the postmaster
    status = local_engine_status(tmp_path / "pg")
    assert status is not None
    assert (status.pid, status.port, status.socket_dir, status.state) == (os.getpid(), 54321, "/tmp/sock", "ready")


def test_a_dead_or_missing_server_is_not_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert local_engine_status(tmp_path / "none") is None
    _postmaster_pid(tmp_path / "dead", 2**22 + 12345)  # above Linux's default pid_max: no such process
    assert local_engine_status(tmp_path / "dead") is None
    assert main(["engine", "status", "--store", f"pgserver:{tmp_path / 'dead'}"]) == 1
    assert "no engine is running" in capsys.readouterr().out
    assert main(["engine", "stop", "--store", f"pgserver:{tmp_path / 'none'}"]) == 0
    assert "no engine was running" in capsys.readouterr().out


def test_only_a_bundled_engine_is_ours_to_stop(tmp_path: Path) -> None:
    assert local_engine_dir_of(f"pgserver:{tmp_path}") == tmp_path.resolve()
    with pytest.raises(EngineError, match="is not a bundled engine") as caught:
        local_engine_dir_of("postgresql://reground:secret@db.internal:5432/reground")
    assert "secret" not in str(caught.value)
