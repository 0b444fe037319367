"""The scripted chat model behaves like a model where tests need it to: sampling settings, length caps, routing
by call tags; and what it makes testable: best-of-N (n_samples > 1), LLM keywords, a reworded answer prompt."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context
from reground.prompts import answer as answer_prompts
from reground.tools.adapters.chat import CallStats, call_text
from reground.tools.services import at_temperature

from reground.testing.fake_chat import ScriptedChatModel

QUESTION = "How many days of annual leave do full-time employees get?"
REPLIES = [f"reply {i}" for i in range(6)]


def _draws(model: ScriptedChatModel, n: int, temperature: float) -> list[str]:
    return [
        str(model.invoke([HumanMessage("q")], config={"tags": ["answer"]}, temperature=temperature).content)
        for _ in range(n)
    ]


def test_greedy_calls_take_the_script_in_order_and_repeat_the_last() -> None:
    model = ScriptedChatModel(script={"answer": ["a", "b"]})
    assert _draws(model, 3, 0.0) == ["a", "b", "b"]


def test_samples_at_temperature_differ_and_are_reproducible_by_seed() -> None:
    first = _draws(ScriptedChatModel(script={"answer": REPLIES}, seed=0), 8, 0.7)
    again = _draws(ScriptedChatModel(script={"answer": REPLIES}, seed=0), 8, 0.7)
    other = _draws(ScriptedChatModel(script={"answer": REPLIES}, seed=1), 8, 0.7)
    assert first == again, "same seed, same samples"
    assert len(set(first)) > 1, "samples differ from each other"
    assert first != other, "another seed draws other samples"
    assert first != REPLIES[:6] + REPLIES[-1:] * 2, "sampling is not the greedy order"


def test_the_model_temperature_field_counts_when_the_call_sets_none() -> None:
    hot = ScriptedChatModel(script={"answer": REPLIES}, temperature=1.0)
    assert _draws(hot, 8, 1.0) == _draws(ScriptedChatModel(script={"answer": REPLIES}, temperature=1.0), 8, 1.0)
    hot.reset()
    draws = [str(hot.invoke([HumanMessage("q")], config={"tags": ["answer"]}).content) for _ in range(8)]
    assert draws != REPLIES[:6] + REPLIES[-1:] * 2 and hot.temperatures == [1.0] * 8


def test_max_tokens_cuts_the_reply_per_call_and_by_field() -> None:
    model = ScriptedChatModel(script={"answer": ["one two three four five"]})
    assert model.invoke([HumanMessage("q")], config={"tags": ["answer"]}, max_tokens=2).content == "one two"
    capped = ScriptedChatModel(script={"answer": ["one two three four five"]}, max_tokens=3)
    assert capped.invoke([HumanMessage("q")], config={"tags": ["answer"]}).content == "one two three"


def test_the_length_cap_of_reground_calls_reaches_the_scripted_model() -> None:
    """adapters/llm.py token_cap passes max_tokens to a model with that field, so the graph's caps act in tests."""
    model = ScriptedChatModel(script={"answer": ["one two three four five"]})
    assert call_text(model, [HumanMessage("q")], CallStats(), tags=["answer"], max_tokens=2) == "one two"


def test_a_callers_model_at_another_temperature_shares_its_record() -> None:
    model = ScriptedChatModel(script={"answer": REPLIES})
    assert at_temperature(model, None) is model and at_temperature(model, 0.0) is model
    hot = at_temperature(model, 0.7)
    assert isinstance(hot, ScriptedChatModel) and hot.temperature == 0.7 and model.temperature == 0.0
    hot.invoke([HumanMessage("q")], config={"tags": ["answer"]})
    assert model.calls_for("answer") == 1 and model.temperatures == [0.7], "one record of every call"


def _turn(model: ScriptedChatModel, store: Any, context: Context, question: str = QUESTION) -> dict[str, Any]:
    graph = build_graph(chat_model=model, store=store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "t"})
    out = graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)
    return {**out["result"], "state": graph.get_state(config).values}


UNGROUNDED = "You get unlimited holidays on the moon."
# No [n] marker: after a re-grounding the passages come in another order, and a figure is checked against the
# passages a reply cites (nodes/groundedness.py).
GROUNDED = "Full-time employees in Germany receive 30 working days of paid annual leave per calendar year."


