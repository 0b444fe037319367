"""A thread's answered turns, read back from its checkpoint history, and the feedback record of one of them.

The graph keeps only the last turn's `result` in the thread's state; each earlier turn's result is in the
checkpoint that finished it (no next node, the turn's reply last). The page shows a reloaded thread from these,
and a rating stores the rated turn as the server saw it (question, dialogue, reply, citations, scope), not as a
page says it was.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from reground.tools.tuning.web import CHAT_PAGE
from reground.tools.types import is_assistant

FEEDBACK_NAMESPACE = "reground-feedback"  # the LangGraph store namespace: (FEEDBACK_NAMESPACE, thread_id)
RATINGS = ("up", "down")
MAX_NOTE_CHARS = CHAT_PAGE.max_note_chars


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content", "")
    if isinstance(content, list):  # content blocks
        return " ".join(str(b.get("text", "")) if isinstance(b, Mapping) else str(b) for b in content)
    return str(content)


def _role(message: Mapping[str, Any]) -> str:
    return "agent" if is_assistant(str(message.get("type") or message.get("role") or "")) else "user"


def thread_turns(history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each answered turn of a thread, oldest first, from its checkpoint history (any order): the reply's message
    id, the question, the dialogue before it, the turn's result and the scope it ran in."""
    turns: dict[str, dict[str, Any]] = {}
    for state in history:
        values = state.get("values") or {}
        messages = list(values.get("messages") or [])
        result = values.get("result")
        if state.get("next") or not result or not messages or _role(messages[-1]) != "agent":
            continue
        message_id = str(messages[-1].get("id", ""))
        if not message_id or message_id in turns:
            continue
        metadata = state.get("metadata") or {}
        before = messages[:-1]
        question = _text(before[-1]) if before and _role(before[-1]) == "user" else ""
        turns[message_id] = {
            "message_id": message_id,
            "position": len(messages),
            "question": question,
            "history": [{"role": _role(m), "text": _text(m)} for m in before[:-1]],
            "result": dict(result),
            "scope": {
                "collection": str(metadata.get("collection", "")),
                "metadata_filter": dict(metadata.get("metadata_filter") or {}),
            },
        }
    return sorted(turns.values(), key=lambda turn: turn["position"])


def feedback_record(
    thread_id: str, turn: Mapping[str, Any], rating: str, note: str, *, now: float | None = None
) -> dict[str, Any]:
    """What a rating stores: the rated turn as the server ran it, the rating and the person's note."""
    if rating not in RATINGS:
        raise ValueError(f"rating must be one of {', '.join(RATINGS)}; got {rating!r}")
    result = turn["result"]
    return {
        "thread_id": thread_id,
        "message_id": turn["message_id"],
        "rating": rating,
        "note": " ".join(str(note).split())[:MAX_NOTE_CHARS],
        "question": turn["question"],
        "history": list(turn["history"]),
        "answer": result.get("answer", ""),
        "kind": result.get("kind", "answer"),
        "passed": bool(result.get("passed", False)),
        "citations": [
            {k: c.get(k, "") for k in ("number", "doc_id", "title", "chunk_id", "quote")}
            for c in result.get("citations", [])
        ],
        "passage_doc_ids": [p.get("doc_id", "") for p in result.get("passages", [])],
        "collection": turn["scope"]["collection"],
        "metadata_filter": dict(turn["scope"]["metadata_filter"]),
        "rated_at": round(time.time() if now is None else now, 3),
    }
