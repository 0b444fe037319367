"""Bad input and broken dependencies fail clearly and lose nothing."""

from __future__ import annotations

import importlib
import re
import socket
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context, ContextError
from reground.tools.adapters.llm import LLMUnavailableError
from reground.tools.errors import DataError, InputError, ModelError, RegroundError
from reground.tools.stores.store import CollectionNotFoundError
from reground.tools.text.tokens import count_tokens

from reground.testing.fake_chat import ScriptedChatModel


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
    # A written reply needs the model at every turn (the extract default goes on without it: test_cli_offline.py).
    context = Context(collection="test-hr", data_dir=hr_store_dir, answer_style="write")
    with pytest.raises(LLMUnavailableError) as info:
        _ask(build_graph(), context, "How much annual leave do I get?")
    message = str(info.value)
    assert url in message and "reground llm serve" in message and "OPENAI_API_KEY" in message


def test_missing_collection_is_a_clear_error_naming_it(hr_store_dir: str) -> None:
    context = Context(collection="no-such-docs", data_dir=hr_store_dir)
    with pytest.raises(CollectionNotFoundError, match="no-such-docs"):
        _ask(build_graph(chat_model=ScriptedChatModel()), context, "How much annual leave do I get?")


def test_huge_question_is_cut_to_the_budget_and_the_result_says_so(hr_store: Any, hr_store_dir: str) -> None:
    model = ScriptedChatModel()
    context = Context(
        collection="test-hr", data_dir=hr_store_dir, budgets={"question_token_budget": 50}, answer_style="write"
    )
    graph = build_graph(chat_model=model, store=hr_store)
    out = graph.invoke(
        {"messages": [{"role": "user", "content": "annual leave " * 5000}]}, config=run_config(context), context=context
    )
    assert out["result"]["answer"]
    notices = out["result"]["notices"]
    assert len(notices) == 1 and "cut" in notices[0] and "50 tokens" in notices[0], notices
    # The cut itself, not only its notice: no prompt carries more of the question than the budget.
    assert model.calls, "the turn asked the model"
    for _, messages in model.calls:
        text = "\n".join(str(m.content) for m in messages)
        longest = max((len(run) for run in re.findall(r"(?:annual leave )+", text + " ")), default=0)
        assert 0 < count_tokens("annual leave " * (longest // len("annual leave "))) <= 50, longest
    short = _ask(graph, context, "How much annual leave do I get?")
    assert short["result"]["notices"] == [], "a question within the budget carries no notice"
    state_trace = graph.get_graph()  # the graph still compiles and draws
    assert "start_turn" in state_trace.nodes


def test_a_model_that_raises_junk_errors_is_not_swallowed(hr_store: Any, hr_store_dir: str) -> None:
    model = ScriptedChatModel(script={"answer": [RuntimeError("backend exploded")]})
    context = Context(collection="test-hr", data_dir=hr_store_dir, answer_style="write")
    with pytest.raises(RuntimeError, match="backend exploded"):
        _ask(build_graph(chat_model=model, store=hr_store), context, "How much annual leave do I get?")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("top_n", 0),
        ("groundedness.threshold", 1.5),
        ("rerank_method", "magic"),
        ("collection", "x"),
        ("models.n_samples", -1),
    ],
)
def test_invalid_context_values_name_the_field(field: str, value: Any) -> None:
    with pytest.raises(ContextError, match=field):
        Context(**{field: value})


def test_context_falls_back_to_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGROUND_TOP_N", "5")
    monkeypatch.setenv("REGROUND_METADATA_FILTER", '{"country": "DE"}')
    monkeypatch.setenv("REGROUND_EVIDENCE__USE_SELF_CHECK", "false")
    context = Context()
    assert (
        context.top_n == 5 and context.metadata_filter == {"country": "DE"} and context.evidence.use_self_check is False
    )
    assert Context(top_n=2).top_n == 2, "an explicit value wins over the environment"


# --- errors users can act on, letter-free questions, failed turns leave no debris ---------


