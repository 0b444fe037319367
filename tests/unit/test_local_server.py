"""The local model launcher's bookkeeping: joining and checking weights, the run record, the CLI."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from reground.tools.adapters import local_server
from reground.tools.adapters.local_server import LocalServerError, ModelSpec


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGROUND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("REGROUND_STATE_DIR", str(tmp_path / "state"))


def _chunked_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, tamper: bool = False) -> tuple[str, bytes]:
    blobs = [os.urandom(1000), os.urandom(777), os.urandom(10)]
    paths = []
    for number, blob in enumerate(blobs, start=1):
        path = tmp_path / f"part{number:02d}.bin"
        path.write_bytes(blob)
        paths.append(path)
    joined = b"".join(blobs)
    spec = ModelSpec(
        name="tiny",
        description="test",
        parts=tuple((f"tiny-part{i}", f"part{i:02d}.bin") for i in range(1, 4)),
        file_name="tiny.gguf",
        size=len(joined),
        sha256=hashlib.sha256(b"x" if tamper else joined).hexdigest(),
        install="pip install tiny",
    )
    monkeypatch.setitem(local_server.MODELS, "tiny", spec)
    monkeypatch.setattr(local_server, "_part_paths", lambda s: paths if s.name == "tiny" else [])
    return "tiny", joined


def test_chunked_model_is_joined_once_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, joined = _chunked_model(tmp_path, monkeypatch)
    path = local_server.resolve_gguf(name)
    assert path.read_bytes() == joined
    assert path.parent == tmp_path / "cache" / "models"
    # The second call trusts the verified marker: a re-join would have to read the parts again.
    monkeypatch.setattr(local_server, "_part_paths", lambda s: [])
    assert local_server.resolve_gguf(name) == path


def test_tampered_chunks_are_rejected_and_leave_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, _ = _chunked_model(tmp_path, monkeypatch, tamper=True)
    with pytest.raises(LocalServerError, match="sha256") as error:
        local_server.resolve_gguf(name)
    assert "pip install tiny" in str(error.value)
    models = tmp_path / "cache" / "models"
    assert not any(models.iterdir()), "no partial or unverified model may stay in the cache"


def test_missing_packages_name_the_install_command() -> None:
    spec = local_server.MODELS["qwen2.5-1.5b"]
    missing = ModelSpec(**{**spec.__dict__, "parts": (("reground-no-such-dist", "x.bin"),)})
    with pytest.raises(LocalServerError, match="reground-no-such-dist") as error:
        local_server._part_paths(missing)
    assert spec.install in str(error.value)


def test_every_row_of_the_model_table_is_in_the_specs_field_order() -> None:
    # MODELS is written positionally: two fields swapped in a row fail here, not at a user's first download.
    assert local_server.DEFAULT_MODEL in local_server.MODELS
    for name, spec in local_server.MODELS.items():
        assert spec.name == name and spec.file_name.endswith(".gguf") and spec.install.startswith("pip install ")
        assert re.fullmatch(r"[0-9a-f]{64}", spec.sha256) and spec.size > 10_000_000
        assert re.search(r"\(\d+ MB\)|\([\d.]+ GB\)", spec.description), "the description names the size"
        assert spec.parts and all(dist and relative.endswith((".bin", ".gguf")) for dist, relative in spec.parts)


def test_serve_passes_its_launch_options_on_and_records_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = tmp_path / "model.gguf"
    launched: dict[str, object] = {}

    def fake_launch(model: str, **options: object) -> local_server.LaunchedServer:
        launched.update(model=model, **options)
        process = SimpleNamespace(pid=os.getpid())  # a live pid: serve reads its start time
        return local_server.LaunchedServer(process, "http://127.0.0.1:9/v1", 9, gguf, tmp_path / "l", 0.0)  # type: ignore[arg-type]

    monkeypatch.setattr(local_server, "resolve_gguf", lambda model: gguf)
    monkeypatch.setattr(local_server, "launch", fake_launch)
    info = local_server.serve("smollm2-135m", port=9, n_ctx=2048, data=tmp_path / "data")
    assert launched == {"model": "smollm2-135m", "port": 9, "n_ctx": 2048, "data": tmp_path / "data"}
    assert (info.model, info.port, info.url) == ("smollm2-135m", 9, "http://127.0.0.1:9/v1")
    assert json.loads((tmp_path / "state" / "llm-server.json").read_text())["pid"] == os.getpid()


def test_unknown_model_and_missing_gguf_path() -> None:
    with pytest.raises(LocalServerError, match=r"unknown local model 'gpt-9'.*qwen2\.5-0\.5b"):
        local_server.resolve_gguf("gpt-9")
    with pytest.raises(LocalServerError, match="GGUF file not found"):
        local_server.resolve_gguf("/nowhere/model.gguf")
    assert local_server.model_spec("default").name == local_server.DEFAULT_MODEL


def test_a_stale_record_is_dropped(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    record = tmp_path / "state" / "llm-server.json"
    record.parent.mkdir(parents=True)
    info = {"url": "http://127.0.0.1:9/v1", "pid": dead.pid, "port": 9, "model": "m", "gguf": "g", "log": "l"}
    record.write_text(json.dumps({**info, "started_at": 0.0}))
    assert local_server.recorded_server_url() is None
    assert local_server.status() is None
    assert not record.exists()
    assert local_server.stop() is None


def _fake_server(port: int) -> subprocess.Popen[bytes]:
    """A process whose command line reads like the llama.cpp server's (it only sleeps), in its own session."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "-m", "llama_cpp.server", "--port", str(port)],
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while b"llama_cpp.server" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():  # until exec has happened
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return proc


