"""The real thing: `reground llm serve` starts llama.cpp on SmolLM2, chat models reach it, `stop` ends it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

pytestmark = pytest.mark.integration
MODEL = "smollm2-135m"


def _cli(*args: str, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reground", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    pytest.importorskip("llama_cpp", reason="local LLM stack not installed; `make test` installs it")
    from reground.tools.local_server import LocalServerError, resolve_gguf

    try:
        resolve_gguf(MODEL)
    except LocalServerError as exc:
        pytest.skip(str(exc))
    state = tmp_path_factory.mktemp("llm-state")
    env = {**os.environ, "REGROUND_STATE_DIR": str(state)}
    started = _cli("llm", "serve", "--model", MODEL, "--n-ctx", "2048", env=env)
    assert started.returncode == 0, started.stderr
    try:
        yield env
    finally:
        _cli("llm", "stop", env=env)


def test_serve_status_chat_structured_and_stop(served: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    status = _cli("llm", "status", env=served)
    assert status.returncode == 0 and MODEL in status.stdout and "/v1" in status.stdout

    monkeypatch.setenv("REGROUND_STATE_DIR", served["REGROUND_STATE_DIR"])
    monkeypatch.delenv("REGROUND_LOCAL_LLM_URL", raising=False)
    from reground.tools import local_server
    from reground.tools.llm import ensure_reachable, load_chat_model, structured_output_method

    info = local_server.status()
    assert info is not None
    assert ensure_reachable("local:default") == info.url

    model = load_chat_model("local:default", max_tokens=24)
    reply = model.invoke("Say hello in one word.")
    assert isinstance(reply.content, str) and reply.content.strip()
    usage = reply.usage_metadata or {}
    assert 0 < usage.get("output_tokens", 0) <= 24, "the token cap must reach llama.cpp"

    class Verdict(BaseModel):
        grounded: bool

    structured = load_chat_model("local:default", max_tokens=40).with_structured_output(
        Verdict, method=structured_output_method("local:default")
    )
    try:
        verdict = structured.invoke("Is water wet? Answer with the tool.")
    except Exception as exc:  # a 135M model may emit junk arguments; the call itself must have worked
        assert "validation" in str(exc).lower() or "json" in str(exc).lower() or "parse" in str(exc).lower(), exc
    else:
        assert isinstance(verdict, Verdict)

    # Serving again reuses the running server instead of starting a second one.
    again = _cli("llm", "serve", "--model", MODEL, env=served)
    assert again.returncode == 0 and f"pid {info.pid}" in again.stdout

    stopped = _cli("llm", "stop", env=served)
    assert stopped.returncode == 0 and f"pid {info.pid}" in stopped.stdout
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{info.pid}").exists():
        time.sleep(0.1)
    assert not Path(f"/proc/{info.pid}").exists() or "Z" in Path(f"/proc/{info.pid}/stat").read_text().split()[2]
    assert local_server.status() is None
    assert _cli("llm", "status", env=served).returncode == 1
