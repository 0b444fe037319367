"""Ask back: the question admits several readings that the documents answer differently (triage found them)."""

from __future__ import annotations

from typing import Any

from reground.nodes.common import NodeEnv, collection_trust
from reground.nodes.state import Draft, State
from reground.prompts import clarify as prompts
from reground.tools.signals.options import offered_options


def join_options(labels: list[str]) -> str:
    """'A', 'A or B', 'A, B or C'."""
    quoted = [f'"{label}"' for label in labels]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def clarify(state: State, env: NodeEnv) -> dict[str, Any]:
    """Ask which one the user means: the readings triage found, named in one question (no LLM call)."""
    # Near-duplicate pages once, pages the collection vouches for first (a look-alike's copy never ahead of them).
    options = offered_options(list(state.get("options", [])), state.get("candidates", []), collection_trust(env))
    labels = join_options([o["label"] for o in options])
    referent = state.get("referent", "")
    if referent:
        text = prompts.CLARIFY_REFERENT.format(referent=referent, options=labels)
    else:
        text = prompts.CLARIFY.format(options=labels)
    env.progress("clarify", "asking which one you mean", options=[o["label"] for o in options])
    draft = Draft(
        text=text,
        principle_scores={},
        groundedness=1.0,  # it names documents retrieval found and asserts nothing else
        groundedness_parts={},
        unsupported_claims=[],
        kind="clarify",
        relevance=0.0,
        relevance_parts={},
    )
    return {"draft": draft, "draft_checked": True, "judgements": [], "options": options}
