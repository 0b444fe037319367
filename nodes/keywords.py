"""ConvRAG's keyword extraction: an LLM with structured output, or an LLM-free lexical extractor."""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field, field_validator
from reground.nodes.common import NodeEnv, format_history
from reground.nodes.state import State
from reground.prompts import keywords as prompts
from reground.tools.adapters.chat import LLMReplyError
from reground.tools.retrieval.keywords import lexical_keywords

__all__ = ["Keywords", "extract_keywords", "keywords_reply", "lexical_keywords"]


class Keywords(BaseModel):
    """Search keywords for the question."""

    # The run's `models.keyword_max_chars` and `models.max_keywords` (keywords_reply sets them).
    max_chars: ClassVar[int | None] = None
    max_count: ClassVar[int | None] = None
    keywords: list[str] = Field(description="2 to 5 search keywords or short noun phrases")

    @field_validator("keywords")
    @classmethod
    def _clean(cls, value: list[str]) -> list[str]:
        limit = cls.max_chars
        cleaned = [k.strip() for k in value if isinstance(k, str) and k.strip() and (limit is None or len(k) < limit)]
        if not cleaned:
            raise ValueError("no usable keywords")
        return cleaned[: cls.max_count]


@cache
def keywords_reply(max_chars: int, max_count: int) -> type[Keywords]:
    """The keyword reply's schema with the run's limits (the same JSON schema; one class per pair of limits)."""
    namespace = {"__doc__": Keywords.__doc__, "__module__": __name__, "max_chars": max_chars, "max_count": max_count}
    return type("Keywords", (Keywords,), namespace)


def extract_keywords(state: State, env: NodeEnv) -> dict[str, Any]:
    """The turn's keywords for lexical search: from the LLM (structured output), the question and the last
    exchange's words (lexical, no LLM call), or none, as `keyword_method` says."""
    method = env.context.keyword_method
    question, standalone = state["question"], state.get("standalone_question", state["question"])
    history = state.get("history", [])
    if method == "off":
        return {"keywords": []}
    recent = " ".join(turn["text"] for turn in history[-env.context.budgets.keyword_recent_messages :])
    if method == "lexical":
        return {"keywords": lexical_keywords(standalone, question, recent)}
    env.progress("extract_keywords", "extracting keywords")
    messages = [
        SystemMessage(env.context.prompts.keywords_prompt),
        HumanMessage(
            prompts.USER.format(
                history=format_history(history[-env.context.budgets.keyword_history_messages :]),
                question=question,
                standalone=standalone,
            )
        ),
    ]
    try:
        models = env.context.models
        schema = keywords_reply(models.keyword_max_chars, models.max_keywords)
        reply = env.ask("refiner", messages, schema, tags=["extract_keywords"], max_tokens=models.keywords_max_tokens)
        return {"keywords": reply.keywords}
    except LLMReplyError as exc:
        env.stats.notes.append(f"keywords unusable ({exc}); using the lexical extractor")
        return {"keywords": lexical_keywords(standalone, question, recent)}
