"""Why a turn goes where it goes: the route functions graph/builder.py wires after start_turn, triage,
check_groundedness and refine, and the rules they share with the nodes (whether a draft passes its checks, what a
turn may say, which ProMiSe principles fail, whether a human reviews it). Each route returns the next node's name,
which is all the graph reads."""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime
from reground.nodes.context import Context
from reground.nodes.state import Draft, State
from reground.prompts import answer as answer_prompts

# The groundedness part of a reply that only restated an injected instruction (set by check_groundedness).
FLAGGED_ONLY = "flagged_only"
PRINCIPLES = ("specificity", "faithfulness", "relevance")


def passes_checks(draft: Draft, context: Context) -> bool:
    """Grounded in the passages and an answer to this question: what a drafted reply needs to be said."""
    return (
        draft["groundedness"] >= context.resolved_groundedness_threshold()
        and draft.get("relevance", 1.0) >= context.refinement.relevance_threshold
    )


def outcome(draft: Draft | None, state: State, context: Context) -> tuple[str, bool, str | None]:
    """(answer text, passed, fallback reason): the one rule for what a turn may say."""
    if not state.get("question"):
        return answer_prompts.EMPTY_QUESTION.format(collection=context.collection), False, "empty question"
    not_found = answer_prompts.NOT_FOUND.format(escalation=context.escalation)
    if state.get("decision") == "abstain":
        signals = state.get("signals", {})
        if "answerable" in signals:
            reason = (
                f"the judge finds no answer in the passages: answerable {signals['answerable']:.2f} < threshold "
                f"{signals.get('hedge_threshold', 0.0):.2f} after {state.get('reground_attempts', 0)} re-grounding "
                "attempt(s)"
            )
            return not_found, False, reason
        support, threshold = signals.get("support", 0.0), signals.get("support_threshold", 0.0)
        reason = (
            f"no passage supports the question: support {support:.2f} < threshold {threshold:.2f} "
            f"after {state.get('reground_attempts', 0)} re-grounding attempt(s)"
        )
        return not_found, False, reason
    if draft is None:
        return not_found, False, "no answer was drafted"
    if draft["kind"] == "clarify":
        return draft["text"], True, None
    if draft["kind"] == "not_found":
        return draft["text"], False, "the documents in scope do not contain the answer"
    threshold = context.resolved_groundedness_threshold()
    attempts = state.get("reground_attempts", 0)
    if passes_checks(draft, context):
        return draft["text"], True, None
    if draft["groundedness"] >= threshold:
        # Grounded, but in a passage that answers another question: never passed off as the answer.
        reason = (
            f"answer does not address the question: relevance {draft.get('relevance', 0.0):.2f} < threshold "
            f"{context.refinement.relevance_threshold:.2f} after {state.get('refine_iterations', 0)} refinement(s)"
        )
        return not_found, False, reason
    reason = (
        f"answer not grounded: score {draft['groundedness']:.2f} < threshold "
        f"{threshold:.2f} after {attempts} re-grounding attempt(s)"
    )
    return not_found, False, reason


def failing_principles(draft: Draft, thresholds: dict[str, float]) -> list[str]:
    """The ProMiSe principles whose proxy score is below its threshold, in PRINCIPLES order."""
    return [p for p in PRINCIPLES if draft["principle_scores"].get(p, 0.0) < thresholds[p]]


def thresholds_of(c: Context) -> dict[str, float]:
    """Each principle's threshold in this run's context."""
    return {
        "specificity": c.refinement.specificity_threshold,
        "faithfulness": c.refinement.faithfulness_threshold,
        "relevance": c.refinement.relevance_threshold,
    }


def needs_review(state: State, context: Context) -> bool:
    """Whether a human sees the draft before finalize: every draft (`review_mode="all"`), only the failing ones
    ("failed"), or none ("off")."""
    mode = context.review_mode
    if mode == "all":
        return state.get("draft") is not None
    if mode == "failed":
        draft = state.get("draft")
        return draft is not None and not outcome(draft, state, context)[1]
    return False


# --- routes: small named functions, each returning the node names Studio draws -----------------


def route_start(state: State) -> Literal["refine_question", "finalize"]:
    """A turn with a question goes on to be answered; an empty one is finalized at once (it says so)."""
    return "refine_question" if state.get("question") else "finalize"


def route_after_triage(
    state: State, runtime: Runtime[Context]
) -> Literal["answer", "clarify", "re_ground", "finalize"]:
    """Ask back, answer, or (nothing supports the question) retrieve once more with another query, then abstain."""
    decision = state.get("decision", "answer")
    if decision == "clarify":
        return "clarify"
    if decision == "abstain":
        context = runtime.context
        limit = min(context.triage.abstain_reground_attempts, context.groundedness.max_reground_attempts)
        # Without a dialogue there is no other query to try: the question alone was already searched.
        if context.use_reground and state.get("history") and state.get("reground_attempts", 0) < limit:
            return "re_ground"
        return "finalize"
    return "answer"  # "answer", or "hedge": the answer node quotes the closest sentences as such


def route_after_check(
    state: State, runtime: Runtime[Context]
) -> Literal["re_ground", "refine", "quote", "review", "finalize"]:
    """After the groundedness check: re-ground an ungrounded draft while attempts are left, refine a grounded
    written one that fails a principle, quote the passages when a written reply's loops are spent, else review or
    finalize."""
    context = runtime.context
    draft = state.get("draft")
    if draft is None:
        return "finalize"
    ungrounded = draft["kind"] == "not_found" or (
        draft["kind"] == "answer" and draft["groundedness"] < context.resolved_groundedness_threshold()
    )
    # A reply that only restated an injected instruction: a new search finds the same pages, so quote them instead.
    obeyed = FLAGGED_ONLY in draft.get("groundedness_parts", {})
    if (
        ungrounded
        and not obeyed
        and context.use_reground
        and state.get("reground_attempts", 0) < context.groundedness.max_reground_attempts
    ):
        return "re_ground"
    if (
        not ungrounded
        and draft["kind"] == "answer"
        and context.answer_style == "write"  # ProMiSe refines written replies; an extracted one is the documents'
        and not state.get("quoted", False)
        and context.use_principle_refinement
        and state.get("refine_iterations", 0) < context.refinement.max_refine_iterations
        and failing_principles(draft, thresholds_of(context))
    ):
        return "refine"
    if (
        context.answer_style == "write"
        and context.refinement.quote_when_unchecked
        and not state.get("quoted", False)
        and state.get("decision", "answer") == "answer"
        and draft["kind"] in ("answer", "partial", "not_found")
        and not passes_checks(draft, context)
    ):
        # The loops are spent: the passages' own sentences rather than an abstention, also when the writer says the
        # passages do not cover a question triage (the judge) finds them answering.
        return "quote"
    return review_or_finalize(state, runtime)


def route_after_refine(
    state: State, runtime: Runtime[Context]
) -> Literal["check_groundedness", "re_ground", "refine", "quote", "review", "finalize"]:
    """A changed draft is checked again; an unchanged one is routed as after its check."""
    if not state.get("draft_checked", False):
        return "check_groundedness"
    return route_after_check(state, runtime)


def review_or_finalize(state: State, runtime: Runtime[Context]) -> Literal["review", "finalize"]:
    """Review when the context's review_mode asks for this draft, else finalize."""
    return "review" if needs_review(state, runtime.context) else "finalize"
