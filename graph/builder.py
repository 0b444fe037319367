"""Wiring: the nodes, the edges and routes (nodes/routes.py) between them, and the two ways to get the graph (`graph`,
`build_graph`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy
from reground.nodes.answer import answer, quote
from reground.nodes.clarify import clarify
from reground.nodes.common import NodeEnv
from reground.nodes.context import Context
from reground.nodes.finalize import finalize
from reground.nodes.groundedness import check_groundedness
from reground.nodes.keywords import extract_keywords
from reground.nodes.refine import refine
from reground.nodes.refine_question import refine_question
from reground.nodes.reground import re_ground
from reground.nodes.rerank import rerank
from reground.nodes.retrieve import retrieve
from reground.nodes.review import review
from reground.nodes.routes import route_after_check, route_after_refine, route_after_triage, route_start
from reground.nodes.start_turn import start_turn
from reground.nodes.state import InputState, OutputState, State, TraceEvent
from reground.nodes.triage import triage
from reground.tools.services import Services
from reground.tools.tuning.models import ENDPOINTS

# The recursion limit lives in one place, the context (its default when a caller passes no config of its own).
DEFAULT_RECURSION_LIMIT: int = Context.model_fields["recursion_limit"].default

NodeFn = Callable[[State, NodeEnv], dict[str, Any]]

# Transient failures are retried with backoff; a server that is down is not (it fails at once).
_TRANSIENT = {
    "APITimeoutError",
    "LLMTimeoutError",  # tools/adapters/chat.py's name for a model that did not reply in time
    "OpenAITimeoutError",
    "InternalServerError",
    "RateLimitError",
    "ReadTimeout",
    "RemoteProtocolError",
}


def _is_transient(exc: Exception) -> bool:
    return type(exc).__name__ in _TRANSIENT


LLM_RETRY = RetryPolicy(
    max_attempts=ENDPOINTS.llm_retry_attempts,
    initial_interval=ENDPOINTS.llm_retry_interval_s,
    backoff_factor=ENDPOINTS.retry_backoff,
    retry_on=_is_transient,
)
STORE_RETRY = RetryPolicy(
    max_attempts=ENDPOINTS.store_retry_attempts,
    initial_interval=ENDPOINTS.store_retry_interval_s,
    backoff_factor=ENDPOINTS.retry_backoff,
    retry_on=_is_transient,
)
# The nodes that call a model or the store retry its transient failures; the others compute and do not retry.
_LLM_NODES = ("refine_question", "extract_keywords", "rerank", "answer", "check_groundedness", "re_ground", "refine")
NODE_RETRY: dict[str, RetryPolicy] = {**dict.fromkeys(_LLM_NODES, LLM_RETRY), "retrieve": STORE_RETRY}


def _bind(name: str, fn: NodeFn, services: Services) -> Callable[[State, Runtime[Context]], dict[str, Any]]:
    """Present a node to LangGraph as (state, runtime), handing it its clients and recording its cost."""

    def node(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        env = NodeEnv(services=services, runtime=runtime)
        started = time.perf_counter()
        update = fn(state, env)
        event: TraceEvent = {"node": name, "seconds": round(time.perf_counter() - started, 4)}
        if env.stats.llm_calls:
            event.update(
                llm_calls=env.stats.llm_calls,
                prompt_tokens=env.stats.prompt_tokens,
                completion_tokens=env.stats.completion_tokens,
            )
        if env.stats.notes:
            event["note"] = "; ".join(env.stats.notes)
        return {**update, "trace": [event]}

    node.__name__ = name
    node.__doc__ = fn.__doc__
    return node


# --- builders -----------------------------------------------------------------------------------


def build_graph(
    *,
    chat_model: BaseChatModel | None = None,
    embeddings: Any | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: Any | None = None,
    name: str = "reground",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The reground graph for embedding in an app or a test.

    Instances passed here override the context's specs: `chat_model` (any LangChain chat model),
    `embeddings` (a reground Embedder), `store` (a reground PassageStore). Pass a checkpointer to keep
    conversations per thread (then only the new user message is needed per turn).
    """
    services = Services(chat_model=chat_model, embedder=embeddings, store=store)
    builder = StateGraph(State, input_schema=InputState, output_schema=OutputState, context_schema=Context)
    nodes: tuple[tuple[str, NodeFn], ...] = (
        ("start_turn", start_turn),
        ("refine_question", refine_question),
        ("extract_keywords", extract_keywords),
        ("retrieve", retrieve),
        ("rerank", rerank),
        ("triage", triage),
        ("clarify", clarify),
        ("answer", answer),
        ("check_groundedness", check_groundedness),
        ("re_ground", re_ground),
        ("refine", refine),
        ("quote", quote),
        ("review", review),
        ("finalize", finalize),
    )
    for node_name, fn in nodes:
        retry = NODE_RETRY.get(node_name)
        builder.add_node(node_name, _bind(node_name, fn, services), retry_policy=retry)  # type: ignore[call-overload]
    builder.add_edge(START, "start_turn")
    builder.add_conditional_edges("start_turn", route_start)
    builder.add_edge("refine_question", "extract_keywords")
    builder.add_edge("extract_keywords", "retrieve")
    builder.add_edge("retrieve", "rerank")
    builder.add_edge("rerank", "triage")
    builder.add_conditional_edges("triage", route_after_triage)
    builder.add_edge("clarify", "finalize")
    builder.add_edge("answer", "check_groundedness")
    builder.add_conditional_edges("check_groundedness", route_after_check)
    builder.add_edge("re_ground", "retrieve")
    builder.add_conditional_edges("refine", route_after_refine)
    builder.add_edge("quote", "check_groundedness")
    builder.add_edge("review", "finalize")
    builder.add_edge("finalize", END)
    compiled = builder.compile(checkpointer=checkpointer, name=name)
    # Every loop has its own counter in state (tests/unit/test_routes.py); this explicit limit is only the backstop,
    # far above the longest turn those counters allow.
    return compiled.with_config(recursion_limit=DEFAULT_RECURSION_LIMIT)


def run_config(context: Context, **extra: Any) -> dict[str, Any]:
    """The invoke/stream config of a turn: the recursion limit is always set explicitly."""
    return {"recursion_limit": context.recursion_limit, **extra}


# What langgraph.json serves: compiled without a checkpointer (the server brings its own).
graph = build_graph()
