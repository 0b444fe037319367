"""A choice among numbered options read from the model's token log-probabilities, not from its text.

The model is asked to reply with one number; the reply is capped at one token and the server returns the
`top_logprobs` of that token (llama.cpp's server and OpenAI both do). The probability of each option is the mass
the model put on its number, renormalised over the valid numbers, so a small model cannot break the format: a
reply that starts with something else only lowers `coverage` (the mass on valid numbers), which callers read as
"unsure". An endpoint that returns no log-probabilities gets a one-hot distribution on the number its text
starts with (the tolerant path), or none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from reground.tools.chat import CallStats, invoke_model, message_text
from reground.tools.llm import token_cap

# OpenAI allows at most 20 alternatives per token; llama.cpp's server takes the same field.
TOP_LOGPROBS = 20
_LEADING_NUMBER = re.compile(r"^\W*(\d{1,2})\b")


@dataclass(frozen=True)
class Choice:
    """The model's distribution over options 0..n (index = option number)."""

    probabilities: tuple[float, ...]
    coverage: float  # the share of the first token's probability mass that fell on a valid number
    source: str  # "logprobs" | "text" | "none"

    @property
    def best(self) -> int:
        """The most likely option (ties: the lower number)."""
        return max(range(len(self.probabilities)), key=lambda i: (self.probabilities[i], -i))

    def probability(self, option: int) -> float:
        return self.probabilities[option] if 0 <= option < len(self.probabilities) else 0.0


def distribution_from_logprobs(top: Sequence[dict[str, Any]], options: int) -> tuple[tuple[float, ...], float]:
    """(probabilities of options 0..options-1, coverage) from one token's top_logprobs entries."""
    mass = [0.0] * options
    total = 0.0
    for entry in top:
        probability = math.exp(float(entry.get("logprob", -math.inf)))
        total += probability
        token = str(entry.get("token", "")).strip()
        if token.isdigit() and int(token) < options:
            mass[int(token)] += probability
    valid = sum(mass)
    if valid <= 0.0:
        return tuple(0.0 for _ in mass), 0.0
    return tuple(m / valid for m in mass), valid / max(total, valid, 1e-12) if total else 1.0


def first_token_logprobs(message: BaseMessage) -> list[dict[str, Any]]:
    """The top_logprobs of the reply's first token, as the OpenAI-compatible response carries them."""
    logprobs = (getattr(message, "response_metadata", None) or {}).get("logprobs") or {}
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not content:
        return []
    first = content[0] or {}
    return list(first.get("top_logprobs") or [])


def choose(
    model: BaseChatModel,
    messages: Sequence[BaseMessage],
    options: int,
    stats: CallStats,
    *,
    tags: Sequence[str] = (),
) -> Choice:
    """Ask for one number in 0..options-1 and read the model's distribution over them (one short call)."""
    kwargs: dict[str, Any] = {**token_cap(model, 1), "logprobs": True, "top_logprobs": TOP_LOGPROBS}
    reply = invoke_model(model, messages, stats, tags, **kwargs)
    top = first_token_logprobs(reply)
    if top:
        probabilities, coverage = distribution_from_logprobs(top, options)
        if coverage > 0.0:
            return Choice(probabilities, coverage, "logprobs")
    match = _LEADING_NUMBER.match(message_text(reply))
    if match and int(match.group(1)) < options:
        picked = int(match.group(1))
        return Choice(tuple(1.0 if i == picked else 0.0 for i in range(options)), 1.0, "text")
    return Choice(tuple(0.0 for _ in range(options)), 0.0, "none")