def _record(state: Path, proc: subprocess.Popen[bytes], port: int, data_dir: Path | str) -> dict[str, object]:
    info = {
        "url": f"http://127.0.0.1:{port}/v1", "pid": proc.pid, "port": port, "model": "m", "gguf": "g",
        "log": "l", "started_at": 0.0, "data_dir": str(data_dir), "proc_start": local_server._proc_start(proc.pid),
    }  # fmt: skip
    state.mkdir(parents=True, exist_ok=True)
    (state / "llm-server.json").write_text(json.dumps(info))
    return info


def test_a_live_record_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGROUND_DATA_DIR", str(tmp_path / "data"))
    proc = _fake_server(9)
    try:
        _record(tmp_path / "state", proc, 9, tmp_path / "data")
        assert local_server.recorded_server_url() == "http://127.0.0.1:9/v1"
        status = local_server.status()
        assert status is not None and status.pid == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_record_naming_a_process_that_is_not_the_server_is_stale(tmp_path: Path) -> None:
    """A reused pid (here: this test's own process) is never reported, and never signalled."""
    record = tmp_path / "state" / "llm-server.json"
    record.parent.mkdir(parents=True)
    info = {"url": "http://127.0.0.1:9/v1", "pid": os.getpid(), "port": 9, "model": "m", "gguf": "g", "log": "l"}
    record.write_text(json.dumps({**info, "started_at": 0.0}))
    assert local_server.status() is None and not record.exists()
    assert local_server.stop() is None  # and this process is still alive to assert it


def test_the_record_follows_the_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without $REGROUND_STATE_DIR each data dir keeps its own record in <data dir>/run."""
    monkeypatch.delenv("REGROUND_STATE_DIR")
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    proc = _fake_server(9)
    try:
        _record(alice / "run", proc, 9, alice)
        assert local_server.status(alice) is not None
        assert local_server.status(bob) is None and local_server.recorded_server_url(bob) is None
        monkeypatch.setenv("REGROUND_DATA_DIR", str(bob))
        assert local_server.status() is None and local_server.stop() is None
        assert proc.poll() is None, "bob's stop must not touch alice's server"
        monkeypatch.setenv("REGROUND_DATA_DIR", str(alice))
        stopped = local_server.stop()
        assert stopped is not None and stopped.pid == proc.pid
        proc.wait(timeout=15)  # ended (stop reaped it, so its exit status is not ours to read)
        assert not local_server._alive(proc.pid) and not (alice / "run" / "llm-server.json").exists()
    finally:
        proc.kill()
        proc.wait()


def test_stop_refuses_a_server_another_data_dir_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A state dir shared through $REGROUND_STATE_DIR: the record names its data dir; others leave it alone."""
    proc = _fake_server(9)
    try:
        _record(tmp_path / "state", proc, 9, tmp_path / "alice")
        monkeypatch.setenv("REGROUND_DATA_DIR", str(tmp_path / "bob"))
        with pytest.raises(LocalServerError, match=r"was started for data dir .*alice"):
            local_server.stop()
        assert proc.poll() is None
        env = {**os.environ}
        out = subprocess.run(
            [sys.executable, "-m", "reground", "llm", "stop"], env=env, capture_output=True, text=True, check=False
        )
        assert out.returncode == 4 and "alice" in out.stderr and proc.poll() is None
        stopped = subprocess.run(
            [sys.executable, "-m", "reground", "llm", "stop", "--data-dir", str(tmp_path / "alice")],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert stopped.returncode == 0 and f"pid {proc.pid}" in stopped.stdout, stopped.stderr
        proc.wait(timeout=15)
        assert not local_server._alive(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_cli_models_and_status(tmp_path: Path) -> None:
    env = {**os.environ, "REGROUND_STATE_DIR": str(tmp_path / "state"), "REGROUND_CACHE_DIR": str(tmp_path / "c")}
    models = subprocess.run(
        [sys.executable, "-m", "reground", "llm", "models"], env=env, capture_output=True, text=True, check=True
    )
    assert "qwen2.5-0.5b [default]" in models.stdout and "smollm2-135m" in models.stdout
    status = subprocess.run(
        [sys.executable, "-m", "reground", "llm", "status"], env=env, capture_output=True, text=True, check=False
    )
    assert status.returncode == 1 and "no local LLM server is running" in status.stdout