def test_best_of_n_samples_at_temperature_and_keeps_the_best_sample(hr_store: Any, hr_store_dir: str) -> None:
    """n_samples > 1: the first sample is greedy, the others are drawn at the sampling temperature, and the best
    one (the grounded reply) is kept even though the greedy one is ungrounded."""
    script: dict[str, list[Any]] = {"answer": [UNGROUNDED, GROUNDED]}
    context = Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        models={"n_samples": 3},
        use_principle_refinement=False,
        answer_style="write",
    )
    model = ScriptedChatModel(script=script, seed=1)  # seed 1 draws the ungrounded reply, then the grounded one
    result = _turn(model, hr_store, context)
    answer_calls = [i for i, (task, _) in enumerate(model.calls) if task == "answer"]
    assert len(answer_calls) == 3
    assert [model.temperatures[i] for i in answer_calls] == [context.models.temperature] + [
        context.models.sample_temperature
    ] * 2
    assert result["answer"].startswith(GROUNDED.removesuffix("."))
    assert result["passed"] and result["reground_attempts"] == 0, result
    # With one sample the greedy, ungrounded reply fails the check and the turn needs a re-grounding round.
    single_model = ScriptedChatModel(script=script, seed=1)
    single = _turn(
        single_model,
        hr_store,
        context.with_(
            models={"n_samples": 1},
        ),
    )
    # Greedy calls only: the answer, the query rewrite (a first turn has no dialogue to force into the query) and
    # the second answer.
    assert single["reground_attempts"] == 1 and single_model.temperatures == [context.models.temperature] * 3


def test_llm_keywords_come_from_the_structured_reply(hr_store: Any, hr_store_dir: str) -> None:
    script = {"keywords": ['{"keywords": ["annual leave", "full-time employees"]}'], "answer": [GROUNDED]}
    model = ScriptedChatModel(script=script)
    context = Context(collection="test-hr", data_dir=hr_store_dir, keyword_method="llm")
    result = _turn(model, hr_store, context)
    assert model.calls_for("keywords") == 1
    assert result["state"]["keywords"] == ["annual leave", "full-time employees"]
    prompt = "\n".join(str(m.content) for m in model.calls[[t for t, _ in model.calls].index("keywords")][1])
    assert QUESTION in prompt


def test_unusable_llm_keywords_fall_back_to_the_lexical_ones(hr_store: Any, hr_store_dir: str) -> None:
    model = ScriptedChatModel(script={"keywords": ["I think the keywords are leave and days"], "answer": [GROUNDED]})
    context = Context(collection="test-hr", data_dir=hr_store_dir, keyword_method="llm")
    result = _turn(model, hr_store, context)
    keywords = result["state"]["keywords"]
    assert keywords and all(k.lower() in QUESTION.lower() for k in keywords), keywords
    lexical = _turn(ScriptedChatModel(script={"answer": [GROUNDED]}), hr_store, context.with_(keyword_method="lexical"))
    assert keywords == lexical["state"]["keywords"]


def _reword(task: str) -> str:
    """The answer task with its first sentence and its first instruction reworded."""
    first_line, rest = task.split("\n", 1)
    reworded = re.sub(r"^[^{]*", "Here is what the person asked, word for word: ", first_line, count=1)
    rest, n = re.subn(r"(?m)^Write [^.:]*", "Compose an answer for that person", rest, count=1)
    assert n == 1 and reworded != first_line, "the answer prompt has a first line and an instruction to reword"
    return reworded + "\n" + rest


def _answer_prompts() -> dict[str, str]:
    return {name: value for name, value in vars(answer_prompts).items() if name.startswith("TASK")}


@pytest.mark.parametrize("name", sorted(_answer_prompts()))
def test_rewording_the_answer_prompt_changes_nothing_but_the_prompt(
    name: str, hr_store: Any, hr_store_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scripted model routes by call tags, so a reworded answer prompt (in the module,
    and through the context) still gets the scripted answer and the turn passes."""
    original = _answer_prompts()[name]
    reworded = _reword(original)
    monkeypatch.setattr(answer_prompts, name, reworded)
    fields = {"prompts": {"answer_prompt": reworded}} if name == "TASK" else {}
    context = Context(collection="test-hr", data_dir=hr_store_dir, answer_style="write", **fields)
    if name != "TASK":
        context = context.with_(
            evidence={"use_self_check": True},
        )
    model = ScriptedChatModel(script={"answer": [GROUNDED]})
    result = _turn(model, hr_store, context)
    answer_prompt = str(model.calls[[t for t, _ in model.calls].index("answer")][1][-1].content)
    assert "Compose an answer for that person" in answer_prompt, "the reworded prompt was sent"
    assert "Write the support agent's reply" not in answer_prompt
    assert result["passed"] and "30" in result["answer"], result
