"""LLM judges for evaluation: G-Eval 1-5 ratings, a Prometheus-style rubric scorer, a pairwise judge
run in both orders, ReGround's hallucination judge, and an answerability judge (do the passages state the answer).

Any LangChain chat model can judge. Every judge asks for its verdict as one number and reads the model's
probabilities of the valid numbers from the first token's log-probabilities (tools/adapters/choice.py), so no reply text
is parsed and a small model cannot break the format: a reply that starts with anything else only lowers the
`coverage` (the mass on valid numbers). A verdict whose coverage is under `COVERAGE_FLOOR` is returned as None
and counted as "unparseable" in the summaries, never guessed. The ratings are G-Eval's probability-weighted mean
(the sum of p(s) * s over 1..5); an endpoint that returns no log-probabilities is read from the number its reply
starts with (tools/adapters/choice.py's text path).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from reground.prompts import judges as prompts
from reground.prompts.fence import fence_text
from reground.tools.adapters.chat import CallStats
from reground.tools.adapters.choice import Choice, Options, choose

Pairwise = Literal["A", "B", "tie"]

# Under half the first token's mass on a valid number, the model was not giving the verdict it was asked for.
COVERAGE_FLOOR = 0.5


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


def _choose(model: BaseChatModel, text: str, options: Options, stats: CallStats) -> Choice:
    return choose(model, [HumanMessage(text)], options, stats, tags=["judge"])


def readable(choice: Choice) -> bool:
    """Enough of the first token's mass fell on a valid number for the verdict to count."""
    return choice.coverage >= COVERAGE_FLOOR


def describe(choice: Choice) -> str:
    """The verdict's audit record: how it was read, its coverage and each option's probability."""
    shown = " ".join(f"{o}={p:.3f}" for o, p in zip(choice.options, choice.probabilities, strict=True))
    return f"{choice.source} coverage={choice.coverage:.3f} {shown}"


# --- judges -------------------------------------------------------------------------------------


@dataclass
class Judgement:
    """One judge verdict: the value read (None = unreadable, coverage under the floor), how it was read (`raw`:
    source, coverage and the option probabilities, for audits) and the distribution itself."""

    value: Any
    raw: str
    coverage: float = 0.0
    source: str = "none"
    probabilities: dict[int, float] = field(default_factory=dict)

    @classmethod
    def of(cls, choice: Choice, value: Any) -> Judgement:
        return cls(
            value if readable(choice) else None,
            describe(choice),
            choice.coverage,
            choice.source,
            dict(zip(choice.options, choice.probabilities, strict=True)),
        )


@dataclass
class PairwiseJudgement:
    """Both orders of a pairwise comparison and the combined verdict.

    `verdict` is the agreed winner; when the two orders disagree it is "tie" (position bias
    cancelled) and `consistent` is False; when either order is unreadable it is None.
    """

    verdict: Pairwise | None
    first: Pairwise | None  # A = answer_a shown first
    second: Pairwise | None  # already mapped back: A = answer_a (shown second)
    consistent: bool | None
    raw: list[str] = field(default_factory=list)


def _rating(model: BaseChatModel, text: str, stats: CallStats) -> Judgement:
    """A 1-5 rating as G-Eval scores it: the probability-weighted mean of the scale's numbers."""
    choice = _choose(model, text, prompts.RATING_SCALE, stats)
    return Judgement.of(choice, choice.mean)


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
        out[name] = _rating(model, head + "\n" + prompts.GEVAL_TASK.format(answer=answer, **spec), stats)
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
    return _rating(model, _context(history, question, passages) + "\n" + task, stats)


_PAIRWISE_OPTIONS = (prompts.PAIRWISE_FIRST, prompts.PAIRWISE_SECOND, prompts.PAIRWISE_TIE)


def _preference(choice: Choice, *, shown_first: Pairwise, shown_second: Pairwise) -> Pairwise | None:
    """The preferred answer of one order, named by which of the two it is (None: unreadable)."""
    if not readable(choice):
        return None
    return {
        prompts.PAIRWISE_FIRST: shown_first,
        prompts.PAIRWISE_SECOND: shown_second,
        prompts.PAIRWISE_TIE: "tie",
    }[choice.best]


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
    one = _choose(
        model, head + prompts.PAIRWISE_TASK.format(answer_a=answer_a, answer_b=answer_b), _PAIRWISE_OPTIONS, stats
    )
    two = _choose(
        model, head + prompts.PAIRWISE_TASK.format(answer_a=answer_b, answer_b=answer_a), _PAIRWISE_OPTIONS, stats
    )
    first = _preference(one, shown_first="A", shown_second="B")
    second = _preference(two, shown_first="B", shown_second="A")
    raw = [describe(one), describe(two)]
    if first is None or second is None:
        return PairwiseJudgement(None, first, second, None, raw)
    consistent = first == second
    return PairwiseJudgement(first if consistent else "tie", first, second, consistent, raw)


def hallucination_prompt(answer: str) -> str:
    examples = "\n\n".join(
        prompts.HALLUCINATION_EXAMPLE.format(number=prompts.VERDICT_NUMBERS[e["verdict"]], **e)
        for e in prompts.HALLUCINATION_EXAMPLES
    )
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
    """ReGround's hallucination judge: True = hallucinated, False = faithful, None = unreadable.

    The verdict is the likelier of the two numbers; `probabilities[HALLUCINATED]` keeps how sure the judge was."""
    stats = stats if stats is not None else CallStats()
    text = _context(history, question, passages) + "\n" + hallucination_prompt(answer)
    choice = _choose(model, text, (prompts.FAITHFUL, prompts.HALLUCINATED), stats)
    return Judgement.of(choice, choice.best == prompts.HALLUCINATED)


def answerability(
    model: BaseChatModel,
    *,
    history: Sequence[Mapping[str, str]],
    question: str,
    passages: Sequence[str],
    stats: CallStats | None = None,
) -> Judgement:
    """Whether the passages state the answer to the question: True / False / None (unreadable);
    `probabilities[ANSWERS]` is the model's probability of "they do", the score an AUC reads."""
    stats = stats if stats is not None else CallStats()
    text = _context(history, question, passages) + "\n" + prompts.ANSWERABILITY_TASK
    choice = _choose(model, text, (prompts.DOES_NOT_ANSWER, prompts.ANSWERS), stats)
    return Judgement.of(choice, choice.best == prompts.ANSWERS)


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
