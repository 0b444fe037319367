"""The judges read their verdicts from the first token's log-probabilities (tools/adapters/choice.py), never from text:
the weighted G-Eval score, both pairwise orders and their merge, unreadable replies counted, the text fallback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from reground.evals.runs.judges import (
    COVERAGE_FLOOR,
    PairwiseJudgement,
    answerability,
    geval,
    hallucination,
    hallucination_prompt,
    pairwise,
    rubric_score,
    summarize_pairwise,
    summarize_values,
)
from reground.prompts import judges as judge_prompts

from reground.testing.fake_chat import ScriptedChatModel

CASE: dict[str, Any] = {"history": [], "question": "days?", "passages": ["Employees get 25 days."]}


def _judge_model(replies: list[object]) -> ScriptedChatModel:
    return ScriptedChatModel(script={"other": replies})


class NoLogprobs(ScriptedChatModel):
    """An endpoint that returns no log-probabilities: only the reply's text."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.pop("logprobs", None)
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_geval_scores_each_dimension_as_the_probability_weighted_mean() -> None:
    model = _judge_model(
        [
            {"5": 0.6, "4": 0.4},  # 4.6
            {"3": 0.9, "Score": 0.1},  # coverage 0.9: the distribution is renormalised over 1..5 -> 3.0
            {"The": 0.7, "2": 0.3},  # coverage 0.3: unreadable, never guessed
            {"0": 0.6, "2": 0.2, "1": 0.2},  # 0 is not on the 1-5 scale: coverage 0.4, unreadable
        ]
    )
    out = geval(
        model,
        history=[{"role": "user", "text": "hi"}, {"role": "agent", "text": "hello"}],
        question="How many days?",
        answer="25 days.",
        passages=["Employees get 25 days."],
    )
    assert list(out) == list(judge_prompts.GEVAL_DIMENSIONS)
    values = [j.value for j in out.values()]
    assert values[0] == pytest.approx(4.6) and values[1] == pytest.approx(3.0) and values[2:] == [None, None]
    assert [j.source for j in out.values()] == ["logprobs"] * 4
    assert out["readability"].coverage == pytest.approx(0.9) and out["truthfulness"].coverage < COVERAGE_FLOOR
    assert out["relevance"].probabilities == pytest.approx({1: 0.0, 2: 0.0, 3: 0.0, 4: 0.4, 5: 0.6})
    assert out["relevance"].raw.startswith("logprobs coverage=1.000") and "5=0.600" in out["relevance"].raw
    assert model.calls_for("other") == 4
    prompt = str(model.calls[0][1][0].content)
    assert "Assistant: hello" in prompt and "[1] Employees get 25 days." in prompt
    assert prompt.rstrip().endswith("a single digit from 1 to 5, and nothing else.")
    assert summarize_values(j.value for j in out.values()) == {"mean": pytest.approx(3.8), "n": 2, "unparseable": 2}


def test_coverage_at_the_floor_counts_and_under_it_does_not() -> None:
    at = geval(
        _judge_model([{"4": COVERAGE_FLOOR, "I": 1 - COVERAGE_FLOOR}]), answer="a", dimensions=["relevance"], **CASE
    )
    under = geval(_judge_model([{"4": 0.49, "I": 0.51}]), answer="a", dimensions=["relevance"], **CASE)
    assert at["relevance"].value == pytest.approx(4.0) and under["relevance"].value is None


def test_rubric_score_uses_the_reference_and_reads_the_weighted_score() -> None:
    model = _judge_model([{"4": 0.5, "3": 0.25, "5": 0.25}])
    out = rubric_score(model, history=[], question="q?", answer="a", reference="gold reply")
    assert out.value == pytest.approx(4.0)
    prompt = str(model.calls[0][1][0].content)
    assert "gold reply" in prompt and "Score 5:" in prompt and "[RESULT]" not in prompt


