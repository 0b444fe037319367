"""ConvRAG's question refiner: rewrite a follow-up into a standalone question, only where it pays.

A first turn or a standalone question needs no rewrite. A follow-up is rewritten only when the history-aware
document ranking (question + recent dialogue, LLM-free, what ReGround found retrieves best) is not confident:
when its top document leads by a clear margin, retrieval already knows what the user means and the call
would cost a turn's latency for nothing (evals/README.md, "Answers").
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from reground.nodes.common import NodeEnv, format_history, rewrite_reply
from reground.nodes.state import State
from reground.prompts import refine_question as prompts
from reground.tools.adapters.chat import LLMReplyError
from reground.tools.adapters.llm import LLMUnavailableError
from reground.tools.retrieval.search import RetrievalQuery
from reground.tools.signals.answerability import depends_on_dialogue
from reground.tools.signals.scoring import squad_tokens
from reground.tools.text.tokens import history_query

REWRITE_SKIPPED = (
    "the chat model ({model}) is not reachable, so your follow-up was not rewritten into a standalone question: it "
    "was searched together with the conversation (start it with `reground llm serve` for rewrites)"
)
_STOP = frozenset(
    {
        *("i", "you", "we", "my", "your", "me", "do", "does", "did", "can", "could", "is", "are", "was", "be"),
        *("to", "of", "in", "on", "for", "and", "or", "what", "how", "when"),
    }
)


def rewrite_is_from_the_conversation(
    rewrite: str, question: str, history: list[dict[str, str]], min_share: float
) -> bool:
    """At least `min_share` of the rewrite's words (stopwords aside) are the conversation's: a rewrite may only use
    words of the conversation (a 0.5B model copies a few-shot example or invents one)."""
    seen = set(squad_tokens(" ".join([question, *(turn["text"] for turn in history)])))
    words = [w for w in squad_tokens(rewrite) if w not in _STOP]
    return not words or sum(w in seen for w in words) / len(words) >= min_share


def ranking_margin(question: str, history: list[dict[str, str]], env: NodeEnv) -> float:
    """How far the history-aware ranking's top document leads the second: (s1 - s2) / s1, in [0, 1]."""
    context = env.context
    query = RetrievalQuery(
        question=question, history_query=history_query(question, history, context.budgets.history_token_budget)
    )
    ranked = env.services.retriever(context).rank_documents(query, where=context.metadata_filter or None, k=2)
    if not ranked or ranked[0][1] <= 0:
        return 0.0
    second = ranked[1][1] if len(ranked) > 1 else 0.0
    return max(0.0, (ranked[0][1] - second) / ranked[0][1])


def answers_a_clarifying_question(state: State) -> bool:
    """The last turn asked the user which reading they meant (its result is still the thread's last one)."""
    return (state.get("result") or {}).get("kind") == "clarify" and bool(state.get("history"))


def refine_question(state: State, env: NodeEnv) -> dict[str, Any]:
    """Rewrite a follow-up as a standalone question, only when the history-aware ranking is unsure of what it
    means; a first turn or a standalone question is searched as asked."""
    question, history = state["question"], state.get("history", [])
    if answers_a_clarifying_question(state):
        # The user picked a reading: their reply completes the question they asked before ("the one for France").
        asked = next((turn["text"] for turn in reversed(history) if turn["role"] == "user"), "")
        resolved = f"{asked} {question}".strip()
        env.stats.notes.append(f"answers the clarifying question: {resolved!r}")
        return {"standalone_question": resolved, "retrieval_query": resolved, "query_mode": "clarified"}
    if not env.context.use_question_refiner or not depends_on_dialogue(question, bool(history)):
        return {"standalone_question": question, "retrieval_query": question, "query_mode": "refined"}
    if env.context.refinement.rewrite_below_margin < 1.0:
        margin = ranking_margin(question, history, env)
        if margin >= env.context.refinement.rewrite_below_margin:
            env.stats.notes.append(f"no rewrite: the history-aware ranking is confident (margin {margin:.2f})")
            return _question_with_history(question, history, env)
    env.progress("refine_question", "rewriting the follow-up with the conversation")
    messages = [
        SystemMessage(env.context.prompts.refine_question_prompt),
        HumanMessage(
            prompts.USER.format(
                history=format_history(history[-env.context.budgets.rewrite_history_messages :]), question=question
            )
        ),
    ]
    try:
        reply = env.ask(
            "refiner",
            messages,
            rewrite_reply(env.context.refinement.rewrite_max_chars),
            tags=["refine_question"],
            max_tokens=env.context.models.rewrite_max_tokens,
        )
        standalone = reply.question
    except LLMReplyError as exc:
        env.stats.notes.append(f"rewrite unusable ({exc}); using question + recent history")
        return _question_with_history(question, history, env)
    except LLMUnavailableError as exc:
        if env.context.answer_style == "write":
            raise  # the reply needs the model too: the turn fails now, naming the server
        # The extract default answers without the model: the follow-up is searched with the conversation instead.
        env.stats.notes.append(f"rewrite skipped: the chat model is down ({exc})")
        notice = REWRITE_SKIPPED.format(model=env.context.model_for("refiner"))
        return {**_question_with_history(question, history, env), "notices": [*state.get("notices", []), notice]}
    if not rewrite_is_from_the_conversation(
        standalone, question, history, env.context.refinement.min_grounded_word_share
    ):
        env.stats.notes.append(f"rewrite {standalone!r} uses words the conversation never did; not used")
        return _question_with_history(question, history, env)
    return {"standalone_question": standalone, "retrieval_query": standalone, "query_mode": "refined"}


def _question_with_history(question: str, history: list[dict[str, str]], env: NodeEnv) -> dict[str, Any]:
    """No usable rewrite: the answer sees the question as asked, retrieval the question + recent history."""
    query = history_query(question, history, env.context.budgets.history_token_budget)
    return {"standalone_question": question, "retrieval_query": query, "query_mode": "history"}
