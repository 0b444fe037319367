"""Judge parsers on the many shapes small models reply in, and the judges on a fake model."""

from __future__ import annotations

import pytest
from reground.evals.judges import (
    PairwiseJudgement,
    geval,
    hallucination,
    hallucination_prompt,
    pairwise,
    parse_hallucination,
    parse_pairwise,
    parse_rating,
    rubric_score,
    summarize_pairwise,
    summarize_values,
)
from reground.prompts import judges as judge_prompts
from reground.tools.fake_chat import ScriptedChatModel


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Score: 4", 4.0),
        ("score:4", 4.0),
        ("4", 4.0),
        ("4.", 4.0),
        ("(3)", 3.0),
        ("**4**", 4.0),
        ("I would rate this **5** overall.", 5.0),
        ("4/5", 4.0),
        ("The answer deserves 2 / 5 because it invents a date.", 2.0),
        ("3 out of 5", 3.0),
        ('{"score": 2}', 2.0),
        ('```json\n{"rating": "5"}\n```', 5.0),
        ("Feedback: clear and grounded.\n[RESULT] 5", 5.0),
        ("Feedback: The scale is 1 to 5. It misses a step. [RESULT] (3)", 3.0),
        ("Rating - four", 4.0),
        ("Score: 4.5", 4.5),
        ("Relevance score is 1.", 1.0),
        # unparseable or out of range: None, never a guess
        ("", None),
        (None, None),
        ("Score: 7", None),
        ("0", None),
        ('{"score": 9}', None),
        ("I think it is somewhere between 2 and 4 depending on the reader.", None),
        ("The answer is good.", None),
        ('{"score": "excellent"}', None),
    ],
)
def test_parse_rating(reply: str | None, expected: float | None) -> None:
    assert parse_rating(reply) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Answer B cites the passage. [[B]]", "B"),
        ("[[A]]", "A"),
        ("Both are fine. [[C]]", "tie"),
        ("[[ a ]]", "A"),
        ("First I thought [[A]] but on reflection [[B]]", "B"),
        ('{"verdict": "A"}', "A"),
        ('{"winner": "tie"}', "tie"),
        ("Verdict: B", "B"),
        ("**Verdict:** tie", "tie"),
        ("Final answer: A", "A"),
        ("Answer A is better because it is grounded.", "A"),
        ("Response B was clearly better.", "B"),
        ("It's a tie.", "tie"),
        ("Both answers are equally good.", "tie"),
        # a small model echoing the instruction is not a verdict
        ("A) If A is better, B) If B is better, C) For a tie", None),
        ("B", "B"),
        ("A.", "A"),
        # unparseable
        ("", None),
        ("Both answers have strengths and weaknesses.", None),
        ("Answer A is better in tone but answer B is better in content.", None),
        ('{"verdict": "maybe"}', None),
    ],
)
def test_parse_pairwise(reply: str, expected: str | None) -> None:
    assert parse_pairwise(reply) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("The date is invented.\nVerdict: HALLUCINATED", True),
        ("All claims are in [1].\nVerdict: FAITHFUL", False),
        ("verdict:  hallucinated", True),
        ("**Verdict:** Faithful", False),
        ("Verdict: NO HALLUCINATION", False),
        ("Verdict: not hallucinated", False),
        ("Verdict - yes", True),
        ('{"hallucination": true}', True),
        ('{"hallucination": false, "reason": "ok"}', False),
        ('{"verdict": "FAITHFUL"}', False),
        ("The answer is faithful to the passages.", False),
        ("There is no hallucination here.", False),
        ("This answer hallucinates a number.", True),
        ("The claim about March is unsupported.", True),
        ("Yes, it invents a deadline.", True),
        ("No.", False),
        # negated verdict words count as their opposite, wherever they come
        ("The answer hallucinates because it states information that is not supported by the passages.", True),
        ("The date is not grounded in the passages.", True),
        ("It isn't faithful to passage [2].", True),
        ("The answer does not hallucinate; it is fully supported.", False),
        # the reasoning mentions the other label; the verdict line wins
        ("It is not unsupported, since [1] says so. Verdict: FAITHFUL", False),
        ("Reasoning: ok\nVerdict: FAITHFUL\nVerdict: faithful", False),
        # a small model echoing the few-shot examples: several different verdicts
        ("Answer: 25 days.\nVerdict: FAITHFUL\nAnswer: 5 days.\nVerdict: HALLUCINATED", None),
        # unparseable
        ("", None),
        ("I cannot tell.", None),
        ("Verdict: unclear", None),
    ],
)
def test_parse_hallucination(reply: str, expected: bool | None) -> None:
    assert parse_hallucination(reply) is expected


