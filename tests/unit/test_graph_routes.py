"""Every route of the graph with a scripted chat model over a real (temporary) store."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context

from reground.testing.fake_chat import ScriptedChatModel

UNRELATED = "Bananas are yellow and monkeys climb trees quickly."


def first_passage_sentence(messages: list[BaseMessage]) -> str:
    """A grounded answer: the first sentence of passage [1], cited."""
    system = str(messages[0].content)
    match = re.search(r"\[1\][^\n]*\n(.+?[.!?])(\s|$)", system, re.DOTALL)
    assert match, "the shared prefix must carry numbered passages"
    return f"{match.group(1).strip()} [1]"


def run(graph: Any, context: Context, question: str, thread: str = "t1") -> dict[str, Any]:
    config = run_config(context, configurable={"thread_id": thread})
    out = graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)
    return out["result"]


@pytest.fixture
def context(hr_store_dir: str) -> Context:
    # The judge on every answer, so each call is observable; the defaults have their own tests
    # (tests/unit/test_answer_node.py).
    return Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        groundedness={"max_reground_attempts": 2, "llm_judge_band": 1.0},
        refinement={"max_refine_iterations": 1, "quote_when_unchecked": False},
        triage={
            "support_threshold": 0.0,
            "judge_hedge_threshold": 0.0,
            "judge_answer_threshold": 0.0,
            "learned_ask_back": False,
        },
        # These routes are the written answer's loops, with no early abstention and no asking back (at a hedge
        # threshold of 0 every reading counts as answering); test_triage.py tests the defaults.
        answer_style="write",
        # the loops' own fallbacks; the quote route has its own tests
    )


def make_graph(model: ScriptedChatModel, store: Any) -> Any:
    return build_graph(chat_model=model, store=store, checkpointer=InMemorySaver())


def test_first_turn_makes_no_refine_call_and_cites_real_chunks(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(script={"answer": [first_passage_sentence]})
    result = run(make_graph(model, hr_store), context, "How many days of annual leave do full-time employees get?")
    assert model.calls_for("refine_question") == 0
    assert model.calls_for("answer") == 1
    assert result["passed"], result
    assert result["citations"], "a passed answer cites its passages"
    stored = {c["chunk_id"]: c for c in hr_store.all_chunks()}
    for citation in result["citations"]:
        assert citation["chunk_id"] in stored
        assert citation["quote"] in stored[citation["chunk_id"]]["text"]
    assert "annual-leave" in result["citations"][0]["doc_id"]


def test_follow_up_is_rewritten_with_the_history(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(
        script={
            "answer": [first_passage_sentence],
            "refine_question": ["Can unused annual leave days be carried over to the next year?"],
        }
    )
    graph = make_graph(model, hr_store)
    context = context.with_(
        refinement={"rewrite_below_margin": 1.0},
    )  # every follow-up is rewritten
    run(graph, context, "How many days of annual leave do full-time employees get?")
    result = run(graph, context, "Can I carry them over?")
    assert model.calls_for("refine_question") == 1
    refine_prompt = next(m for task, m in model.calls if task == "refine_question")
    assert "annual leave" in str(refine_prompt[-1].content), "the refiner sees the earlier turn"
    state = graph.get_state(run_config(context, configurable={"thread_id": "t1"})).values
    assert state["standalone_question"].startswith("Can unused annual leave")
    assert any("carry" in p["text"].lower() for p in result["passages"])


def test_a_confident_history_ranking_skips_the_rewrite_call(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(script={"answer": [first_passage_sentence]})
    graph = make_graph(model, hr_store)
    context = context.with_(
        refinement={"rewrite_below_margin": 0.0},
    )  # any lead is confident enough
    run(graph, context, "How many days of annual leave do full-time employees get?")
    run(graph, context, "Can I carry them over?")
    assert model.calls_for("refine_question") == 0
    state = graph.get_state(run_config(context, configurable={"thread_id": "t1"})).values
    assert state["query_mode"] == "history" and "annual leave" in state["retrieval_query"]


def test_reground_loop_is_taken_and_capped_then_honest_fallback(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(
        script={"answer": [UNRELATED], "groundedness": ["- Bananas are yellow.\n- Monkeys climb trees."]}
    )
    result = run(make_graph(model, hr_store), context, "How many days of annual leave do full-time employees get?")
    assert result["reground_attempts"] == context.groundedness.max_reground_attempts == 2
    assert model.calls_for("answer") == 3, "one answer per retrieval: first + 2 re-grounds"
    assert model.calls_for("reground") == 2, "a first turn has no dialogue to force into the query: both rewrite"
    assert not result["passed"]
    assert "Bananas" not in result["answer"], "never the ungrounded draft"
    assert "not grounded" in (result["fallback_reason"] or "")
    assert result["citations"] == []


def test_the_first_retry_of_a_follow_up_forces_the_dialogue_into_the_query(hr_store: Any, context: Context) -> None:
    """ReGround +Force: the question plus the recent dialogue (no LLM call); the second retry rewrites."""
    model = ScriptedChatModel(
        script={"answer": [UNRELATED], "groundedness": ["- Bananas are yellow.\n- Monkeys climb trees."]}
    )
    graph = make_graph(model, hr_store)
    messages = [
        {"role": "user", "content": "How many days of annual leave do full-time employees in Germany get?"},
        {"role": "assistant", "content": "Full-time employees in Germany get 30 days of paid annual leave."},
        {"role": "user", "content": "Can I take all of them in one block during the summer holidays?"},
    ]
    ctx = context.with_(use_question_refiner=False)
    config = run_config(ctx, configurable={"thread_id": "follow-up"})
    out = graph.invoke({"messages": messages}, config=config, context=ctx)
    assert out["result"]["reground_attempts"] == 2
    assert model.calls_for("reground") == 1, "the first retry is forced (no LLM), the second rewrites the query"


def test_reground_disabled_goes_straight_to_fallback(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(script={"answer": [UNRELATED], "groundedness": ["- Bananas are yellow."]})
    ctx = context.with_(use_reground=False)
    result = run(make_graph(model, hr_store), ctx, "How many days of annual leave do full-time employees get?")
    assert result["reground_attempts"] == 0 and not result["passed"]


def test_refine_loop_replaces_the_answer_when_the_gain_exceeds_lambda(hr_store: Any, context: Context) -> None:
    vague = "It depends on your contract [1]."
    model = ScriptedChatModel(script={"answer": [vague], "refine": [first_passage_sentence]})
    ctx = context.with_(
        refinement={"relevance_threshold": 0.99, "relevance_refinement": "llm", "improvement_lambda": 0.5},
        groundedness={"threshold": 0.0},
    )
    result = run(make_graph(model, hr_store), ctx, "How many days of annual leave do full-time employees get?")
    assert model.calls_for("refine") >= 1
    assert result["refine_iterations"] == 1
    assert result["answer"] != vague


def test_refine_keeps_the_old_answer_when_the_gain_is_not_above_lambda(hr_store: Any, context: Context) -> None:
    vague = "It depends on your contract [1]."
    still_vague = "It depends on your contract and on your country [1]."
    model = ScriptedChatModel(script={"answer": [vague], "refine": [still_vague]})
    ctx = context.with_(
        refinement={"relevance_threshold": 0.99, "relevance_refinement": "llm", "improvement_lambda": 3.0},
        groundedness={"threshold": 0.0},
    )
    graph = make_graph(model, hr_store)
    result = run(graph, ctx, "How many days of annual leave do full-time employees get?")
    assert result["refine_iterations"] == 1
    draft = graph.get_state(run_config(ctx, configurable={"thread_id": "t1"})).values["draft"]
    assert draft["text"] == vague, "still under a threshold, and improvement at most 3, never above lambda = 3"
    assert not result["passed"] and "does not address the question" in (result["fallback_reason"] or "")
    assert model.calls_for("groundedness") == 1, "a kept answer is not judged again"


def test_empty_question_gets_a_clear_answer_without_any_llm_call(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel()
    result = run(make_graph(model, hr_store), context, "   ")
    assert model.calls == []
    assert "type a question" in result["answer"] and result["fallback_reason"] == "empty question"


def test_an_unusable_judge_verdict_is_repaired_once_then_cheap_signals_decide(hr_store: Any, context: Context) -> None:
    paraphrase = "Full-time employees in Germany receive 30 working days of paid annual leave [1]."  # not verbatim
    model = ScriptedChatModel(script={"groundedness": ["blah", "still blah"], "answer": [paraphrase]})
    result = run(make_graph(model, hr_store), context, "How many days of annual leave do full-time employees get?")
    assert model.calls_for("groundedness") >= 2, "the reply, then one repair"
    assert result["groundedness"] > 0


def test_an_answer_quoted_word_for_word_is_grounded_without_a_judge(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(script={"answer": [first_passage_sentence]})
    result = run(make_graph(model, hr_store), context, "How many days of annual leave do full-time employees get?")
    assert model.calls_for("groundedness") == 0 and result["groundedness"] == 1.0 and result["passed"]


def test_no_helpful_passage_means_an_honest_not_found_and_a_reground(hr_store: Any, context: Context) -> None:
    not_found = f"The documents do not cover this; {context.escalation}."
    model = ScriptedChatModel(script={"answer": [not_found]})
    result = run(make_graph(model, hr_store), context, "What is the dress code for the summer party?")
    assert model.calls_for("answer") == 3, "the first answer and one per re-grounding"
    assert result["reground_attempts"] == 2
    assert not result["passed"] and "documents" in (result["fallback_reason"] or "")
    assert context.escalation in result["answer"]


def test_review_interrupt_and_resume_with_an_edit(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(script={"answer": [first_passage_sentence]})
    graph = make_graph(model, hr_store)
    ctx = context.with_(review_mode="all")
    config = run_config(ctx, configurable={"thread_id": "review"})
    graph.invoke(
        {"messages": [{"role": "user", "content": "How much annual leave do I get?"}]}, config=config, context=ctx
    )
    state = graph.get_state(config)
    assert state.next == ("review",)
    assert state.interrupts and "proposed_answer" in state.interrupts[0].value
    out = graph.invoke(Command(resume={"action": "edit", "answer": "Edited: 30 days."}), config=config, context=ctx)
    assert out["result"]["answer"] == "Edited: 30 days."
    assert out["messages"][-1].content == "Edited: 30 days."


def test_review_reject_returns_the_fallback(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(script={"answer": [first_passage_sentence]})
    graph = make_graph(model, hr_store)
    ctx = context.with_(review_mode="all")
    config = run_config(ctx, configurable={"thread_id": "reject"})
    graph.invoke(
        {"messages": [{"role": "user", "content": "How much annual leave do I get?"}]}, config=config, context=ctx
    )
    out = graph.invoke(Command(resume={"action": "reject"}), config=config, context=ctx)
    assert out["result"]["fallback_reason"] == "rejected by the reviewer"
    assert not out["result"]["passed"]


def test_metadata_filter_applies_to_every_stage(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(
        script={"answer": [UNRELATED, first_passage_sentence], "groundedness": ["- Bananas.", "NONE"]}
    )
    ctx = context.with_(metadata_filter={"country": "US"})
    result = run(make_graph(model, hr_store), ctx, "How many days of annual leave do I get in Germany?")
    assert result["reground_attempts"] >= 1
    for passage in result["passages"]:
        assert passage["metadata"].get("country") in ("US", "all")
    for _, messages in model.calls:
        assert "Urlaubsanspruch" not in str(messages[0].content)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    verdicts=st.lists(st.sampled_from(["NONE", "- made up claim", "garbage", ""]), min_size=1, max_size=8),
    answers=st.lists(
        st.sampled_from([UNRELATED, "", "The documents do not cover it.", "What do you mean?"]), min_size=1, max_size=5
    ),
    max_reground=st.integers(min_value=0, max_value=3),
    max_refine=st.integers(min_value=0, max_value=2),
)
def test_graph_terminates_for_any_sequence_of_verdicts(
    hr_store: Any, context: Context, verdicts: list[str], answers: list[str], max_reground: int, max_refine: int
) -> None:
    model = ScriptedChatModel(script={"groundedness": list(verdicts), "answer": list(answers), "refine": list(answers)})
    ctx = context.with_(
        groundedness={"max_reground_attempts": max_reground},
        refinement={"max_refine_iterations": max_refine, "relevance_threshold": 0.9},
    )
    graph = build_graph(chat_model=model, store=hr_store)
    out = graph.invoke(
        {"messages": [{"role": "user", "content": "How much annual leave do I get?"}]},
        config=run_config(ctx),
        context=ctx,
    )
    result = out["result"]
    assert result["reground_attempts"] <= max_reground and result["refine_iterations"] <= max_refine
    assert result["answer"].strip()
    if not result["passed"]:
        assert result["fallback_reason"]


def test_a_rewrite_with_words_the_conversation_never_used_is_not_used(hr_store: Any, context: Context) -> None:
    # What the 0.5B model did on a DMV dialogue: it returned the prompt's own few-shot rewrite.
    copied = "Can I carry over unused days of annual leave to the next year?"
    model = ScriptedChatModel(script={"answer": [first_passage_sentence], "refine_question": [copied]})
    graph = make_graph(model, hr_store)
    context = context.with_(
        refinement={"rewrite_below_margin": 1.0},
    )
    run(graph, context, "Who pays for my train ticket on a business trip?")
    run(graph, context, "and where does it go?")
    state = graph.get_state(run_config(context, configurable={"thread_id": "t1"})).values
    assert state["standalone_question"] == "and where does it go?"
    assert "train ticket" in state["retrieval_query"], "retrieval falls back to question + recent history"
