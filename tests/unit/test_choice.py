"""A numbered choice read from the first token's log-probabilities (tools/adapters/choice.py)."""

from __future__ import annotations

import math

from langchain_core.messages import HumanMessage
from reground.tools.adapters.chat import CallStats
from reground.tools.adapters.choice import choose, distribution_from_logprobs

from reground.testing.fake_chat import ScriptedChatModel

ASK = [HumanMessage("Which one? Reply with its number only.")]


def test_probabilities_are_the_mass_on_valid_numbers_renormalised() -> None:
    top = [
        {"token": "2", "logprob": math.log(0.5)},
        {"token": " 1", "logprob": math.log(0.2)},  # a leading space is still the number 1
        {"token": "The", "logprob": math.log(0.2)},  # not a number: lowers coverage only
        {"token": "7", "logprob": math.log(0.1)},  # out of range for 3 options
    ]
    probabilities, coverage = distribution_from_logprobs(top, 3)
    assert [round(p, 4) for p in probabilities] == [0.0, round(0.2 / 0.7, 4), round(0.5 / 0.7, 4)]
    assert math.isclose(coverage, 0.7)


def test_no_number_among_the_alternatives_gives_no_distribution() -> None:
    probabilities, coverage = distribution_from_logprobs([{"token": "Sure", "logprob": -0.1}], 3)
    assert probabilities == (0.0, 0.0, 0.0) and coverage == 0.0


def test_choose_reads_the_logprobs_the_model_returns() -> None:
    model = ScriptedChatModel(script={"answer": [{"2": 0.6, "0": 0.3, "Hello": 0.1}]})
    stats = CallStats()
    choice = choose(model, ASK, 4, stats, tags=["answer"])
    assert choice.source == "logprobs" and choice.best == 2
    assert math.isclose(choice.probability(0), 1 / 3) and math.isclose(choice.coverage, 0.9)
    assert stats.llm_calls == 1


def test_a_reply_without_logprobs_falls_back_to_its_leading_number() -> None:
    class NoLogprobs(ScriptedChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
            kwargs.pop("logprobs", None)
            return super()._generate(messages, stop, run_manager, **kwargs)

    choice = choose(NoLogprobs(script={"answer": ["3."]}), ASK, 4, CallStats(), tags=["answer"])
    assert (choice.source, choice.best, choice.probability(3)) == ("text", 3, 1.0)
    unsure = choose(NoLogprobs(script={"answer": ["Maybe the second one"]}), ASK, 4, CallStats(), tags=["answer"])
    assert unsure.source == "none" and unsure.coverage == 0.0 and sum(unsure.probabilities) == 0.0
