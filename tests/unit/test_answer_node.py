"""The written answer (`answer_style="write"`): one call, the relevance signal, and the relevance refinement that
costs no call. The default extract style and the ask/abstain decisions are tested in test_triage.py."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.answer import cap_sentences
from reground.nodes.context import Context
from reground.tools.types import Passage

from reground.testing.fake_chat import ScriptedChatModel, first_passage_reply

QUESTION = "How many days of annual leave do full-time employees get?"


def passage(number: int, text: str) -> Passage:
    return Passage(
        chunk_id=f"c{number}", doc_id=f"d{number}", title=f"T{number}", section="", url="", position=0, text=text,
        metadata={},
    )  # fmt: skip


def ask(model: ScriptedChatModel, store: Any, context: Context, *questions: str) -> dict[str, Any]:
    graph = build_graph(chat_model=model, store=store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "t"})
    out: dict[str, Any] = {}
    for question in questions:
        out = graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)
    return {**out["result"], "state": graph.get_state(config).values}


@pytest.fixture
def context(hr_store_dir: str) -> Context:
    return Context(collection="test-hr", data_dir=hr_store_dir, answer_style="write")


def test_cap_sentences_keeps_the_first_sentences() -> None:
    assert cap_sentences("One [1].  Two.\nThree.", 2) == "One [1]. Two."
    assert cap_sentences("One [1]. Two is cut by the len", 2) == "One [1]."
    assert cap_sentences("Only a cut fragment", 2) == "Only a cut fragment"


def test_default_turn_is_one_plain_call_with_the_evidence_self_check(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(script={"answer": [first_passage_reply]})
    result = ask(model, hr_store, context, QUESTION)
    assert [task for task, _ in model.calls] == ["answer"], "LLM-free self-check, judge skipped on a clear score"
    judgements = result["state"]["judgements"]
    shown = str(model.calls[0][1][-1].content).split("closest to this question")[1]
    for judgement in judgements:
        assert judgement["helpful"] == (f"[{judgement['number']}] " in shown), (judgement, shown)
        assert judgement["reason"] == "holds an evidence sentence"
    assert any(j["helpful"] for j in judgements) and not all(j["helpful"] for j in judgements)
    assert result["passed"], result
    assert 0.0 <= result["relevance"] <= 1.0


def test_llm_self_check_takes_the_verdicts_from_the_json_reply(hr_store: Any, context: Context) -> None:
    reply = json.dumps({"helpful": [3], "answer": "Full-time employees in Germany get 30 days of paid annual leave."})
    model = ScriptedChatModel(script={"answer": [reply]})
    result = ask(
        model,
        hr_store,
        context.with_(
            evidence={"use_self_check": True},
        ),
        QUESTION,
    )
    assert [task for task, _ in model.calls] == ["answer"]
    assert 'In "helpful"' in str(model.calls[0][1][-1].content), "the task asks for the self-check field"
    judgements = result["state"]["judgements"]
    assert [j["helpful"] for j in judgements] == [j["number"] == 3 for j in judgements]
    assert not result["answer"].startswith("{"), "the answer field, not the JSON, is the reply"


def test_the_prompt_shows_the_closest_passage_sentences(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(script={"answer": [first_passage_reply]})
    ask(model, hr_store, context, QUESTION)
    task = str(model.calls[0][1][-1].content)
    assert "closest to this question" in task and "30 days" in task


def test_the_judge_runs_when_the_cheap_score_is_near_the_threshold(hr_store: Any, hr_store_dir: str) -> None:
    paraphrase = "Full-time employees in Germany receive 30 working days of paid annual leave [1]."  # not verbatim
    model = ScriptedChatModel(script={"answer": [paraphrase]})
    context = Context(
        collection="test-hr", data_dir=hr_store_dir, groundedness={"llm_judge_band": 1.0}, answer_style="write"
    )
    ask(model, hr_store, context, QUESTION)
    assert model.calls_for("groundedness") >= 1


def carry_over_reply(messages: list[BaseMessage]) -> str:
    """A faithful answer to another question: the carry-over rule, copied from a passage."""
    system = str(messages[0].content)
    # The passage's sentence alone (split at line breaks too: the prompt's own text before it is no part of a reply).
    sentence = next(s for s in re.split(r"\. |\n", system) if "carry over up to 5" in s)
    return sentence.strip().rstrip(".") + "."


# The relevance check's anchor is the top evidence sentence. On this corpus the trained judge ranks the carry-over
# rule above the 30-day entitlement for "how many days do I get" (a known miss, evals/results/judge/), so the tests
# of the relevance mechanism below rank by the hand-made score alone.
HAND_RANKING = {"evidence.judge_rank_weight": 0.0}


def test_a_grounded_answer_to_another_question_never_passes_as_it_is(hr_store: Any, context: Context) -> None:
    """The demo's old first turn: the carry-over rule for 'how many days do I get' was grounded and passed."""
    model = ScriptedChatModel(script={"answer": [carry_over_reply]})
    context = context.with_(**HAND_RANKING)
    result = ask(model, hr_store, context, "How many days of annual leave do I get per year?")
    draft = result["state"]["draft"]
    assert result["refine_iterations"] == 1, "relevance below its threshold is refined"
    assert model.calls_for("refine") == 0, "the extractive refinement makes no LLM call"
    assert "carry over" not in result["answer"]
    assert "30 days" in result["answer"], result["answer"]
    assert result["passed"] and draft["relevance"] >= context.refinement.relevance_threshold


