"""ProMiSe: refine the answer one principle at a time, keeping a candidate only if it improves enough."""

from __future__ import annotations

from typing import Any

from reground.graph.context import Context
from reground.graph.state import Draft, State
from reground.nodes.answer import make_draft
from reground.nodes.common import NodeEnv, grounded_messages
from reground.tools.chat import LLMReplyError, call_parsed
from reground.tools.scoring import majority_best, weighted_improvement

PRINCIPLES = ("specificity", "faithfulness", "relevance")


def failing_principles(draft: Draft, thresholds: dict[str, float]) -> list[str]:
    return [p for p in PRINCIPLES if draft["principle_scores"].get(p, 0.0) < thresholds[p]]


def thresholds_of(c: Context) -> dict[str, float]:
    return {
        "specificity": c.specificity_threshold,
        "faithfulness": c.faithfulness_threshold,
        "relevance": c.relevance_threshold,
    }


def _usable(text: str) -> str:
    text = text.strip()
    for prefix in ("Improved response:", "More specific:", "More faithful:", "More relevant:"):
        if text.lower().startswith(prefix.lower()):
            text = text[len(prefix) :].strip()
    if len(text.split()) < 2:
        raise ValueError("the refined response is empty")
    return text


def refine(state: State, env: NodeEnv) -> dict[str, Any]:
    context = env.context
    current = state.get("draft")
    if current is None:
        raise ValueError("refine ran without a draft answer")
    passages = list(state.get("passages", []))
    failing = failing_principles(current, thresholds_of(context)) or list(PRINCIPLES)
    env.progress("refine", "refining the answer", principles=failing)
    candidates: list[Draft] = []
    # One candidate per failing principle; sequential so the local server's prefix cache serves them.
    for principle in failing:
        task = context.refine_prompts[principle].format(
            answer=current["text"], question=state.get("standalone_question") or state["question"]
        )
        model = env.services.chat(context, "answer")
        try:
            text = call_parsed(
                model,
                grounded_messages(passages, state.get("history", []), state["question"], task),
                _usable,
                env.stats,
                tags=["refine", principle],
                max_tokens=context.max_answer_tokens,
            )
        except LLMReplyError:
            continue
        candidates.append(make_draft(text, passages, state))
    iteration = state.get("refine_iterations", 0) + 1
    if not candidates:
        env.stats.notes.append("no usable refinement; keeping the answer")
        return {"refine_iterations": iteration}
    best = candidates[majority_best([c["principle_scores"] for c in candidates])]
    gain = weighted_improvement(best["principle_scores"], current["principle_scores"], context.principle_weights)
    if gain <= context.improvement_lambda:
        env.stats.notes.append(
            f"refinement gain {gain:.2f} <= lambda {context.improvement_lambda}; kept the old answer"
        )
        return {"refine_iterations": iteration}
    env.stats.notes.append(f"refinement gain {gain:.2f} > lambda; answer replaced")
    return {"refine_iterations": iteration, "draft": best, "draft_checked": False}