@pytest.mark.parametrize(
    ("error", "base"),
    [
        ("reground.tools.adapters.llm:LLMUnavailableError", ModelError),
        ("reground.tools.adapters.llm:LLMTimeoutError", ModelError),
        ("reground.tools.adapters.llm:ModelSpecError", InputError),
        ("reground.nodes.context:ContextError", InputError),
        ("reground.graph.ingest_graph:IngestInputError", InputError),
        ("reground.tools.adapters.embeddings:EmbeddingModelError", ModelError),
        ("reground.tools.text.tokens:TokenizerUnavailableError", ModelError),
        ("reground.tools.adapters.local_server:LocalServerError", ModelError),
        ("reground.tools.adapters.rerank_http:RerankEndpointError", ModelError),
        ("reground.tools.stores.store:CollectionNotFoundError", DataError),
        ("reground.evals.runs.report:ReportError", InputError),
    ],
)
def test_user_facing_errors_carry_their_exit_code(error: str, base: type[RegroundError]) -> None:
    module, name = error.split(":")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, base)
    assert cls("x").exit_code == base.exit_code


def _connection_error(url: str) -> Exception:
    """What openai raises when the server vanishes mid-reply (wrapping httpx's protocol error)."""
    import httpx
    import openai

    request = httpx.Request("POST", f"{url}/chat/completions")
    try:
        try:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        except httpx.RemoteProtocolError as inner:
            raise openai.APIConnectionError(request=request) from inner
    except openai.APIConnectionError as outer:
        return outer


@pytest.mark.parametrize("wrapped", [False, True], ids=["openai-error", "wrapped-by-a-parser"])
def test_model_failure_classifies_a_dead_server_by_the_exception_chain(wrapped: bool) -> None:
    from langchain_openai import ChatOpenAI
    from reground.tools.adapters.chat import model_failure

    url = "http://127.0.0.1:9/v1"
    model = ChatOpenAI(base_url=url, api_key="x", model="local")  # type: ignore[arg-type]
    exc = _connection_error(url)
    if wrapped:
        try:
            raise ValueError("could not parse the reply") from exc
        except ValueError as outer:
            exc = outer
    failure = model_failure(model, exc)
    assert isinstance(failure, LLMUnavailableError) and isinstance(failure, ModelError)
    assert url in str(failure) and "reground llm serve" in str(failure)
    assert model_failure(model, RuntimeError("backend exploded")) is None


def test_a_timeout_is_a_model_error_the_retry_policy_still_retries() -> None:
    import httpx
    import openai
    from langchain_openai import ChatOpenAI
    from reground.graph.builder import LLM_RETRY
    from reground.tools.adapters.chat import model_failure
    from reground.tools.adapters.llm import LLMTimeoutError

    model = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", model="local")  # type: ignore[arg-type]
    failure = model_failure(model, openai.APITimeoutError(request=httpx.Request("POST", "http://127.0.0.1:9/v1")))
    assert isinstance(failure, LLMTimeoutError) and "models.llm_timeout_s" in str(failure)
    retry_on = LLM_RETRY.retry_on
    assert callable(retry_on) and retry_on(failure)
    assert not retry_on(LLMUnavailableError("down")), "a dead server is not retried"


@pytest.mark.parametrize("question", ["", "   ", "\U0001f600\U0001f389", "\x07\x1b\t ?! ...", "\u200b\u200b"])
def test_a_question_without_letters_or_digits_is_refused_like_an_empty_one(
    hr_store: Any, hr_store_dir: str, question: str
) -> None:
    model = ScriptedChatModel()
    context = Context(collection="test-hr", data_dir=hr_store_dir)
    out = _ask(build_graph(chat_model=model, store=hr_store), context, question)
    result = out["result"]
    assert result["fallback_reason"] == "empty question" and not result["passed"]
    assert result["passages"] == [] and model.calls == [], "nothing retrieved, no model called"


def test_a_question_in_another_script_is_not_refused(hr_store: Any, hr_store_dir: str) -> None:
    context = Context(collection="test-hr", data_dir=hr_store_dir)
    out = _ask(
        build_graph(chat_model=ScriptedChatModel(), store=hr_store), context, "\u4f11\u5047\u6709\u51e0\u5929\uff1f"
    )
    assert out["result"]["fallback_reason"] != "empty question"