def test_pairwise_runs_both_orders_and_cancels_position_bias() -> None:
    # A model that always prefers whatever is shown first: the orders disagree -> tie.
    biased = pairwise(_judge_model([{"1": 0.8, "2": 0.2}]), history=[], question="q", answer_a="x", answer_b="y")
    assert (biased.first, biased.second, biased.verdict, biased.consistent) == ("A", "B", "tie", False)

    # A model that prefers the answer 'good' wherever it is shown: a consistent win for that answer.
    def prefer_good(messages: Sequence[BaseMessage]) -> dict[str, float]:
        text = str(messages[-1].content)
        good_first = "[Answer 1]\ngood" in text
        return {"1": 0.7, "3": 0.2, "2": 0.1} if good_first else {"2": 0.6, "1": 0.3, "3": 0.1}

    model = _judge_model([prefer_good])
    won = pairwise(model, history=[], question="q", answer_a="bad", answer_b="good")
    assert (won.first, won.second, won.verdict, won.consistent) == ("B", "B", "B", True)
    texts = [str(call[1][-1].content) for call in model.calls]
    assert "[Answer 1]\nbad" in texts[0] and "[Answer 1]\ngood" in texts[1]
    assert "1 if answer 1 is better, 2 if answer 2 is better, 3 if they are equally good" in texts[0]

    tie = pairwise(_judge_model([{"3": 0.9, "1": 0.1}]), history=[], question="q", answer_a="x", answer_b="y")
    assert (tie.verdict, tie.consistent) == ("tie", True)

    # One order whose first token is mostly not a valid number: unreadable, so the pair has no verdict.
    broken = pairwise(
        _judge_model([{"2": 1.0}, {"Both": 0.8, "1": 0.2}]), history=[], question="q", answer_a="x", answer_b="y"
    )
    assert (broken.first, broken.second, broken.verdict, broken.consistent) == ("B", None, None, None)
    assert broken.raw[1].startswith("logprobs coverage=0.200")

    summary = summarize_pairwise([biased, won, broken, tie, PairwiseJudgement("A", "A", "A", True)])
    assert summary == {"A": 1, "B": 1, "tie": 2, "unparseable": 1, "order_disagreements": 1}


def test_hallucination_judge_reads_one_number_with_the_definition_and_examples() -> None:
    prompt = hallucination_prompt("You get 40 days.")
    assert "follow-up" in prompt and "not know" in prompt
    assert prompt.count("Verdict: 0 (FAITHFUL") >= 2 and prompt.count("Verdict: 1 (HALLUCINATED") >= 2
    assert prompt.rstrip().endswith("1 if the answer HALLUCINATES, 0 if it is FAITHFUL.")
    model = _judge_model([{"1": 0.7, "0": 0.3}, {"0": 0.55, "1": 0.45}, {"Verdict": 0.9, "1": 0.1}])
    hallucinated = hallucination(model, answer="You get 40 days.", **CASE)
    assert hallucinated.value is True and hallucinated.probabilities[judge_prompts.HALLUCINATED] == pytest.approx(0.7)
    assert hallucination(model, answer="25 days.", **CASE).value is False
    unread = hallucination(model, answer="25 days.", **CASE)
    assert unread.value is None and unread.coverage == pytest.approx(0.1) and unread.source == "logprobs"
    assert summarize_values([hallucinated.value, False, unread.value]) == {"mean": 0.5, "n": 2, "unparseable": 1}


def test_answerability_judge_reads_the_probability_that_the_passages_state_the_answer() -> None:
    model = _judge_model([{"1": 0.2, "0": 0.8}, {"1": 0.9, "0": 0.1}, {"Yes": 0.95, "1": 0.05}])
    off_topic = answerability(model, history=[], question="How much is each class?", passages=["Open to 4:00 p.m."])
    assert off_topic.value is False and off_topic.probabilities[judge_prompts.ANSWERS] == pytest.approx(0.2)
    stated = answerability(model, **CASE)
    assert stated.value is True and stated.probabilities[judge_prompts.ANSWERS] == pytest.approx(0.9)
    assert answerability(model, **CASE).value is None  # a word, not a digit: unread, never guessed
    prompt = str(model.calls[0][1][-1].content)
    assert "How much is each class?" in prompt and "Open to 4:00 p.m." in prompt
    assert prompt.rstrip().endswith("1 if the passages state the answer, 0 if they do not.")


def test_an_endpoint_without_logprobs_is_read_from_the_leading_number() -> None:
    model = NoLogprobs(script={"other": ["4", "Score: 4", "2.", "1", "1 - it invents the 40 days"]})
    ratings = geval(model, answer="a", dimensions=["relevance", "usability"], **CASE)
    assert (ratings["relevance"].value, ratings["relevance"].source) == (4.0, "text")
    assert (ratings["usability"].value, ratings["usability"].source) == (None, "none")  # no leading number
    pair = pairwise(model, history=[], question="q", answer_a="x", answer_b="y")
    assert (pair.first, pair.second, pair.verdict) == ("B", "B", "B")  # "2." then "1" (y shown first)
    verdict = hallucination(model, answer="You get 40 days.", **CASE)
    assert (verdict.value, verdict.source) == (True, "text")
