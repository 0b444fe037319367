"""A choice among numbered options read from the model's token log-probabilities, not from its text.

The model is asked to reply with one number; the reply is capped at one token and the server returns the
`top_logprobs` of that token (llama.cpp's server and OpenAI both do). The probability of each option is the mass
the model put on its number, renormalised over the valid numbers, so a small model cannot break the format: a
reply that starts with something else only lowers `coverage` (the mass on valid numbers), which callers read as
"unsure". An endpoint that returns no log-probabilities gets a one-hot distribution on the number its text
starts with (the tolerant path), or none.

The options are the numbers 0..n-1 by default, or any small non-negative numbers a caller names (a 1-5 rating
scale: `options=(1, 2, 3, 4, 5)`); a digit the model gives outside them counts as off-format, like a word.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from reground.tools.adapters.chat import CallStats, invoke_model, message_text
from reground.tools.adapters.llm import token_cap
from reground.tools.tuning.models import CHAT

TOP_LOGPROBS = CHAT.top_logprobs  # OpenAI's most alternatives per token
_LEADING_NUMBER = re.compile(r"^\W*(\d{1,2})\b")


Options = int | Sequence[int]


def option_numbers(options: Options) -> tuple[int, ...]:
    """The option numbers: 0..options-1 for a count, else the numbers given (distinct, in the order given)."""
    numbers = tuple(range(options)) if isinstance(options, int) else tuple(dict.fromkeys(int(o) for o in options))
    if not numbers or min(numbers) < 0:
        raise ValueError(f"options must be non-negative numbers, got {options!r}")
    return numbers


@dataclass(frozen=True)
class Choice:
    """The model's distribution over the options: probabilities[i] belongs to option number labels[i] (no labels:
    options 0..n-1, index = option number)."""

    probabilities: tuple[float, ...]
    coverage: float  # the share of the first token's probability mass that fell on a valid number
    source: str  # "logprobs" | "text" | "none"
    labels: tuple[int, ...] = ()

    @property
    def options(self) -> tuple[int, ...]:
        return self.labels or tuple(range(len(self.probabilities)))

    @property
    def best(self) -> int:
        """The most likely option (ties: the lower number)."""
        ranked = zip(self.options, self.probabilities, strict=True)
        return max(ranked, key=lambda pair: (pair[1], -pair[0]))[0]

    def probability(self, option: int) -> float:
        return dict(zip(self.options, self.probabilities, strict=True)).get(option, 0.0)

    @property
    def mean(self) -> float:
        """The probability-weighted mean option number (G-Eval's score: the sum of p(s) * s); 0 with no mass."""
        return sum(p * o for o, p in zip(self.options, self.probabilities, strict=True))


def distribution_from_logprobs(top: Sequence[dict[str, Any]], options: Options) -> tuple[tuple[float, ...], float]:
    """(probabilities of the options in order, coverage) from one token's top_logprobs entries."""
    numbers = option_numbers(options)
    index = {str(number): i for i, number in enumerate(numbers)}
    mass = [0.0] * len(numbers)
    total = 0.0
    for entry in top:
        probability = math.exp(float(entry.get("logprob", -math.inf)))
        total += probability
        token = str(entry.get("token", "")).strip()
        if token.isdigit() and str(int(token)) in index:
            mass[index[str(int(token))]] += probability
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
    options: Options,
    stats: CallStats,
    *,
    tags: Sequence[str] = (),
) -> Choice:
    """Ask for one number among the options (0..options-1, or the numbers given) and read the model's
    distribution over them (one short call)."""
    numbers = option_numbers(options)
    labels = () if isinstance(options, int) else numbers
    kwargs: dict[str, Any] = {**token_cap(model, 1), "logprobs": True, "top_logprobs": TOP_LOGPROBS}
    reply = invoke_model(model, messages, stats, tags, **kwargs)
    top = first_token_logprobs(reply)
    if top:
        probabilities, coverage = distribution_from_logprobs(top, numbers)
        if coverage > 0.0:
            return Choice(probabilities, coverage, "logprobs", labels)
    match = _LEADING_NUMBER.match(message_text(reply))
    if match and int(match.group(1)) in numbers:
        picked = int(match.group(1))
        return Choice(tuple(1.0 if n == picked else 0.0 for n in numbers), 1.0, "text", labels)
    return Choice(tuple(0.0 for _ in numbers), 0.0, "none", labels)
