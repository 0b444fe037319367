"""Calling a chat model from a node: usage accounting, one repair retry, clear errors when it is down."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from reground.tools.adapters.llm import LLMTimeoutError, LLMUnavailableError, token_cap
from reground.tools.tuning.models import CHAT

T = TypeVar("T")

REPAIR_INSTRUCTION = (
    "Your previous reply could not be used: {problem}. Reply again, following the requested format exactly."
)


class LLMReplyError(ValueError):
    """The model answered, twice, with something that does not parse; callers take their fallback path."""


@dataclass
class CallStats:
    """Cost of the LLM calls one node made (for the turn's trace)."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def add_message(self, message: BaseMessage, seconds: float) -> None:
        self.llm_calls += 1
        self.seconds += seconds
        usage = getattr(message, "usage_metadata", None) or {}
        self.prompt_tokens += int(usage.get("input_tokens", 0) or 0)
        self.completion_tokens += int(usage.get("output_tokens", 0) or 0)


# A refused, reset or dropped connection means nothing is serving (fail fast, whether before the call or
# mid-reply); a timeout is transient (LLMTimeoutError, retried by the node's policy). Matched by name along
# the exception chain, so openai's and httpx's wrappers of the same failure are all recognised.
_CONNECTION_ERRORS = frozenset(
    {"APIConnectionError", "ConnectError", "ReadError", "WriteError", "RemoteProtocolError", "ConnectionError"}
)
_TIMEOUT_ERRORS = frozenset({"APITimeoutError", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException"})


def model_failure(model: BaseChatModel, exc: BaseException) -> LLMUnavailableError | LLMTimeoutError | None:
    """The ModelError a transport failure of `model` stands for (naming its URL), or None for anything else."""
    url = str(getattr(model, "openai_api_base", "") or "the configured endpoint")
    current: BaseException | None = exc
    for _ in range(
        CHAT.cause_chain_depth
    ):  # follow __cause__/__context__: openai wraps httpx, which wraps the socket error
        if current is None:
            break
        name = type(current).__name__
        if name in _TIMEOUT_ERRORS:
            return LLMTimeoutError(
                f"The chat model at {url} did not reply in time ({name}). It may be overloaded: retry, raise "
                "models.llm_timeout_s (REGROUND_MODELS__LLM_TIMEOUT_S), or check the server with `reground llm status`."
            )
        if name in _CONNECTION_ERRORS or isinstance(current, ConnectionError):
            return LLMUnavailableError(
                f"The chat model at {url} stopped answering ({type(exc).__name__}: {str(exc) or name}). Start it "
                "again with `reground llm serve` (or fix the endpoint in REGROUND_CHAT_MODEL), then ask again."
            )
        current = current.__cause__ or current.__context__
    return None


def _invoke(
    model: BaseChatModel,
    messages: Sequence[BaseMessage],
    stats: CallStats,
    tags: Sequence[str],
    max_tokens: int | None = None,
) -> AIMessage:
    return invoke_model(model, messages, stats, tags, **token_cap(model, max_tokens))


def invoke_model(
    model: BaseChatModel, messages: Sequence[BaseMessage], stats: CallStats, tags: Sequence[str], **kwargs: Any
) -> AIMessage:
    """One call with per-call request arguments, its cost recorded, transport failures as ModelErrors."""
    started = time.perf_counter()
    try:
        reply = model.invoke(list(messages), config={"tags": list(tags)}, **kwargs)
    except Exception as exc:
        failure = model_failure(model, exc)
        if failure is not None:
            raise failure from exc
        raise
    stats.add_message(reply, time.perf_counter() - started)
    if not isinstance(reply, AIMessage):
        reply = AIMessage(content=str(reply.content))
    return reply


def message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content.strip()
    parts = [part if isinstance(part, str) else str(part.get("text", "")) for part in content]
    return "".join(parts).strip()


def call_text(
    model: BaseChatModel,
    messages: Sequence[BaseMessage],
    stats: CallStats,
    *,
    tags: Sequence[str] = (),
    max_tokens: int | None = None,
) -> str:
    """One plain-text call."""
    return message_text(_invoke(model, messages, stats, tags, max_tokens))


def call_parsed(
    model: BaseChatModel,
    messages: Sequence[BaseMessage],
    parse: Callable[[str], T],
    stats: CallStats,
    *,
    tags: Sequence[str] = (),
    max_tokens: int | None = None,
) -> T:
    """A text call whose reply must parse; on failure, one retry with a repair instruction.

    `parse` raises ValueError with a short description of what was wrong. A second failure raises
    LLMReplyError so the node takes its fallback path instead of crashing.
    """
    reply = _invoke(model, messages, stats, tags, max_tokens)
    try:
        return parse(message_text(reply))
    except ValueError as exc:
        problem = str(exc) or "it did not follow the format"
        stats.notes.append(f"reply did not parse ({problem}); retried with a repair instruction")
    repair = [*messages, reply, HumanMessage(REPAIR_INSTRUCTION.format(problem=problem))]
    second = _invoke(model, repair, stats, tags, max_tokens)
    try:
        return parse(message_text(second))
    except ValueError as exc:
        raise LLMReplyError(f"unparseable reply after one repair: {exc}") from exc


def one_line(text: str, *, min_words: int, problem: str) -> str:
    """A reply's text with its white space folded; ValueError(problem) when fewer than `min_words` words are left
    (the problem is what the repair instruction tells the model)."""
    folded = " ".join(text.split())
    if len(folded.split()) < min_words:
        raise ValueError(problem)
    return folded


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a reply (models wrap JSON in prose or code fences)."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        raise ValueError("no JSON object found")
    try:
        value = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise ValueError("JSON is not an object")
    return value
