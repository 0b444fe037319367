"""The `messages` reducer of a thread: a failed turn leaves no unanswered user message behind.

A turn writes the user's message when it starts and the answer when it finishes. If it fails in
between (the LLM died, a bad filter), the thread ends with a user message nobody answered. When the
next user message arrives, that debris is replaced instead of kept, so a thread always holds one user
message per answered question, whoever drives it: the CLI, an embedding app, or a `langgraph dev`
client. The failed turn stays resumable until then (`graph.invoke(None, config)` re-runs the failed
node from its checkpoint).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, convert_to_messages
from langgraph.graph.message import add_messages


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def add_turn_messages(left: Any, right: Any) -> Any:
    """`add_messages`, except that an update bringing a user message first drops the unanswered user
    messages at the end of the thread (what a failed turn left). Answers, removals and any update
    without a user message are applied exactly as `add_messages` does."""
    update = _as_list(right)
    incoming = convert_to_messages(update) if update else []
    brings_question = any(isinstance(m, HumanMessage) for m in incoming)
    if brings_question and not any(isinstance(m, RemoveMessage) for m in incoming):
        current: list[BaseMessage] = convert_to_messages(_as_list(left))
        end = len(current)
        while end and isinstance(current[end - 1], HumanMessage):
            end -= 1
        left = current[:end]
        right = incoming
    return add_messages(left, right)
