"""LLM judges for evaluation: G-Eval 1-5 ratings, a Prometheus-style rubric scorer, a pairwise judge
run in both orders, and ReGround's hallucination judge.

Any LangChain chat model can judge. Small models answer in many shapes, so every verdict goes
through a tolerant parser; a verdict that does not parse is returned as None and counted as
"unparseable" in the summaries, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from reground.prompts import judges as prompts
from reground.prompts.fence import fence_text
from reground.tools.chat import CallStats, call_text

Pairwise = Literal["A", "B", "tie"]

_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_NUM = r"(\d+(?:\.\d+)?|one|two|three|four|five)"


# --- parsers ----------------------------------------------------------------------------------


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object embedded in a reply (models wrap JSON in fences or prose)."""
    found: list[dict[str, Any]] = []
    for match in re.finditer(r"\{[^{}]*\}", text, re.DOTALL):
        try:
            value = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _to_number(raw: str) -> float:
    raw = raw.lower()
    return float(_NUMBER_WORDS[raw]) if raw in _NUMBER_WORDS else float(raw)


def _in_range(value: float, lo: int, hi: int) -> float | None:
    return value if lo <= value <= hi else None


def parse_rating(text: str | None, lo: int = 1, hi: int = 5) -> float | None:
    """A lo-hi rating from a reply: JSON, "Score: 4", "[RESULT] 4", "4/5", "**4**", "Rating - four",
    or a reply that is just the number. Out of range, several conflicting numbers, or none: None."""
    if not text or not text.strip():
        return None
    for obj in _json_objects(text):
        for key in ("score", "rating", "result", "value", "grade"):
            if key in obj:
                try:
                    return _in_range(_to_number(str(obj[key]).strip()), lo, hi)
                except (ValueError, KeyError):
                    return None
    lowered = text.lower().replace("*", "")
    labelled = [
        r"\[result\]\s*\(?" + _NUM,
        r"(?:score|rating|result|grade)\s*(?:is|of|=|:|-)?\s*\(?" + _NUM + r"\b",
        r"\b" + _NUM + r"\s*(?:/|out of)\s*" + str(hi) + r"\b",
    ]
    for pattern in labelled:
        matches = re.findall(pattern, lowered)
        if matches:
            # The last labelled value is the verdict (reasoning may quote the scale first).
            return _in_range(_to_number(matches[-1]), lo, hi)
    bold = re.findall(r"\*\*\s*(\d+(?:\.\d+)?)\s*\*\*", text)
    if len(set(bold)) == 1:
        return _in_range(float(bold[0]), lo, hi)
    bare = re.fullmatch(r"\s*[\(\[]?\s*" + _NUM + r"\s*[\)\]]?\s*[.!]?\s*", lowered)
    if bare:
        return _in_range(_to_number(bare.group(1)), lo, hi)
    numbers = set(re.findall(r"(?<![\d.])(\d+(?:\.\d+)?)(?![\d.])", lowered))
    if len(numbers) == 1 and len(lowered.split()) <= 6:
        return _in_range(float(numbers.pop()), lo, hi)
    return None


_PAIR_WORDS: dict[str, Pairwise] = {"a": "A", "b": "B", "c": "tie", "tie": "tie", "draw": "tie"}


def parse_pairwise(text: str | None) -> Pairwise | None:
    """A / B / tie from a reply: "[[A]]", "[[C]]" (tie), JSON {"verdict": "B"}, "Verdict: tie",
    "Answer A is better", or just "B". Conflicting or missing verdicts: None."""
    if not text or not text.strip():
        return None
    brackets = re.findall(r"\[\[\s*([abc]|tie)\s*\]\]", text, re.IGNORECASE)
    if brackets:
        return _PAIR_WORDS[brackets[-1].lower()]
    for obj in _json_objects(text):
        for key in ("verdict", "winner", "better", "choice", "answer"):
            value = str(obj.get(key, "")).strip().lower().strip("[]()\"' ")
            if value in _PAIR_WORDS:
                return _PAIR_WORDS[value]
    lowered = text.lower().replace("*", "")
    verdict = re.findall(
        r"(?:verdict|winner|final answer|choice)\s*(?:is|:|=|-)?\s*\(?\s*(a|b|c|tie|draw)\b",
        lowered,
    )
    if verdict:
        return _PAIR_WORDS[verdict[-1]]
    # Only tie statements, not the instruction's "[[C]] for a tie" echoed back by a small model.
    if re.search(
        r"\b(it'?s a tie|it is a tie|(?:are|is) (?:a )?tie\b|(?:are |is )?equally (?:good|bad|helpful)|"
        r"both are equal|no difference)",
        lowered,
    ):
        return "tie"
    better = set(
        re.findall(
            r"\b(?:response|answer|assistant|output|option)\s+(a|b)\s+(?:is|was)\s+(?:clearly\s+)?"
            r"(?:better|preferred|superior|more accurate|the better)",
            lowered,
        )
    )
    if len(better) == 1:
        return _PAIR_WORDS[better.pop()]
    bare = re.fullmatch(r"\s*[\[\(]?\s*(a|b|c|tie)\s*[\]\)]?\s*[.!]?\s*", lowered)
    if bare:
        return _PAIR_WORDS[bare.group(1)]
    return None


