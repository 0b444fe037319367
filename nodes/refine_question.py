"""ConvRAG's question refiner: rewrite a follow-up into a standalone question (no LLM call when not needed)."""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from reground.graph.state import State
from reground.nodes.common import NodeEnv, format_history
from reground.prompts import refine_question as prompts
from reground.tools.chat import LLMReplyError, call_parsed
from reground.tools.retrieval import history_query
from reground.tools.scoring import squad_tokens

# Words that only make sense with the conversation: their presence (or a very short question)
# is what makes a question a follow-up worth an LLM call.
_ANAPHORA = re.compile(
    r"\b(it|its|it's|that|this|these|those|they|them|their|there|he|she|him|her|his|one|ones|"
    r"same|such|above|mentioned|former|latter|also|too|else|instead|then|so)\b",
    re.IGNORECASE,
)
_MIN_STANDALONE_WORDS = 6
REWRITE_MAX_TOKENS = 60
# A rewrite may only use words of the conversation: one that is mostly new words is a copied few-shot
# example or an invention (a 0.5B model does both), not this user's question.
MIN_GROUNDED_WORD_SHARE = 0.6
_STOP = frozenset(
    {
        *("i", "you", "we", "my", "your", "me", "do", "does", "did", "can", "could", "is", "are", "was", "be"),
        *("to", "of", "in", "on", "for", "and", "or", "what", "how", "when"),
    }
)


def rewrite_is_from_the_conversation(rewrite: str, question: str, history: list[dict[str, str]]) -> bool:
    seen = set(squad_tokens(" ".join([question, *(turn["text"] for turn in history)])))
    words = [w for w in squad_tokens(rewrite) if w not in _STOP]
    return not words or sum(w in seen for w in words) / len(words) >= MIN_GROUNDED_WORD_SHARE


def needs_rewrite(question: str, has_history: bool) -> bool:
    """A first turn, or a long question without pronouns, is already standalone."""
    if not has_history:
        return False
    words = question.split()
    return len(words) < _MIN_STANDALONE_WORDS or bool(_ANAPHORA.search(question))


def parse_rewrite(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"^(standalone question|question|rewritten question)\s*:\s*", "", line, flags=re.IGNORECASE)
    line = line.strip().strip('"').strip()
    if len(line.split()) < 2:
        raise ValueError("the rewrite is empty or a single word")
    if len(line) > 400:
        raise ValueError("the rewrite is far longer than a question")
    return line


def refine_question(state: State, env: NodeEnv) -> dict[str, Any]:
    question, history = state["question"], state.get("history", [])
    if not env.context.use_question_refiner or not needs_rewrite(question, bool(history)):
        return {"standalone_question": question, "retrieval_query": question, "query_mode": "refined"}
    env.progress("refine_question", "rewriting the follow-up with the conversation")
    model = env.services.chat(env.context, "refiner")
    messages = [
        SystemMessage(env.context.refine_question_prompt),
        HumanMessage(prompts.USER.format(history=format_history(history[-6:]), question=question)),
    ]
    try:
        standalone = call_parsed(
            model, messages, parse_rewrite, env.stats, tags=["refine_question"], max_tokens=REWRITE_MAX_TOKENS
        )
    except LLMReplyError as exc:
        env.stats.notes.append(f"rewrite unusable ({exc}); using question + recent history")
        return _question_with_history(question, history, env)
    if not rewrite_is_from_the_conversation(standalone, question, history):
        env.stats.notes.append(f"rewrite {standalone!r} uses words the conversation never did; not used")
        return _question_with_history(question, history, env)
    return {"standalone_question": standalone, "retrieval_query": standalone, "query_mode": "refined"}


def _question_with_history(question: str, history: list[dict[str, str]], env: NodeEnv) -> dict[str, Any]:
    """No usable rewrite: the answer sees the question as asked, retrieval the question + recent history."""
    query = history_query(question, history, env.context.history_token_budget)
    return {"standalone_question": question, "retrieval_query": query, "query_mode": "history"}
