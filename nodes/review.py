"""Human review (off by default): pause before finalizing and take the reviewer's approve / edit / reject."""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt
from reground.nodes.common import NodeEnv
from reground.nodes.routes import outcome
from reground.nodes.state import State

ACTIONS = ("approve", "edit", "reject")


def review(state: State, env: NodeEnv) -> dict[str, Any]:
    """Pause the turn for a human (review_mode) and take their approve, edit or reject as the turn's review."""
    draft = state.get("draft")
    text, passed, reason = outcome(draft, state, env.context)
    decision = interrupt(
        {
            "question": state["question"],
            "proposed_answer": text,
            "draft": draft["text"] if draft else "",
            "passed": passed,
            "fallback_reason": reason,
            "groundedness": draft["groundedness"] if draft else 0.0,
            "passages": [
                {"doc_id": p["doc_id"], "title": p.get("title", ""), "text": p["text"]}
                for p in state.get("passages", [])
            ],
            "resume_with": {"action": "approve | edit | reject", "answer": "the edited answer (for edit)"},
        }
    )
    if isinstance(decision, str):
        decision = {"action": decision}
    if not isinstance(decision, dict) or decision.get("action") not in ACTIONS:
        raise ValueError(f"review resume value must be {{'action': one of {ACTIONS}, 'answer': ...}}, got {decision!r}")
    if decision["action"] == "edit" and not str(decision.get("answer", "")).strip():
        raise ValueError("review action 'edit' needs a non-empty 'answer'")
    return {
        "review": {
            "action": decision["action"],
            "answer": decision.get("answer", ""),
            "reviewer_note": decision.get("note", ""),
        }
    }