_NEGATIVE = (
    r"not\s+(?:a\s+)?hallucinat\w*",
    r"no\s+hallucinations?",
    r"faithful",
    r"grounded",
    r"supported",
)
_POSITIVE = (r"hallucinat\w*", r"unfaithful", r"ungrounded", r"unsupported")


def parse_hallucination(text: str | None) -> bool | None:
    """True if the reply judges the answer hallucinated, False if faithful, None if unclear.

    Reads a "Verdict:" line first, then JSON ({"hallucination": true} / {"verdict": ...}), then
    the last verdict word in the reply, then a leading yes/no to "does it hallucinate?"."""
    if not text or not text.strip():
        return None
    lowered = text.lower().replace("*", "")
    lines = re.findall(r"verdict\s*[:=\-]\s*(.+)", lowered)
    if lines:
        labels = {_hallucination_label(line) for line in lines} - {None}
        # Several different verdicts: the model echoed the few-shot examples; no guessing which is meant.
        return labels.pop() if len(labels) == 1 else None
    for obj in _json_objects(text):
        for key in ("hallucination", "hallucinated", "is_hallucination"):
            if isinstance(obj.get(key), bool):
                return bool(obj[key])
        if "verdict" in obj:
            return _hallucination_label(str(obj["verdict"]).lower())
    label = _last_label(lowered)
    if label is not None:
        return label
    first = re.match(r"\s*(yes|no)\b", lowered)
    if first:
        return first.group(1) == "yes"
    return None


def _hallucination_label(segment: str) -> bool | None:
    segment = segment.strip()
    for pattern in _NEGATIVE:
        if re.match(r"\W*" + pattern, segment):
            return False
    for pattern in _POSITIVE:
        if re.match(r"\W*" + pattern, segment):
            return True
    if re.match(r"\W*yes\b", segment):
        return True
    if re.match(r"\W*no\b", segment):
        return False
    return None


_NEGATED = re.compile(r"(?:\b(?:not|no|never)|n't)\s+(?:a\s+|be\s+|been\s+|\w+ly\s+)?$")


def _last_label(text: str) -> bool | None:
    """The verdict word that occurs last; a negated word counts as its opposite.

    "not hallucinated" is faithful and "not supported" is hallucinated: a small judge that echoes
    the definition ("hallucinates because it states information not supported ...") must not be
    read as faithful because "supported" comes last."""
    best: tuple[int, bool] | None = None
    for patterns, value in ((_NEGATIVE, False), (_POSITIVE, True)):
        for pattern in patterns:
            for match in re.finditer(r"\b" + pattern, text):
                start = match.start()
                negated = bool(_NEGATED.search(text[:start]))
                if value and negated:
                    continue  # "not hallucinated", "no hallucination": the negative pattern counts
                label = (not value) if negated else value
                if best is None or start > best[0]:
                    best = (start, label)
    return None if best is None else best[1]


# --- formatting ---------------------------------------------------------------------------------


def format_history(history: Sequence[Mapping[str, str]]) -> str:
    """Conversation turns as 'User: ...' / 'Assistant: ...' lines (dataset 'agent' = assistant)."""
    if not history:
        return "(no earlier turns)"
    names = {"user": "User", "agent": "Assistant", "assistant": "Assistant"}
    return "\n".join(f"{names.get(t.get('role', ''), 'User')}: {t.get('text', '')}" for t in history)


def format_passages(passages: Sequence[str]) -> str:
    if not passages:
        return "(none)"
    return "\n\n".join(f"[{i}] {fence_text(p)}" for i, p in enumerate(passages, 1))  # inside the prompt fence


def _context(history: Sequence[Mapping[str, str]], question: str, passages: Sequence[str]) -> str:
    return prompts.CONTEXT.format(
        history=format_history(history), question=question, passages=format_passages(passages)
    )


def _ask(model: BaseChatModel, text: str, stats: CallStats) -> str:
    return call_text(model, [HumanMessage(text)], stats, tags=["judge"])


# --- judges -------------------------------------------------------------------------------------


@dataclass
class Judgement:
    """One judge verdict: the parsed value (None = unparseable) and the raw reply."""

    value: Any
    raw: str


@dataclass
class PairwiseJudgement:
    """Both orders of a pairwise comparison and the combined verdict.

    `verdict` is the agreed winner; when the two orders disagree it is "tie" (position bias
    cancelled) and `consistent` is False; when either order is unparseable it is None.
    """

    verdict: Pairwise | None
    first: Pairwise | None  # A = answer_a shown first
    second: Pairwise | None  # already mapped back: A = answer_a (shown second)
    consistent: bool | None
    raw: list[str] = field(default_factory=list)