def _judge_model(replies: list[object]) -> ScriptedChatModel:
    return ScriptedChatModel(script={"other": replies})


def test_geval_scores_each_dimension_and_keeps_unparseable_as_none() -> None:
    model = _judge_model(["Score: 5", "**3**", "no idea", '{"score": 2}'])
    out = geval(
        model,
        history=[{"role": "user", "text": "hi"}, {"role": "agent", "text": "hello"}],
        question="How many days?",
        answer="25 days.",
        passages=["Employees get 25 days."],
    )
    assert list(out) == list(judge_prompts.GEVAL_DIMENSIONS)
    assert [j.value for j in out.values()] == [5.0, 3.0, None, 2.0]
    assert model.calls_for("other") == 4
    prompt = str(model.calls[0][1][0].content)
    assert "Assistant: hello" in prompt and "[1] Employees get 25 days." in prompt
    assert summarize_values(j.value for j in out.values()) == {
        "mean": pytest.approx(10 / 3),
        "n": 3,
        "unparseable": 1,
    }


def test_rubric_score_uses_reference_and_parses_result() -> None:
    model = _judge_model(["Feedback: correct.\n[RESULT] 4"])
    out = rubric_score(model, history=[], question="q?", answer="a", reference="gold reply")
    assert out.value == 4.0
    prompt = str(model.calls[0][1][0].content)
    assert "gold reply" in prompt and "Score 5:" in prompt


def test_pairwise_runs_both_orders_and_cancels_position_bias() -> None:
    # A model that always prefers whatever is shown first: the orders disagree -> tie.
    biased = pairwise(_judge_model(["[[A]]"]), history=[], question="q", answer_a="x", answer_b="y")
    assert (biased.first, biased.second, biased.verdict, biased.consistent) == (
        "A",
        "B",
        "tie",
        False,
    )

    # A model that prefers the answer 'good' wherever it is shown: a consistent win for that answer.
    def prefer_good(messages: list[object]) -> str:
        text = str(messages[-1].content)  # type: ignore[attr-defined]
        return "[[A]]" if text.index("good") < text.index("bad") else "[[B]]"

    model = _judge_model([prefer_good])
    won = pairwise(model, history=[], question="q", answer_a="bad", answer_b="good")
    assert (won.verdict, won.consistent) == ("B", True)
    texts = [str(call[1][-1].content) for call in model.calls]
    assert texts[0].index("[Answer A]\nbad") >= 0 and "[Answer A]\ngood" in texts[1]

    broken = pairwise(_judge_model(["[[B]]", "hmm"]), history=[], question="q", answer_a="x", answer_b="y")
    assert broken.verdict is None and broken.consistent is None

    summary = summarize_pairwise([biased, won, broken, PairwiseJudgement("A", "A", "A", True)])
    assert summary == {"A": 1, "B": 1, "tie": 1, "unparseable": 1, "order_disagreements": 1}


def test_hallucination_judge_prompt_has_definition_and_examples() -> None:
    prompt = hallucination_prompt("You get 40 days.")
    assert "follow-up" in prompt and "not know" in prompt
    assert prompt.count("Verdict: FAITHFUL") >= 2 and prompt.count("Verdict: HALLUCINATED") >= 2
    model = _judge_model(["40 is not in the passage.\nVerdict: HALLUCINATED", "Verdict: ???"])
    kwargs = {"history": [], "question": "days?", "passages": ["25 days."]}
    assert hallucination(model, answer="You get 40 days.", **kwargs).value is True  # type: ignore[arg-type]
    unparsed = hallucination(model, answer="25 days.", **kwargs)  # type: ignore[arg-type]
    assert unparsed.value is None and unparsed.raw == "Verdict: ???"
