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
from reground.tools.tuning.models import CHAT

pytestmark = pytest.mark.integration
MODEL = "smollm2-135m"


def _cli(*args: str, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
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
    started = _cli("llm", "serve", "--model", MODEL, "--n-ctx", "2048", env=env)
    assert started.returncode == 0, started.stderr
    try:
        yield env
    finally:
        _cli("llm", "stop", env=env)


class Verdict(BaseModel):
    grounded: bool
    reasons: list[str]


def test_structured_replies_in_every_form_against_the_real_server(
    served: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema the server enforces (llama.cpp's json_object + schema), the refusal of OpenAI's json_schema form
    falling through to it, and the tolerant path (schema in the prompt): each yields a valid reply, even from a
    135M model."""
    monkeypatch.setenv("REGROUND_STATE_DIR", served["REGROUND_STATE_DIR"])
    monkeypatch.delenv("REGROUND_LOCAL_LLM_URL", raising=False)
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI
    from reground.tools.adapters import structured
    from reground.tools.adapters.chat import CallStats, LLMReplyError
    from reground.tools.adapters.llm import base_url_for, load_chat_model

    ask = [HumanMessage("Is water wet? Say whether it is grounded and give one reason.")]
    monkeypatch.setattr(structured, "_FORMS_BY_URL", {})
    local = load_chat_model("local:default", timeout_s=CHAT.timeout_s)
    assert structured.candidate_forms(local)[0] == "json_object_schema"
    stats = CallStats()
    verdict, raw = structured.call_json(local, ask, Verdict, stats, tags=["judge"], max_tokens=60)
    assert isinstance(verdict, Verdict) and raw is not None and stats.llm_calls == 1, stats.notes

    # An endpoint we do not know is asked in OpenAI's form first; llama-cpp-python refuses it (HTTP 500).
    url = base_url_for("local:default")
    monkeypatch.setattr(structured, "_FORMS_BY_URL", {})
    unknown = ChatOpenAI(model="some-model", base_url=url, api_key="x", temperature=0, max_retries=0)  # type: ignore[arg-type]
    stats = CallStats()
    verdict, _ = structured.call_json(unknown, ask, Verdict, stats, tags=["judge"], max_tokens=60)
    assert isinstance(verdict, Verdict)
    assert any("refused response_format json_schema" in note for note in stats.notes), stats.notes
    assert structured._FORMS_BY_URL[url] == "json_object_schema", "the working form is remembered per URL"

    # The tolerant path, for endpoints that refuse every schema: the schema in the prompt, one repair.
    monkeypatch.setattr(structured, "candidate_forms", lambda model: ["text"])
    stats = CallStats()
    try:
        verdict, raw = structured.call_json(local, ask, Verdict, stats, tags=["judge"], max_tokens=80)
    except LLMReplyError:  # a 135M model may not follow a schema it is only told about; it was asked twice
        assert stats.llm_calls == 2
    else:
        assert isinstance(verdict, Verdict) and raw is None


def test_a_judge_reads_its_verdict_from_the_real_servers_logprobs(
    served: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hallucination judge asks for one digit and reads the server's top_logprobs of it (evals/runs/judges.py)."""
    monkeypatch.setenv("REGROUND_STATE_DIR", served["REGROUND_STATE_DIR"])
    monkeypatch.delenv("REGROUND_LOCAL_LLM_URL", raising=False)
    from reground.evals.runs.judges import hallucination
    from reground.tools.adapters.chat import CallStats
    from reground.tools.adapters.llm import load_chat_model

    stats = CallStats()
    verdict = hallucination(
        load_chat_model("local:default", max_tokens=320, timeout_s=CHAT.timeout_s),
        history=[],
        question="How many days of leave do I get?",
        answer="You get 40 days of leave and a company car.",
        passages=["Employees get 25 days of paid leave per year."],
        stats=stats,
    )
    assert verdict.source == "logprobs" and 0.0 < verdict.coverage <= 1.0, verdict.raw
    assert sum(verdict.probabilities.values()) == pytest.approx(1.0) and set(verdict.probabilities) == {0, 1}
    assert stats.llm_calls == 1 and stats.completion_tokens <= 1, "one call capped at one token"


def test_serve_status_chat_structured_and_stop(served: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    status = _cli("llm", "status", env=served)
    assert status.returncode == 0 and MODEL in status.stdout and "/v1" in status.stdout

    monkeypatch.setenv("REGROUND_STATE_DIR", served["REGROUND_STATE_DIR"])
    monkeypatch.delenv("REGROUND_LOCAL_LLM_URL", raising=False)
    from reground.tools.adapters import local_server
    from reground.tools.adapters.llm import ensure_reachable, load_chat_model

    info = local_server.status()
    assert info is not None
    assert ensure_reachable("local:default") == info.url

    model = load_chat_model("local:default", max_tokens=24, timeout_s=CHAT.timeout_s)
    reply = model.invoke("Say hello in one word.")
    assert isinstance(reply.content, str) and reply.content.strip()
    usage = reply.usage_metadata or {}
    assert 0 < usage.get("output_tokens", 0) <= 24, "the token cap must reach llama.cpp"

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