def geval(
    model: BaseChatModel,
    *,
    history: Sequence[Mapping[str, str]],
    question: str,
    answer: str,
    passages: Sequence[str],
    dimensions: Iterable[str] = tuple(prompts.GEVAL_DIMENSIONS),
    stats: CallStats | None = None,
) -> dict[str, Judgement]:
    """G-Eval-style 1-5 ratings, one call per dimension (shared context first for prefix reuse)."""
    stats = stats if stats is not None else CallStats()
    head = _context(history, question, passages)
    out: dict[str, Judgement] = {}
    for name in dimensions:
        spec = prompts.GEVAL_DIMENSIONS[name]
        raw = _ask(model, head + "\n" + prompts.GEVAL_TASK.format(answer=answer, **spec), stats)
        out[name] = Judgement(parse_rating(raw), raw)
    return out


def rubric_score(
    model: BaseChatModel,
    *,
    history: Sequence[Mapping[str, str]],
    question: str,
    answer: str,
    passages: Sequence[str] = (),
    reference: str | None = None,
    rubric: Mapping[str, str] = prompts.DEFAULT_RUBRIC,
    stats: CallStats | None = None,
) -> Judgement:
    """Prometheus-style absolute grading (1-5) against a rubric and an optional reference answer."""
    stats = stats if stats is not None else CallStats()
    task = prompts.RUBRIC_TASK.format(answer=answer, reference=reference or prompts.NO_REFERENCE, **rubric)
    raw = _ask(model, _context(history, question, passages) + "\n" + task, stats)
    return Judgement(parse_rating(raw), raw)


def pairwise(
    model: BaseChatModel,
    *,
    history: Sequence[Mapping[str, str]],
    question: str,
    answer_a: str,
    answer_b: str,
    passages: Sequence[str] = (),
    stats: CallStats | None = None,
) -> PairwiseJudgement:
    """Compare two answers in both orders; only a verdict both orders agree on counts as a win."""
    stats = stats if stats is not None else CallStats()
    head = _context(history, question, passages) + "\n"
    raw1 = _ask(model, head + prompts.PAIRWISE_TASK.format(answer_a=answer_a, answer_b=answer_b), stats)
    raw2 = _ask(model, head + prompts.PAIRWISE_TASK.format(answer_a=answer_b, answer_b=answer_a), stats)
    first = parse_pairwise(raw1)
    swapped = parse_pairwise(raw2)
    second: Pairwise | None = {"A": "B", "B": "A", "tie": "tie"}.get(swapped) if swapped else None  # type: ignore[assignment]
    if first is None or second is None:
        return PairwiseJudgement(None, first, second, None, [raw1, raw2])
    consistent = first == second
    return PairwiseJudgement(first if consistent else "tie", first, second, consistent, [raw1, raw2])


def hallucination_prompt(answer: str) -> str:
    examples = "\n\n".join(prompts.HALLUCINATION_EXAMPLE.format(**e) for e in prompts.HALLUCINATION_EXAMPLES)
    return prompts.HALLUCINATION_TASK.format(
        definition=prompts.HALLUCINATION_DEFINITION, examples=examples, answer=answer
    )


def hallucination(
    model: BaseChatModel,
    *,
    history: Sequence[Mapping[str, str]],
    question: str,
    answer: str,
    passages: Sequence[str],
    stats: CallStats | None = None,
) -> Judgement:
    """ReGround's hallucination judge: True = hallucinated, False = faithful, None = unparseable."""
    stats = stats if stats is not None else CallStats()
    raw = _ask(model, _context(history, question, passages) + "\n" + hallucination_prompt(answer), stats)
    return Judgement(parse_hallucination(raw), raw)


# --- aggregation --------------------------------------------------------------------------------


def summarize_values(values: Iterable[Any]) -> dict[str, float | int | None]:
    """Mean over parsed values (bools count as 0/1), with the parsed and unparseable counts."""
    values = list(values)
    parsed = [float(v) for v in values if v is not None]
    return {
        "mean": sum(parsed) / len(parsed) if parsed else None,
        "n": len(parsed),
        "unparseable": len(values) - len(parsed),
    }


def summarize_pairwise(
    judgements: Iterable[PairwiseJudgement | Mapping[str, Any]],
) -> dict[str, Any]:
    """Win / loss / tie counts of A vs B, position-bias disagreements and unparseable pairs."""
    counts = {"A": 0, "B": 0, "tie": 0, "unparseable": 0, "order_disagreements": 0}
    for j in judgements:
        verdict = j.verdict if isinstance(j, PairwiseJudgement) else j.get("verdict")
        consistent = j.consistent if isinstance(j, PairwiseJudgement) else j.get("consistent")
        if verdict is None:
            counts["unparseable"] += 1
            continue
        counts[verdict] += 1
        if consistent is False:
            counts["order_disagreements"] += 1
    return counts
