"""ProMiSe: refine the answer one principle at a time; a candidate that clears every threshold is taken, else it
must improve enough (the weighted improvement over lambda).

Relevance is refined without an LLM call by default: the candidate is the passage sentence closest to the
question, in the documents' own words (what an answer to this question restates; tools/signals/extract_reply.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from reground.nodes.common import (
    NodeEnv,
    cap_sentences,
    current_draft,
    evidence_of,
    extracted_sentences,
    grounded_messages,
    make_draft,
    question_of,
)
from reground.nodes.routes import PRINCIPLES, failing_principles, thresholds_of
from reground.nodes.state import Draft, State
from reground.tools.adapters.chat import LLMReplyError
from reground.tools.signals.scoring import majority_best, weighted_improvement


class RefinedAnswer(BaseModel):
    """A refinement's reply: the improved answer only."""

    answer: str = Field(description="the improved reply to the user")


def refine(state: State, env: NodeEnv) -> dict[str, Any]:
    """ProMiSe's refinement of a written reply: one principle below its threshold at a time; a candidate is kept
    when it clears every threshold or improves enough."""
    context = env.context
    current = current_draft(state, "refine")
    passages = list(state.get("passages", []))
    failing = failing_principles(current, thresholds_of(context)) or list(PRINCIPLES)
    env.progress("refine", "refining the answer", principles=failing)
    candidates: list[Draft] = []
    evidence = evidence_of(state)
    # One candidate per failing principle; sequential so the local server's prefix cache serves them.
    for principle in failing:
        if principle == "relevance" and context.refinement.relevance_refinement == "extractive":
            text, _ = extracted_sentences(evidence, context.evidence, context.answer_length)
            if text:
                candidates.append(make_draft(text, passages, state, evidence))
            continue
        task = context.prompts.refine_prompts[principle].format(answer=current["text"], question=question_of(state))
        try:
            reply = env.ask(
                "answer",
                grounded_messages(passages, state.get("history", []), state["question"], task),
                RefinedAnswer,
                tags=["refine", principle],
                max_tokens=context.models.max_answer_tokens + context.models.answer_json_overhead_tokens,
            )
        except LLMReplyError:
            continue
        text = cap_sentences(reply.answer, context.evidence.max_answer_sentences)
        if len(text.split()) >= 2:
            candidates.append(make_draft(text, passages, state, evidence))
    iteration = state.get("refine_iterations", 0) + 1
    if not candidates:
        env.stats.notes.append("no usable refinement; keeping the answer")
        return {"refine_iterations": iteration}
    best = candidates[majority_best([c["principle_scores"] for c in candidates])]
    if not failing_principles(best, thresholds_of(context)):
        env.stats.notes.append("refined answer clears every threshold; answer replaced")
        return {"refine_iterations": iteration, "draft": best, "draft_checked": False}
    gain = weighted_improvement(
        best["principle_scores"], current["principle_scores"], context.refinement.principle_weights
    )
    if gain <= context.refinement.improvement_lambda:
        env.stats.notes.append(
            f"refinement gain {gain:.2f} <= lambda {context.refinement.improvement_lambda}; kept the old answer"
        )
        return {"refine_iterations": iteration}
    env.stats.notes.append(f"refinement gain {gain:.2f} > lambda; answer replaced")
    return {"refine_iterations": iteration, "draft": best, "draft_checked": False}
