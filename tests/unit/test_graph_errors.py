"""Bad input and broken dependencies fail clearly and lose nothing."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from reground.graph.builder import build_graph, run_config
from reground.graph.context import Context, ContextError
from reground.tools.fake_chat import ScriptedChatModel
from reground.tools.llm import LLMUnavailableError
from reground.tools.store import CollectionNotFoundError


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ask(graph: Any, context: Context, question: str) -> dict[str, Any]:
    payload = {"messages": [{"role": "user", "content": question}]}
    return graph.invoke(payload, config=run_config(context), context=context)


def test_llm_down_fails_at_once_naming_the_url_and_the_ways_out(
    hr_store_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    monkeypatch.setenv("REGROUND_LOCAL_LLM_URL", url)
    context = Context(collection="test-hr", data_dir=hr_store_dir)
    with pytest.raises(LLMUnavailableError) as info:
        _ask(build_graph(), context, "How much annual leave do I get?")
    message = str(info.value)
    assert url in message and "reground llm serve" in message and "OPENAI_API_KEY" in message


def test_missing_collection_is_a_clear_error_naming_it(hr_store_dir: str) -> None:
    context = Context(collection="no-such-docs", data_dir=hr_store_dir)
    with pytest.raises(CollectionNotFoundError, match="no-such-docs"):
        _ask(build_graph(chat_model=ScriptedChatModel()), context, "How much annual leave do I get?")


def test_huge_question_is_cut_to_the_budget_with_a_note(hr_store: Any, hr_store_dir: str) -> None:
    model = ScriptedChatModel()
    context = Context(collection="test-hr", data_dir=hr_store_dir, question_token_budget=50)
    graph = build_graph(chat_model=model, store=hr_store)
    out = graph.invoke(
        {"messages": [{"role": "user", "content": "annual leave " * 5000}]}, config=run_config(context), context=context
    )
    assert out["result"]["answer"]
    state_trace = graph.get_graph()  # the graph still compiles and draws
    assert "start_turn" in state_trace.nodes


def test_a_model_that_raises_junk_errors_is_not_swallowed(hr_store: Any, hr_store_dir: str) -> None:
    model = ScriptedChatModel(script={"answer": [RuntimeError("backend exploded")]})
    context = Context(collection="test-hr", data_dir=hr_store_dir)
    with pytest.raises(RuntimeError, match="backend exploded"):
        _ask(build_graph(chat_model=model, store=hr_store), context, "How much annual leave do I get?")


@pytest.mark.parametrize(
    ("field", "value"),
    [("top_n", 0), ("groundedness_threshold", 1.5), ("rerank_method", "magic"), ("collection", "x"), ("n_samples", -1)],
)
def test_invalid_context_values_name_the_field(field: str, value: Any) -> None:
    with pytest.raises(ContextError, match=field):
        Context(**{field: value})


def test_context_falls_back_to_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGROUND_TOP_N", "5")
    monkeypatch.setenv("REGROUND_METADATA_FILTER", '{"country": "DE"}')
    monkeypatch.setenv("REGROUND_USE_SELF_CHECK", "false")
    context = Context()
    assert context.top_n == 5 and context.metadata_filter == {"country": "DE"} and context.use_self_check is False
    assert Context(top_n=2).top_n == 2, "an explicit value wins over the environment"
