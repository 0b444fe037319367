"""No API key in logs, traces, streamed events or thread state.

A turn runs through the real `openai:` path (ChatOpenAI built from the spec, key from
OPENAI_API_KEY) against a local OpenAI-compatible stub that checks the key arrives as the bearer
token — so the key is really in use — and then everything a user could see or store is searched:
stdout/stderr, every log record at DEBUG, every callback payload (what a tracer such as LangSmith
receives), every streamed chunk, the final state, every checkpoint and its serialized bytes.
"""

from __future__ import annotations

import json
import logging
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context

SECRET = f"sk-test-SECRET-{uuid.uuid4().hex}"


@pytest.fixture
def openai_stub() -> Iterator[FakeOpenAI]:
    """The shared OpenAI-compatible stub (tests/unit/fake_openai.py), answering structured calls in shape."""
    server = FakeOpenAI(structured=True).start()
    try:
        yield server
    finally:
        server.stop()


class Recorder(BaseCallbackHandler):
    """Keeps every callback payload, as a tracer would send it."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def _keep(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.events.append(json.dumps([name, args, kwargs], default=repr))

    def on_chain_start(self, *args: Any, **kwargs: Any) -> None:
        self._keep("chain_start", *args, **kwargs)

    def on_chain_end(self, *args: Any, **kwargs: Any) -> None:
        self._keep("chain_end", *args, **kwargs)

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self._keep("chat_model_start", *args, **kwargs)

    def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
        self._keep("llm_end", *args, **kwargs)

    def on_chain_error(self, *args: Any, **kwargs: Any) -> None:
        self._keep("chain_error", *args, **kwargs)


def dump(value: Any) -> str:
    return json.dumps(value, default=repr)


def test_api_key_is_used_but_never_shown_or_stored(
    openai_stub: FakeOpenAI,
    hr_store: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_stub.url)
    caplog.set_level(logging.DEBUG)
    checkpointer = InMemorySaver()
    graph = build_graph(store=hr_store, checkpointer=checkpointer)
    context = Context(
        collection="test-hr",
        chat_model="openai:gpt-4o-mini",
        groundedness={"max_reground_attempts": 1},
        answer_style="write",
    )
    recorder = Recorder()
    config = run_config(context, configurable={"thread_id": "secret"}, callbacks=[recorder])
    chunks = [
        dump(chunk)
        for chunk in graph.stream(
            {"messages": [{"role": "user", "content": "How much annual leave do I get?"}]},
            config=config,
            context=context,
            stream_mode=["updates", "custom", "messages", "values", "debug"],
        )
    ]
    assert openai_stub.auth and all(a == f"Bearer {SECRET}" for a in openai_stub.auth), (
        "the turn must really have called the model with the key"
    )
    state_config = run_config(context, configurable={"thread_id": "secret"})
    state = graph.get_state(state_config)
    assert state.values["result"]["answer"]
    history = list(graph.get_state_history(state_config))
    serialized = [checkpointer.serde.dumps_typed(h.values)[1] for h in history]
    captured = capsys.readouterr()
    places = {
        "streamed chunks": "\n".join(chunks),
        "final state": dump(state.values),
        "checkpoints": dump([h.values for h in history]) + dump([h.metadata for h in history]),
        "serialized checkpoints": b"".join(serialized).decode("utf-8", errors="replace"),
        "callback payloads (traces)": "\n".join(recorder.events),
        "log records": "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in caplog.records),
        "stdout": captured.out,
        "stderr": captured.err,
    }
    assert recorder.events and caplog.records, "nothing was recorded: the search below would be vacuous"
    leaked = [place for place, text in places.items() if SECRET in text or SECRET[:24] in text]
    assert not leaked, f"the API key appears in: {leaked}"


def test_unreachable_model_error_names_the_url_not_the_key(
    hr_store: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", dead)
    caplog.set_level(logging.DEBUG)
    context = Context(collection="test-hr", chat_model="openai:gpt-4o-mini", answer_style="write")
    with pytest.raises(Exception) as failure:
        build_graph(store=hr_store).invoke(
            {"messages": [{"role": "user", "content": "How much annual leave do I get?"}]},
            config=run_config(context),
            context=context,
        )
    message = str(failure.value)
    assert "127.0.0.1" in message and SECRET not in message
    assert all(SECRET not in r.getMessage() for r in caplog.records)