def _openai_model(server: FakeOpenAI) -> Any:
    """A real ChatOpenAI against the fake server: the same client and error path as `reground ask`."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=server.url, api_key="x", model="local", max_retries=1)  # type: ignore[arg-type]


def test_a_turn_whose_model_dies_mid_answer_leaves_no_user_message_behind(hr_store: Any, hr_store_dir: str) -> None:
    """Embedders see the same thread rule as the CLI: the next question replaces the failed one."""
    server = FakeOpenAI().start()
    context = Context(collection="test-hr", data_dir=hr_store_dir, answer_style="write")
    graph = build_graph(chat_model=_openai_model(server), store=hr_store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "t1"})

    def turn(question: str) -> dict[str, Any]:
        return graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)

    try:
        turn("How much annual leave do I get in Germany?")
        for _ in range(2):
            server.restart(mode="die")
            with pytest.raises(LLMUnavailableError, match=server.url):
                turn("Can I carry days over?")
        server.restart(mode="answer")
        out = turn("Can I carry unused days over?")
    finally:
        server.stop()
    kinds = [(m.type, m.content) for m in out["messages"]]
    assert [k for k, _ in kinds] == ["human", "ai", "human", "ai"], kinds
    assert kinds[2][1] == "Can I carry unused days over?"
    state = graph.get_state(config)
    assert [h["role"] for h in state.values["history"]] == ["user", "assistant"], "the failed question is not history"


def test_a_failed_turn_stays_resumable_until_the_next_question(hr_store: Any, hr_store_dir: str) -> None:
    server = FakeOpenAI(mode="die").start()
    context = Context(collection="test-hr", data_dir=hr_store_dir, answer_style="write")
    graph = build_graph(chat_model=_openai_model(server), store=hr_store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "t2"})
    try:
        with pytest.raises(LLMUnavailableError):
            graph.invoke({"messages": [{"role": "user", "content": "How much leave?"}]}, config=config, context=context)
        assert graph.get_state(config).next, "the failed node is pending in the thread's last checkpoint"
        server.restart(mode="answer")
        out = graph.invoke(None, config=config, context=context)  # resume the failed node, same input
    finally:
        server.stop()
    assert [m.type for m in out["messages"]] == ["human", "ai"]
    assert out["result"]["answer"]


def test_thread_reducer_replaces_only_unanswered_trailing_user_messages() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
    from reground.nodes.thread_messages import add_turn_messages

    h1, a1, failed = HumanMessage("q1", id="h1"), AIMessage("a1", id="a1"), HumanMessage("q2", id="h2")
    new = HumanMessage("q2 again", id="h3")
    assert [m.id for m in add_turn_messages([h1, a1, failed], [new])] == ["h1", "a1", "h3"]
    assert [m.id for m in add_turn_messages([h1, a1, failed], [AIMessage("a2", id="a2")])] == ["h1", "a1", "h2", "a2"]
    both = [HumanMessage("context", id="c"), HumanMessage("question", id="q")]
    assert [m.id for m in add_turn_messages([h1, a1], both)] == ["h1", "a1", "c", "q"], "one input may hold several"
    assert [m.id for m in add_turn_messages([], both)] == ["c", "q"], "a stateless call keeps its whole conversation"
    assert [m.id for m in add_turn_messages([h1, a1, failed], [RemoveMessage(id="a1")])] == ["h1", "h2"]
    dict_input = add_turn_messages([h1, a1, failed], {"role": "user", "content": "q2 again"})
    assert [m.type for m in dict_input] == ["human", "ai", "human"] and dict_input[-1].content == "q2 again"


def test_a_conversation_not_ending_in_a_user_message_is_an_input_error(hr_store: Any, hr_store_dir: str) -> None:
    context = Context(collection="test-hr", data_dir=hr_store_dir)
    graph = build_graph(chat_model=ScriptedChatModel(), store=hr_store)
    with pytest.raises(InputError, match="last message must be the user's question"):
        graph.invoke(
            {"messages": [{"role": "assistant", "content": "hi"}]}, config=run_config(context), context=context
        )


@pytest.mark.parametrize("base", [InputError, DataError, ModelError])
def test_langgraph_server_sends_clients_the_message_of_every_user_facing_error(base: type[RegroundError]) -> None:
    """langgraph-api masks messages of exceptions outside the builtin families as 'An internal error occurred'."""
    from langgraph_api.serde import default

    class Specific(base):  # type: ignore[valid-type,misc]
        pass

    message = "collection 'x' does not exist (known: test-hr); create it with `reground ingest`"
    assert default(Specific(message)) == {"error": "Specific", "message": message}


def test_the_nodes_that_call_a_model_or_the_store_retry_and_the_others_do_not() -> None:
    from reground.graph.builder import LLM_RETRY, NODE_RETRY, STORE_RETRY

    nodes = build_graph().builder.nodes
    assert set(NODE_RETRY) <= set(nodes), "every node named in the retry table is a node of the graph"
    policies = {name: spec.retry_policy for name, spec in nodes.items()}
    assert policies["retrieve"] == STORE_RETRY and policies["answer"] == policies["rerank"] == LLM_RETRY
    assert policies["start_turn"] is policies["triage"] is policies["finalize"] is None
