"""Start a turn: split the conversation, enforce budgets, reset per-turn counters, fail fast if the LLM is down and
the turn cannot go without it (the extract default goes on: a turn that needs no call answers)."""

from __future__ import annotations

import time
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from reground.nodes.common import NodeEnv
from reground.nodes.context import Context
from reground.nodes.state import State, fresh_turn
from reground.tools.adapters.chat import message_text
from reground.tools.errors import InputError
from reground.tools.stores.search_index import scope_miss
from reground.tools.text.questions import question_problem
from reground.tools.text.tokens import count_tokens, tail_tokens, truncate_tokens


def scope_notice(env: NodeEnv) -> str | None:
    """A notice when the user's scope names a value no document has (a value in another case, "de" for "DE",
    would otherwise abstain in silence), with the stored spelling when one differs only in case."""
    where = env.context.metadata_filter
    if not where:
        return None
    store = env.services.passage_store(env.context)
    memoised = getattr(store, "scope_miss", None)
    if callable(memoised):  # reground's stores answer from their loaded snapshot, once per scope
        return cast(str | None, memoised(where))
    store.all_chunks(where)  # a field no document has: UnknownMetadataFieldError, as retrieval would raise
    return scope_miss(where, env.context.collection, [c["metadata"] for c in store.all_chunks()])


def needs_a_model(context: Context) -> bool:
    """Whether every turn calls the chat model: a written reply, or a setting that asks it at every turn. The
    extract default calls it only to rewrite an unclear follow-up (refine_question goes on without it when it is
    down, and says so) or near the groundedness threshold (then cheap signals decide)."""
    return (
        context.answer_style == "write"
        or context.keyword_method == "llm"
        or context.rerank_method == "llm"
        or context.evidence.use_self_check
        or context.evidence.injection_model_check
        or context.retrieval.query_transform != "none"
    )


def _role(message: BaseMessage) -> str | None:
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    return None


def start_turn(state: State, env: NodeEnv) -> dict[str, Any]:
    """Split the messages into history and question, apply the token budgets and reset the turn's counters; a
    message that is no question goes on empty (finalize says so), and an unreachable LLM the turn needs fails it at
    once."""
    messages = list(state.get("messages") or [])
    notes: list[str] = []
    if not messages or not isinstance(messages[-1], HumanMessage):
        raise InputError(
            "the last message must be the user's question (a 'user'/'human' message); "
            f"got {type(messages[-1]).__name__ if messages else 'no messages'}"
        )
    question = message_text(messages[-1])
    history = [
        {"role": role, "text": message_text(m)}
        for m in messages[:-1]
        if (role := _role(m)) and not isinstance(m, SystemMessage) and message_text(m)
    ]
    notices: list[str] = []
    problem = question_problem(question)
    if problem:
        notes.append(f"{problem}: not answered")
        question = ""  # routed straight to finalize, which answers like for an empty question
    if question and count_tokens(question) > env.context.budgets.question_token_budget:
        original = count_tokens(question)
        question = truncate_tokens(question, env.context.budgets.question_token_budget)
        notices.append(
            f"your question was cut from {original} to its first {env.context.budgets.question_token_budget} tokens "
            "(question_token_budget); ask a shorter question to have all of it considered"
        )
        notes.append(f"question cut to {env.context.budgets.question_token_budget} tokens")
    kept: list[dict[str, str]] = []
    cap = env.context.budgets.history_token_cap  # what any prompt of a turn carries of the dialogue at most
    budget = cap
    for turn in reversed(history):
        cost = count_tokens(turn["text"])
        if cost > budget:
            if budget > env.context.budgets.min_cut_turn_tokens:
                kept.append({"role": turn["role"], "text": tail_tokens(turn["text"], budget)})
            notes.append(f"history cut to the last {cap} tokens")
            break
        kept.append(turn)
        budget -= cost
    history = list(reversed(kept))
    if question.strip():
        if needs_a_model(env.context):
            env.services.chat(env.context, "answer")  # raises LLMUnavailableError naming the URL
        empty_scope = scope_notice(env)
        if empty_scope:
            notices.append(empty_scope)
            notes.append(empty_scope)
    env.stats.notes.extend(notes)
    question = question.strip()
    # Every other per-turn key starts from its declared default (nodes/state.py), so none leaks into the next turn.
    return fresh_turn(
        question=question,
        history=history,
        standalone_question=question,
        retrieval_query=question,
        turn_started=time.time(),
        notices=notices,
    )
