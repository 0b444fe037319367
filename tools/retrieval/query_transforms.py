"""The HR chatbot paper's query transforms (Afzal et al. 2024): texts an LLM writes to search with.

- `hyde`: a short hypothetical passage that would answer the question; its embedding is searched (HyDE).
- `topics`: ~3 topics the user means; each is embedded and searched (Intended Topics).
- `multi_query`: question variants; each is searched with the whole stack and the rankings are fused with
  reciprocal rank fusion (Multi-Query).

`RetrievalSettings.query_transform` picks one (default "none"); `HybridRetriever` uses the texts of a
`RetrievalQuery.expansions`. One structured call (a JSON schema the server enforces) per transform and turn; a
reply that does not parse leaves the turn without expansions (the caller notes it), never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import AfterValidator, BaseModel, Field, field_validator
from reground.prompts import query_transforms as prompts
from reground.prompts.formatting import format_history
from reground.tools.adapters.chat import CallStats, one_line
from reground.tools.adapters.structured import call_json
from reground.tools.text.tokens import count_tokens, tail_tokens
from reground.tools.tuning.retrieval import (
    QUERY_TRANSFORMS,
    TRANSFORMS,
    QueryTransform,
    check_transform,
)

__all__ = ["TRANSFORMS", "QueryTransform", "transform_query"]


def _search_texts(value: list[str]) -> list[str]:
    items = list(dict.fromkeys(" ".join(v.split()) for v in value if len(v.split()) >= 1))
    items = [i[: QUERY_TRANSFORMS.max_text_chars] for i in items if i]
    if not items:
        raise ValueError("no non-empty item")
    return items[: QUERY_TRANSFORMS.max_items]


# A reply's list of texts to search with: white space folded, repeats and empty items dropped, each one cut.
SearchTexts = Annotated[list[str], AfterValidator(_search_texts)]


class HypotheticalPassage(BaseModel):
    """HyDE: a passage of the page that would answer the question."""

    passage: str = Field(description="2 to 4 sentences of the help page that answers the last message")

    @field_validator("passage")
    @classmethod
    def _some_words(cls, value: str) -> str:
        words = QUERY_TRANSFORMS.min_passage_words
        passage = one_line(value, min_words=words, problem=f"the passage has fewer than {words} words")
        return passage[: QUERY_TRANSFORMS.max_text_chars]


class IntendedTopics(BaseModel):
    """Intended topics: short noun phrases naming what the user means."""

    topics: SearchTexts = Field(description="3 topics, short noun phrases, most specific first")


class QueryVariants(BaseModel):
    """Multi-query: standalone variants of the question."""

    queries: SearchTexts = Field(description="3 standalone search queries for the last message")


_TASKS: dict[str, tuple[str, type[BaseModel]]] = {
    "hyde": (prompts.HYDE_SYSTEM, HypotheticalPassage),
    "topics": (prompts.TOPICS_SYSTEM, IntendedTopics),
    "multi_query": (prompts.MULTI_QUERY_SYSTEM, QueryVariants),
}


def recent_history(history: Sequence[Mapping[str, str]], budget_tokens: int) -> list[dict[str, str]]:
    """The latest turns that fit in budget_tokens (the oldest one kept cut to its tail), oldest first."""
    picked: list[dict[str, str]] = []
    remaining = budget_tokens
    for turn in reversed(history):
        text = str(turn.get("text", "")).strip()
        if not text or remaining <= 0:
            continue
        cost = count_tokens(text)
        if cost > remaining:
            text, cost = tail_tokens(text, remaining).strip(), remaining
        picked.append({"role": str(turn.get("role", "user")), "text": text})
        remaining -= cost
    return list(reversed(picked))


def transform_messages(
    name: str, question: str, history: Sequence[Mapping[str, str]], budget_tokens: int
) -> list[BaseMessage]:
    """The chat messages of one transform's call (the conversation within budget_tokens, then the question)."""
    if check_transform(name) == "none":
        raise ValueError("the 'none' transform makes no call")
    system, _ = _TASKS[name]
    user = prompts.USER.format(history=format_history(recent_history(history, budget_tokens)), question=question)
    return [SystemMessage(system), HumanMessage(user)]


def expansions_of(reply: BaseModel) -> tuple[str, ...]:
    """The texts to search with, from a transform's validated reply."""
    if isinstance(reply, HypotheticalPassage):
        return (reply.passage,)
    if isinstance(reply, IntendedTopics):
        return tuple(reply.topics)
    if isinstance(reply, QueryVariants):
        return tuple(reply.queries)
    raise TypeError(f"not a query transform reply: {type(reply).__name__}")


def transform_query(
    model: BaseChatModel,
    name: str,
    question: str,
    history: Sequence[Mapping[str, str]],
    stats: CallStats,
    *,
    history_tokens: int,
    max_tokens: int,
) -> tuple[str, ...]:
    """The texts the transform `name` adds to the search for this turn (() for "none").

    Raises LLMReplyError when the reply is unusable (callers search without expansions) and ModelError subclasses
    when no model answers.
    """
    if check_transform(name) == "none" or not question.strip():
        return ()
    _, schema = _TASKS[name]
    messages = transform_messages(name, question.strip(), history, history_tokens)
    reply, _ = call_json(model, messages, schema, stats, tags=["query_transform", name], max_tokens=max_tokens)
    return expansions_of(reply)
