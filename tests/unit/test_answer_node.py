"""The one-call answer: inline self-check line, tidying what small models add, the judge only where it matters."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.graph.context import Context
from reground.nodes.answer import split_inline_judgement, tidy_answer
from reground.tools.fake_chat import ScriptedChatModel, first_passage_reply
from reground.tools.types import Passage

QUESTION = "How many days of annual leave do full-time employees get?"


def passage(number: int, title: str) -> Passage:
    return Passage(
        chunk_id=f"c{number}",
        doc_id=f"d{number}",
        title=title,
        section="",
        url="",
        text=f"text {number}",
        score=1.0,
        rank=number,
        metadata={},
    )  # type: ignore[typeddict-item]


def test_inline_line_marks_helpful_passages_and_is_not_part_of_the_answer() -> None:
    answer, judged = split_inline_judgement("Helpful: [1], [3]\nYou get 30 days [1].", 3)
    assert answer == "You get 30 days [1]."
    assert judged == {1: True, 2: False, 3: True}
    assert split_inline_judgement("**Helpful passages:** none\nNot covered.", 2) == (
        "Not covered.",
        {1: False, 2: False},
    )


def test_without_the_line_nothing_is_guessed() -> None:
    assert split_inline_judgement("You get 30 days [1].", 3) == ("You get 30 days [1].", None)


def test_tidy_drops_echoed_headers_titles_the_tacked_on_escalation_and_extra_sentences() -> None:
    passages = [passage(1, "Annual leave in Germany"), passage(2, "Payslips")]
    raw = (
        "[1] Annual leave in Germany / Entitlement (https://hr.example/leave)\n"
        "Annual leave in Germany\n"
        "Answer: You get 30 days [1]. Part-time staff get a pro-rata share. Days are in working days. "
        "Ask your manager. Please open a ticket with the HR team."
    )
    tidy = tidy_answer(raw, passages, "please open a ticket with the HR team", 3)
    assert tidy == "You get 30 days [1]. Part-time staff get a pro-rata share. Days are in working days."


def test_tidy_drops_list_numbers_and_stray_fragments() -> None:
    assert tidy_answer("2. You must register within 180 days [1]. 3.", [], "x", 3) == (
        "You must register within 180 days [1]."
    )


def test_tidy_drops_a_header_quoted_mid_line_and_an_echoed_task_line() -> None:
    passages = [passage(1, "Moving out of New York State#3")]
    raw = "The user's last message: where do I go?\nMoving out of New York State#3 (no url) Surrender your plates [1]."
    assert tidy_answer(raw, passages, "x", 2) == "Surrender your plates [1]."


def test_an_honest_not_found_keeps_its_escalation() -> None:
    text = "The documents do not cover this. Please open a ticket with the HR team."
    assert tidy_answer(text, [], "please open a ticket with the HR team", 3) == text


def test_default_turn_is_one_llm_call_with_judgements_from_the_answer(hr_store: Any, hr_store_dir: str) -> None:
    model = ScriptedChatModel(script={"answer": [first_passage_reply]})
    context = Context(collection="test-hr", data_dir=hr_store_dir)
    graph = build_graph(chat_model=model, store=hr_store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "one-call"})
    out = graph.invoke({"messages": [{"role": "user", "content": QUESTION}]}, config=config, context=context)
    result = out["result"]
    assert [task for task, _ in model.calls] == ["answer"], "self-check inline, judge skipped on a clear score"
    assert not result["answer"].startswith("Helpful")
    judgements = graph.get_state(config).values["judgements"]
    assert [j["helpful"] for j in judgements] == [True] + [False] * (len(judgements) - 1)
    assert result["passed"], result


def test_the_judge_runs_when_the_cheap_score_is_near_the_threshold(hr_store: Any, hr_store_dir: str) -> None:
    model = ScriptedChatModel(script={"answer": [first_passage_reply]})
    context = Context(collection="test-hr", data_dir=hr_store_dir, llm_judge_band=1.0)
    graph = build_graph(chat_model=model, store=hr_store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "judged"})
    graph.invoke({"messages": [{"role": "user", "content": QUESTION}]}, config=config, context=context)
    assert model.calls_for("groundedness") == 1