def test_without_refinement_the_irrelevant_answer_falls_back(hr_store: Any, hr_store_dir: str) -> None:
    model = ScriptedChatModel(script={"answer": [carry_over_reply]})
    context = Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        use_principle_refinement=False,
        answer_style="write",
        refinement={"quote_when_unchecked": False},
        **HAND_RANKING,
    )
    result = ask(model, hr_store, context, "How many days of annual leave do I get per year?")
    assert not result["passed"]
    assert "does not address the question" in (result["fallback_reason"] or "")
    assert "carry over" not in result["answer"]


def test_an_irrelevant_written_answer_is_replaced_by_the_passages_sentence(hr_store: Any, hr_store_dir: str) -> None:
    """The loops are spent (refinement off) and the written reply answers another question: the turn quotes the
    sentence that answers this one instead of abstaining, and never passes the written reply."""
    model = ScriptedChatModel(script={"answer": [carry_over_reply]})
    context = Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        use_principle_refinement=False,
        answer_style="write",
        **HAND_RANKING,
    )
    result = ask(model, hr_store, context, "How many days of annual leave do I get per year?")
    assert result["passed"] and result["kind"] == "answer", result["fallback_reason"]
    assert "carry over" not in result["answer"] and "30" in result["answer"]
    assert model.calls_for("answer") == 1, "the quote costs no model call"


def test_repeating_the_previous_answer_is_not_an_answer_to_the_follow_up(hr_store: Any, context: Context) -> None:
    """`reground chat`: "And is any of it paid?" got the previous answer word for word, and passed."""
    previous = "Full-time employees in Germany get 30 days of paid annual leave per calendar year (Urlaubsanspruch)."
    model = ScriptedChatModel(script={"answer": [previous]})
    graph = build_graph(chat_model=model, store=hr_store)
    messages = [
        {"role": "user", "content": "How many days of annual leave do I get in Germany?"},
        {"role": "assistant", "content": previous},
        {"role": "user", "content": "And is any of it paid?"},
    ]
    ctx = context.with_(
        use_principle_refinement=False,
        refinement={"quote_when_unchecked": False},
    )
    result = graph.invoke({"messages": messages}, config=run_config(ctx), context=ctx)["result"]
    assert result["relevance"] == 0.0 and not result["passed"]
    quoted = graph.invoke(
        {"messages": messages},
        config=run_config(
            ctx.with_(
                refinement={"quote_when_unchecked": True},
            )
        ),
        context=ctx.with_(
            refinement={"quote_when_unchecked": True},
        ),
    )["result"]
    assert quoted["answer"] != previous
    refined = graph.invoke({"messages": messages}, config=run_config(context), context=context)["result"]
    assert refined["answer"] != previous, "the extractive refinement never picks what was already said"


def test_a_writer_saying_the_passages_do_not_cover_an_answered_question_is_replaced_by_their_sentence(
    hr_store: Any, hr_store_dir: str
) -> None:
    """qwen2.5-1.5b replied "The passage does not cover this question" where the judge read the passages as answering
    (answerable 0.93): after its re-groundings the turn quotes the passages instead of abstaining."""
    not_found = "The passage does not cover this question. Please ask the people who maintain these documents."
    model = ScriptedChatModel(script={"answer": [not_found]})
    context = Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        answer_style="write",
        triage={"judge_answer_threshold": 0.0, "judge_hedge_threshold": 0.0},  # the judge finds an answer
        **HAND_RANKING,
    )
    result = ask(model, hr_store, context, "How many days of annual leave do I get per year?")
    assert model.calls_for("answer") == 1 + context.groundedness.max_reground_attempts, "the loops run first"
    assert result["kind"] == "answer" and "30" in result["answer"] and "does not cover" not in result["answer"]
    assert result["state"]["quoted"]
    believed = context.with_(refinement={"quote_when_unchecked": False})
    kept = ask(ScriptedChatModel(script={"answer": [not_found]}), hr_store, believed, QUESTION)
    assert "30" not in kept["answer"] and not kept["passed"] and not kept["state"]["quoted"]


def test_a_written_reply_giving_a_link_no_passage_holds_is_mended_not_abstained(
    hr_store: Any, hr_store_dir: str
) -> None:
    """A link no passage holds fails the groundedness check (so the loops run and the passages' own sentence is said)
    instead of finalize turning the whole turn into an abstention."""
    with_number = (
        "Full-time employees get paid annual leave every year [1]. For questions, see https://hr-help.example.com."
    )
    model = ScriptedChatModel(script={"answer": [with_number]})
    context = Context(collection="test-hr", data_dir=hr_store_dir, answer_style="write", **HAND_RANKING)
    result = ask(model, hr_store, context, "How many days of annual leave do I get per year?")
    assert "hr-help" not in result["answer"] and "30" in result["answer"], result
    assert result["passed"] and result["kind"] == "answer" and result["state"]["quoted"]
    notes = " ".join(e.get("note", "") for e in result["state"]["trace"])
    assert "the contact 'https://hr-help.example.com' is not in the cited passages" in notes
