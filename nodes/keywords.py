"""ConvRAG's keyword extraction: an LLM with structured output, or an LLM-free lexical extractor."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field, field_validator
from reground.nodes.common import NodeEnv, format_history
from reground.nodes.state import State
from reground.prompts import keywords as prompts
from reground.tools.adapters.chat import LLMReplyError
from reground.tools.retrieval.keywords import lexical_keywords
from reground.tools.tuning.models import CHAT
from reground.tools.tuning.turn import BUDGETS

__all__ = ["Keywords", "extract_keywords", "lexical_keywords"]


class Keywords(BaseModel):
    """Search keywords for the question."""

    keywords: list[str] = Field(description="2 to 5 search keywords or short noun phrases")

    @field_validator("keywords")
    @classmethod
    def _clean(cls, value: list[str]) -> list[str]:
        cleaned = [k.strip() for k in value if isinstance(k, str) and k.strip() and len(k) < CHAT.keyword_max_chars]
        if not cleaned:
            raise ValueError("no usable keywords")
        return cleaned[: CHAT.max_keywords]


def extract_keywords(state: State, env: NodeEnv) -> dict[str, Any]:
    method = env.context.keyword_method
    question, standalone = state["question"], state.get("standalone_question", state["question"])
    history = state.get("history", [])
    if method == "off":
        return {"keywords": []}
    recent = " ".join(turn["text"] for turn in history[-BUDGETS.keyword_recent_messages :])
    if method == "lexical":
        return {"keywords": lexical_keywords(standalone, question, recent)}
    env.progress("extract_keywords", "extracting keywords")
    messages = [
        SystemMessage(env.context.prompts.keywords_prompt),
        HumanMessage(
            prompts.USER.format(
                history=format_history(history[-BUDGETS.keyword_history_messages :]),
                question=question,
                standalone=standalone,
            )
        ),
    ]
    try:
        reply = env.ask(
            "refiner", messages, Keywords, tags=["extract_keywords"], max_tokens=env.context.models.keywords_max_tokens
        )
        return {"keywords": reply.keywords}
    except LLMReplyError as exc:
        env.stats.notes.append(f"keywords unusable ({exc}); using the lexical extractor")
        return {"keywords": lexical_keywords(standalone, question, recent)}
