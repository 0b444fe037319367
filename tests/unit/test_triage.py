"""Ask, abstain or answer (MTRAG-UN's behaviours), decided from measured signals before any answer call; the default
extract style answers in the documents' own words with no LLM call."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import MAX_READINGS, Context, ContextError
from reground.prompts import answer as answer_prompts
from reground.tools.retrieval.search import RetrievalSettings
from reground.tools.signals.answerability import coverage, readings, stands_alone, unresolved_references
from reground.tools.tuning.stores import INGEST
from reground.tools.tuning.turn import BUDGETS

from reground.testing.fake_chat import ScriptedChatModel
from tests.conftest import store_of_rows


def turns(graph: Any, context: Context, *questions: str, thread: str = "t") -> list[dict[str, Any]]:
    config = run_config(context, configurable={"thread_id": thread})
    results = []
    for question in questions:
        out = graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)
        results.append(out["result"])
    return results


@pytest.fixture
def context(hr_store_dir: str) -> Context:
    return Context(collection="test-hr", data_dir=hr_store_dir)


def test_the_default_answers_with_the_best_sentence_and_no_llm_call(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel()
    graph = build_graph(chat_model=model, store=hr_store, checkpointer=InMemorySaver())
    (result,) = turns(graph, context, "How many days of annual leave do full-time employees in Germany get?")
    assert model.calls == [], "extract style: no answer call, no judge (the reply is the documents' own words)"
    assert result["kind"] == "answer" and result["passed"]
    assert result["answer"].startswith("Full-time employees in Germany get 30 days of paid annual leave")
    assert [c["doc_id"] for c in result["citations"]] == ["annual-leave-de"]
    assert result["signals"]["answerable"] >= result["signals"]["answer_threshold"] > 0, "the judge finds the answer"
    assert result["llm_calls"] == 0 and result["groundedness"] >= 0.99


def test_a_question_nothing_covers_abstains_at_once_with_the_configured_escalation(
    hr_store: Any, context: Context
) -> None:
    model = ScriptedChatModel()
    graph = build_graph(chat_model=model, store=hr_store, checkpointer=InMemorySaver())
    ctx = context.with_(escalation="please open a ticket with the HR team")
    (result,) = turns(graph, ctx, "Which brand of hard candy tastes best on the moon?")
    assert result["kind"] == "abstain" and not result["passed"]
    assert result["answer"] == answer_prompts.NOT_FOUND.format(escalation=ctx.escalation)
    assert "the judge finds no answer in the passages" in (result["fallback_reason"] or "")
    assert result["signals"]["answerable"] < result["signals"]["hedge_threshold"]
    assert model.calls == [] and result["reground_attempts"] == 0, "a first turn has no other query to try"
    assert result["citations"] == []


def test_the_default_escalation_names_no_team(context: Context) -> None:
    assert "HR" not in context.escalation and "ticket" not in context.escalation


def test_a_follow_up_nothing_covers_retries_once_then_abstains(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(script={"reground": ["hard candy brands on the moon"]})
    graph = build_graph(chat_model=model, store=hr_store, checkpointer=InMemorySaver())
    first, second = turns(
        graph,
        context,
        "How many days of annual leave do full-time employees in Germany get?",
        "Which brand of hard candy tastes best on the moon?",
    )
    assert first["kind"] == "answer"
    assert second["kind"] == "abstain" and second["reground_attempts"] == 1, "one more retrieval, then honesty"
    assert second["llm_calls"] <= 2


def test_no_early_abstention_below_a_zero_threshold(hr_store: Any, context: Context) -> None:
    graph = build_graph(chat_model=ScriptedChatModel(), store=hr_store, checkpointer=InMemorySaver())
    (result,) = turns(
        graph,
        context.with_(
            triage={"support_threshold": 0.0},
        ),
        "Which brand of hard candy tastes best?",
    )
    assert result["kind"] != "abstain" or "support" not in (result["fallback_reason"] or "")


POLICIES = {
    "DE": ("Germany", 30),
    "UK": ("the United Kingdom", 25),
    "FR": ("France", 27),
    "US": ("the United States", 20),
}


@pytest.fixture(scope="module")
def leave_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    """Four leave policies that all fit "the leave policy": an ambiguous question has four readings."""
    rows = [
        {
            "doc_id": f"leave-{code.lower()}",
            "title": f"Annual leave policy ({name})",
            "region": "americas" if code == "US" else "europe",
            "text": f"Employees in {name} receive {days} days of paid annual leave per year. Leave requests go "
            f"through the HR portal in {name}.",
        }
        for code, (name, days) in POLICIES.items()
    ]
    return store_of_rows(tmp_path_factory.mktemp("leave"), "leave-policies", rows)


def test_an_ambiguous_question_asks_which_reading_and_the_next_message_resolves_it(
    leave_store: tuple[Any, str],
) -> None:
    store, data_dir = leave_store
    context = Context(collection="leave-policies", data_dir=data_dir)
    model = ScriptedChatModel()
    graph = build_graph(chat_model=model, store=store, checkpointer=InMemorySaver())
    asked, answered = turns(
        graph, context, "How many days of annual leave does the policy give?", "The one for France, please."
    )
    assert asked["kind"] == "clarify" and asked["passed"]
    assert asked["answer"].endswith("Which one do you mean?")
    labels = {o["label"] for o in asked["options"]}
    assert labels == {f"Annual leave policy ({name})" for name, _ in POLICIES.values()}
    assert {o["doc_id"] for o in asked["options"]} == {f"leave-{c.lower()}" for c in POLICIES}
    assert all(label in asked["answer"] for label in labels), "the question names the readings"
    assert asked["citations"] == [] and asked["llm_calls"] == 0
    assert answered["kind"] == "answer", answered
    assert "27 days" in answered["answer"] and answered["citations"][0]["doc_id"] == "leave-fr"


def judge_reads(monkeypatch: pytest.MonkeyPatch, answerable: Callable[[set[str]], float | None]) -> None:
    """Make triage's judge read a set of passages as `answerable(their doc ids)`, or as it does where that is None."""
    import reground.nodes.triage as triage_node
    from reground.tools.signals.reading import TurnReading

    read = triage_node.evidence_for

    def judged(state: Any, passages: Any, env: Any) -> TurnReading:
        reading = read(state, passages, env)
        value = answerable({p["doc_id"] for p in passages})
        return reading if value is None else replace(reading, answerable=value)

    monkeypatch.setattr(triage_node, "evidence_for", judged)
    read_answerable = triage_node.answerable_of  # the readings' own passages: only how answerable they are

    def judged_answerable(state: Any, passages: Any, env: Any) -> float | None:
        value = answerable({p["doc_id"] for p in passages})
        return read_answerable(state, passages, env) if value is None else value

    monkeypatch.setattr(triage_node, "answerable_of", judged_answerable)


def test_a_reading_the_judge_finds_no_answer_in_is_not_offered(
    leave_store: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    judge_reads(monkeypatch, lambda doc_ids: 0.0 if doc_ids == {"leave-us"} else None)
    store, data_dir = leave_store
    question = "How many days of annual leave does the policy give?"
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    three = Context(collection="leave-policies", data_dir=data_dir, triage={"clarify_min_readings_opening": 3})
    (asked,) = turns(graph, three, question, thread="three")
    assert asked["kind"] == "clarify"
    assert sorted(o["doc_id"] for o in asked["options"]) == ["leave-de", "leave-fr", "leave-uk"]
    assert "Annual leave policy (the United States)" not in asked["answer"]
    # Four readings needed, three that answer: no asking back.
    (answered,) = turns(graph, Context(collection="leave-policies", data_dir=data_dir), question, thread="four")
    assert answered["kind"] != "clarify" and answered["options"] == []


def test_a_reference_the_documents_do_not_answer_asks_back_when_several_readings_answer_it(
    leave_store: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    silent = {"leave-us", "leave-uk"}  # the judge reads their own passages as not answering

    def answerable(doc_ids: set[str]) -> float | None:
        if doc_ids <= silent:
            return 0.0
        return 0.5 if len(doc_ids) > 1 else None  # the turn's passages together: only close (a hedge)

    judge_reads(monkeypatch, answerable)
    store, data_dir = leave_store
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    context = Context(collection="leave-policies", data_dir=data_dir)
    question = "How many days of annual leave does the policy give?"
    (asked,) = turns(graph, context, question)
    assert asked["kind"] == "clarify", asked
    assert sorted(o["doc_id"] for o in asked["options"]) == ["leave-de", "leave-fr"]
    assert asked["answer"] == (
        'Your question could refer to several things in the documents, such as "Annual leave policy (France)" or '
        '"Annual leave policy (Germany)". Which one do you mean?'
    )
    silent.add("leave-fr")  # one reading that answers is no ambiguity: the judge's decision stands
    (single,) = turns(graph, context, question, thread="one")
    assert single["kind"] in ("hedge", "abstain") and single["options"] == []


def ask_back_fires(monkeypatch: pytest.MonkeyPatch, *, always: bool) -> None:
    """Make the ask-back model find every question underspecified (`always`), or none."""
    from reground.tools.services import Services
    from reground.tools.signals.ask_back import AskBackModel, shipped_ask_back

    shipped = shipped_ask_back()
    forced = AskBackModel(shipped.weights, shipped.bias, shipped.mean, shipped.scale, 0.0 if always else 1.01)
    monkeypatch.setattr(Services, "ask_back", lambda self: forced)


def test_the_ask_back_model_asks_which_reading_naming_only_those_the_judge_reads_as_answering(
    leave_store: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    judge_reads(monkeypatch, lambda doc_ids: 0.0 if doc_ids == {"leave-us"} else None)
    ask_back_fires(monkeypatch, always=True)
    store, data_dir = leave_store
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    context = Context(collection="leave-policies", data_dir=data_dir)
    # Four readings fit "the policy" and three answer: the readings rule (four needed) does not ask; the model does.
    asked, answered = turns(
        graph, context, "How many days of annual leave does the policy give?", "The one for France, please."
    )
    assert asked["kind"] == "clarify" and asked["signals"]["underspecified"] >= 0.0
    assert sorted(o["doc_id"] for o in asked["options"]) == ["leave-de", "leave-fr", "leave-uk"]
    assert answered["kind"] == "answer", "a reply to the turn's own question is never asked back again"
    assert "27 days" in answered["answer"]
    off = context.with_(triage={"learned_ask_back": False})
    (rules_only,) = turns(graph, off, "How many days of annual leave does the policy give?", thread="off")
    assert rules_only["kind"] != "clarify" and "underspecified" not in rules_only["signals"]


def test_the_ask_back_model_offers_no_choice_when_one_document_fits(
    hr_store: Any, context: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    ask_back_fires(monkeypatch, always=True)
    graph = build_graph(chat_model=ScriptedChatModel(), store=hr_store, checkpointer=InMemorySaver())
    scoped = context.with_(metadata_filter={"country": "DE"})
    (result,) = turns(graph, scoped, "How many days of annual leave do full-time employees in Germany get?")
    assert result["kind"] == "answer" and result["options"] == []


def test_clarify_can_be_turned_off(leave_store: tuple[Any, str]) -> None:
    store, data_dir = leave_store
    context = Context(collection="leave-policies", data_dir=data_dir, use_clarify=False)
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    (result,) = turns(graph, context, "How many days of annual leave does the policy give?")
    assert result["kind"] == "answer" and result["options"] == []


def test_an_opening_question_may_need_fewer_readings_to_ask_back(leave_store: tuple[Any, str]) -> None:
    store, data_dir = leave_store
    # The three European policies are in scope, so three readings fit "the policy": four are needed later in a
    # conversation, three at its opening.
    context = Context(
        collection="leave-policies",
        data_dir=data_dir,
        metadata_filter={"region": "europe"},
        triage={"clarify_min_readings": 4, "clarify_min_readings_opening": 3},
    )
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    question = "How many days of annual leave does the policy give?"
    (opening,) = turns(graph, context, question, thread="opening")
    assert opening["kind"] == "clarify"
    assert sorted(o["doc_id"] for o in opening["options"]) == ["leave-de", "leave-fr", "leave-uk"]
    *_, later = turns(graph, context, "Hello.", "I work in Europe.", question, thread="later")
    assert later["kind"] != "clarify" and later["options"] == []


@pytest.mark.parametrize("field", ["clarify_min_readings", "clarify_min_readings_opening"])
def test_a_reading_count_triage_can_never_find_is_refused(field: str) -> None:
    # readings() stops at MAX_READINGS, so five could never be found and asking back would silently be off.
    assert inspect.signature(readings).parameters["limit"].default == MAX_READINGS == 4
    message = rf"'triage.{field}': at most 4, got 5: triage finds at most 4 readings"
    with pytest.raises(ContextError, match=message):
        Context(triage={field: 5})
    with pytest.raises(ContextError, match=message):
        Context(**{f"triage.{field}": 5})
    with pytest.raises(ContextError, match=message):
        Context().with_(triage={field: 5})
    assert getattr(Context(triage={field: 4}).triage, field) == 4


def test_a_partial_answer_says_what_the_documents_do_not_mention(hr_store: Any, context: Context) -> None:
    graph = build_graph(chat_model=ScriptedChatModel(), store=hr_store, checkpointer=InMemorySaver())
    ctx = context.with_(
        triage={"partial_coverage": 0.9},
    )
    (result,) = turns(graph, ctx, "How many days of annual leave do full-time employees in Germany get on Mars?")
    assert result["kind"] == "partial" and result["passed"]
    assert "mars" in result["missing"]
    assert result["answer"].endswith(answer_prompts.PARTIAL.format(missing="'mars'"))
    assert "30 days" in result["answer"]


def test_a_written_not_found_reply_is_an_abstention(hr_store: Any, context: Context) -> None:
    model = ScriptedChatModel(script={"answer": [f"The documents do not cover this; {context.escalation}."]})
    graph = build_graph(chat_model=model, store=hr_store, checkpointer=InMemorySaver())
    ctx = context.with_(
        answer_style="write",
        groundedness={"max_reground_attempts": 0},
        refinement={"quote_when_unchecked": False},  # else the passages the judge reads as answering are quoted
    )
    (result,) = turns(graph, ctx, "How many days of annual leave do full-time employees in Germany get?")
    assert result["kind"] == "abstain" and not result["passed"]


def test_unresolved_references_are_the_ones_the_dialogue_never_named() -> None:
    assert unresolved_references("What awards has the actor received?", []) == ["the actor"]
    assert unresolved_references("How wealthy is this county of California?", []) == ["this county"]
    history = [{"role": "user", "text": "Tell me about the actor Chris Hemsworth."}]
    assert unresolved_references("What awards has the actor received?", history) == []
    assert unresolved_references("How many days do I get?", []) == []
    assert unresolved_references("How has the role of the Prime Minister evolved?", []) == [
        "the role",
        "the Prime Minister",
    ]
    # "I" is capitalised but never the name a reference continues with.
    assert unresolved_references("Don't do that I'll get insurance", []) == []
    assert unresolved_references("Is this REAL ID I've got valid?", []) == ["this REAL ID"]


def test_only_a_question_that_reads_on_its_own_stands_alone() -> None:
    history = [
        {"role": "user", "text": "How much parental leave do I get?"},
        {"role": "assistant", "text": "Parents can take up to three years of parental leave."},
    ]
    assert stands_alone("How do I book a flight for a business trip?", history)
    assert not stands_alone("Tell me the questions I must answer.", history)  # which questions? the dialogue's
    assert not stands_alone("Is any of it paid?", history)  # a pronoun
    assert not stands_alone("And for part-time staff?", history)  # too short to stand alone
    assert not stands_alone("Where can I find more info?", history)  # more of what was said
    assert not stands_alone("Can I take another week of leave next year?", history)  # another, after one


def test_a_follow_up_that_needs_its_dialogue_is_not_searched_as_a_new_topic(demo_store: tuple[Any, str]) -> None:
    store, data_dir = demo_store
    model = ScriptedChatModel()
    graph = build_graph(chat_model=model, store=store, checkpointer=InMemorySaver())
    context = Context(collection="demo", data_dir=data_dir, metadata_filter={"country": "DE"})
    config = run_config(context, configurable={"thread_id": "t"})
    modes = []
    for question in ("How much parental leave do I get?", "Tell me the questions I must answer."):
        out = graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)
        modes.append(graph.get_state(config).values["query_mode"])
    assert out["result"]["kind"] != "answer" or {c["doc_id"] for c in out["result"]["citations"]} <= {
        "parental-leave-de"
    }
    assert modes[1] != "new_topic"


def test_readings_are_distinct_documents_close_to_the_best() -> None:
    candidates = [
        {"doc_id": "a", "title": "A", "chunk_id": "a1", "doc_score": 1.0},
        {"doc_id": "a", "title": "A", "chunk_id": "a2", "doc_score": 1.0},
        {"doc_id": "b", "title": "", "text": "Bee keeping for beginners in spring and summer", "doc_score": 0.9},
        {"doc_id": "c", "title": "C", "chunk_id": "c1", "doc_score": 0.5},
    ]
    found = readings(candidates, ratio=0.8)
    assert [r.doc_id for r in found] == ["a", "b"]
    assert found[1].label == "Bee keeping for beginners in spring and summer ..."


def test_a_document_titled_by_its_id_is_offered_by_its_first_words() -> None:
    # A JSONL record without a title is titled by its id at ingest (tools/text/loaders.py).
    candidates = [
        {
            "doc_id": "ibmcld_13724-17421-19534",
            "title": "ibmcld_13724-17421-19534",
            "doc_score": 1.0,
            "text": "A higher rate causes the text to be spoken more quickly; a lower rate more slowly.",
        },
        {"doc_id": "faq-7", "title": "Speaking rate FAQ", "doc_score": 0.9, "text": "How fast does it speak?"},
    ]
    labels = [r.label for r in readings(candidates, ratio=0.8)]
    assert labels == ["A higher rate causes the text to be ...", "Speaking rate FAQ"]


def test_coverage_lists_the_missing_words_in_question_order() -> None:
    share, missing = coverage("Do part-time staff on Mars get annual leave?", ["Annual leave for part-time staff."])
    assert missing == ["mars"] and 0.7 < share < 1.0


def test_triage_sits_between_rerank_and_answer_in_the_drawing() -> None:
    nodes = build_graph(chat_model=ScriptedChatModel()).get_graph().nodes
    assert {"triage", "clarify"} <= set(nodes)


def test_every_result_says_what_kind_of_reply_it_is(tmp_path: Path, hr_store: Any, context: Context) -> None:
    graph = build_graph(chat_model=ScriptedChatModel(), store=hr_store, checkpointer=InMemorySaver())
    (empty,) = turns(graph, context, "   ")
    assert empty["kind"] == "abstain" and empty["fallback_reason"] == "empty question"


def test_the_support_threshold_comes_from_the_calibration_file(tmp_path: Path) -> None:
    from reground.nodes.context import DEFAULT_SUPPORT_THRESHOLD

    assert Context(data_dir=str(tmp_path)).resolved_support_threshold() == DEFAULT_SUPPORT_THRESHOLD
    (tmp_path / "calibration.json").write_text(json.dumps({"support_threshold": 0.42}), encoding="utf-8")
    assert Context(data_dir=str(tmp_path)).resolved_support_threshold() == 0.42
    assert (
        Context(
            data_dir=str(tmp_path),
            triage={"support_threshold": 0.0},
        ).resolved_support_threshold()
        == 0.0
    )


def test_an_extracted_reply_is_not_rewritten_by_principle_refinement(hr_store: Any, context: Context) -> None:
    """ProMiSe refines written replies; asked to make a quoted sentence 'more specific' a small model invents."""
    model = ScriptedChatModel(script={"refine": ["Invented details about leave."]})
    graph = build_graph(chat_model=model, store=hr_store, checkpointer=InMemorySaver())
    ctx = context.with_(
        refinement={"specificity_threshold": 0.99, "faithfulness_threshold": 0.99},
    )
    (result,) = turns(graph, ctx, "How many days of annual leave do full-time employees in Germany get?")
    assert result["refine_iterations"] == 0 and model.calls == [] and result["passed"]
    assert "Invented" not in result["answer"]


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    data_dir = tmp_path_factory.mktemp("demo-store")
    store = PassageStore.open("demo", data_dir=data_dir, create=True)
    corpus = Path(__file__).resolve().parents[2] / "reground" / "data" / "hr_policies.jsonl"
    assert not ingest([corpus], store, progress=False, max_tokens=INGEST.chunk_tokens).errors
    return store, str(data_dir)


def travel_after_parental_leave(
    demo_store: tuple[Any, str], retrieval: RetrievalSettings | None = None
) -> tuple[dict[str, Any], ScriptedChatModel]:
    """The demo's change of subject: the second turn's result, checked to be answered from the travel policy."""
    store, data_dir = demo_store
    model = ScriptedChatModel()
    graph = build_graph(chat_model=model, store=store, checkpointer=InMemorySaver())
    scope = {"country": "DE"}
    context = Context(
        collection="demo", data_dir=data_dir, metadata_filter=scope, retrieval=retrieval or RetrievalSettings()
    )
    first, second = turns(
        graph, context, "How much parental leave do I get?", "How do I book a flight for a business trip?"
    )
    assert [c["doc_id"] for c in first["citations"]] == ["parental-leave-de"]
    # The judge finds the booking sentence close but not sure (0.72 < the 0.79 calibrated on MTRAG-UN): it hedges.
    assert second["kind"] in ("answer", "hedge") and second["passed"], second["fallback_reason"]
    assert "TravelDesk" in second["answer"]
    assert {c["doc_id"] for c in second["citations"]} == {"travel-expenses"}
    return second, model


def test_a_change_of_subject_is_searched_as_a_new_topic(demo_store: tuple[Any, str]) -> None:
    """A question that stands alone and fits the conversation's document poorly opens a new topic at retrieval, even
    with three known content words: the travel policy is found on the first search, with no re-grounding (with the
    standalone rule off, the conversation's topic pins retrieval to the leave policies: the test below)."""
    second, model = travel_after_parental_leave(demo_store)
    assert second["reground_attempts"] == 0 and model.calls == []
    assert "travel-expenses" in {p["doc_id"] for p in second["passages"]}


def test_the_new_topic_holds_for_the_next_follow_up(demo_store: tuple[Any, str]) -> None:
    """After the change of subject, a follow-up that depends on the dialogue searches the new topic, not the
    conversation's opening (the earlier question is checked for a shift by the same stand-alone rule)."""
    store, data_dir = demo_store
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    context = Context(collection="demo", data_dir=data_dir, metadata_filter={"country": "DE"})
    *_, third = turns(
        graph,
        context,
        "How much parental leave do I get?",
        "How do I book a flight for a business trip?",
        "Which class can I fly in?",
    )
    assert "economy" in third["answer"] and {c["doc_id"] for c in third["citations"]} == {"travel-expenses"}
    assert third["passages"][0]["doc_id"] == "travel-expenses"


def test_a_change_of_subject_is_answered_from_its_own_document(demo_store: tuple[Any, str]) -> None:
    """The conversation's topic (parental leave) pins retrieval to its document when the retriever does not see the
    change of subject (here: standalone questions need as many content words as any other message); when nothing
    there supports the new question, the re-grounding searches the question as a topic of its own instead of
    abstaining."""
    pinned = RetrievalSettings(shift_min_terms_standalone=8, same_document_penalty=0.02)
    second, model = travel_after_parental_leave(demo_store, pinned)
    assert second["reground_attempts"] == 1 and model.calls == [], "one LLM-free re-grounding"
    kept = [p["doc_id"] for p in second["passages"]]
    assert kept[0] == "travel-expenses" and kept[-1] == "parental-leave-de", "the conversation's best passage stays"


def test_a_follow_up_naming_what_was_just_said_gets_it_again_not_an_unrelated_sentence(
    demo_store: tuple[Any, str],
) -> None:
    """`reground chat`: "What about partner leave?" right after the partner-leave sentence was said got the first
    turn's Elternzeit sentence (the repeat filter had removed the only sentence about partner leave), and passed."""
    store, data_dir = demo_store
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    context = Context(collection="demo", data_dir=data_dir, metadata_filter={"country": "DE"})
    partner = "The second parent receives 4 weeks of paid partner leave"
    _, second, third = turns(
        graph, context, "How long is parental leave?", "Tell me about partner leave.", "What about partner leave?"
    )
    assert partner in second["answer"], second["answer"]
    assert partner in third["answer"] and third["passed"], third["answer"]
    assert "3 years" not in third["answer"]
    assert [c["doc_id"] for c in third["citations"]] == ["parental-leave-de"]


DEMO_SCOPE = {"country": "DE", "employment_type": "full-time"}


def test_the_judge_answers_is_any_of_it_paid_with_the_parental_allowance(demo_store: tuple[Any, str]) -> None:
    """The follow-up the hand-made ranking answered with the paid partner-leave sentence: the trained judge reads it
    in its dialogue and answers with the parental allowance (Elterngeld)."""
    store, data_dir = demo_store
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    context = Context(collection="demo", data_dir=data_dir, metadata_filter=DEMO_SCOPE)
    _, second = turns(graph, context, "How long is parental leave?", "And is any of it paid?")
    assert second["kind"] == "answer" and second["passed"], second["fallback_reason"]
    assert "Elterngeld" in second["answer"], second["answer"]
    assert second["signals"]["answerable"] >= second["signals"]["answer_threshold"]
    without = context.with_(use_trained_judge=False)
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    _, before = turns(graph, without, "How long is parental leave?", "And is any of it paid?", thread="u")
    assert "Elterngeld" not in before["answer"], "the hand-made ranking alone still picks another sentence"


def test_an_opening_question_leaning_on_a_pronoun_asks_what_it_refers_to(demo_store: tuple[Any, str]) -> None:
    store, data_dir = demo_store
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    context = Context(collection="demo", data_dir=data_dir, metadata_filter=DEMO_SCOPE)
    (result,) = turns(graph, context, "How do I configure it?")
    assert result["kind"] == "clarify" and result["answer"].startswith('What does "it" refer to?')
    assert len(result["options"]) >= 2 and all(o["label"] in result["answer"] for o in result["options"])
    (later,) = turns(graph, context, "What is the capital of Mongolia?", thread="v")
    assert later["kind"] == "abstain", "a question that names its topic is not asked back"


def test_a_hedge_says_the_documents_come_only_close(demo_store: tuple[Any, str]) -> None:
    """Between the two calibrated thresholds the reply is the closest sentence, said as such, with its citation."""
    store, data_dir = demo_store
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    context = Context(
        collection="demo",
        data_dir=data_dir,
        metadata_filter=DEMO_SCOPE,
        triage={"judge_answer_threshold": 1.0},
    )
    (result,) = turns(graph, context, "How many days of annual leave do I get per year?")
    assert result["kind"] == "hedge" and result["passed"]
    assert result["answer"].startswith("The documents may not answer this exactly. The closest they come is: ")
    assert "30 working days" in result["answer"] and result["citations"]


def test_a_reading_s_answerability_is_read_without_the_reader(hr_store: Any, context: Context) -> None:
    """Whether a reading's own passages answer is the answerability head's verdict on the turn's sentence features,
    which the reader's logits never enter: it costs no reader pass, and is the full reading's value exactly."""
    from langgraph.runtime import Runtime
    from reground.nodes.common import NodeEnv, answerable_of, evidence_for
    from reground.tools.retrieval.search import conversation_query
    from reground.tools.services import Services

    services = Services(chat_model=ScriptedChatModel(), store=hr_store)
    env = NodeEnv(services=services, runtime=Runtime(context=context))
    question = "How many days of annual leave do full-time employees in Germany get?"
    state: Any = {"question": question, "history": []}
    passages = services.retriever(context).search(
        conversation_query(
            question,
            [],
            budget_tokens=BUDGETS.history_token_budget,
            phrase_tokens=RetrievalSettings.phrase_history_tokens,
        ),
        where=None,
        doc_k=BUDGETS.doc_candidates,
        paragraph_k=BUDGETS.paragraph_candidates,
    )
    full = evidence_for(state, passages, env).answerable
    read: list[str] = []
    reader = services.reader()

    def counted() -> Callable[[str, Any], Any]:
        def logits(query: str, sentences: Any) -> Any:
            read.extend(sentences)
            return reader(query, sentences)

        return logits

    services.reader = counted  # type: ignore[method-assign]
    assert evidence_for(state, passages, env).answerable == full and read, "the full reading asks the reader"
    read.clear()
    assert full is not None and answerable_of(state, passages, env) == full
    assert read == [], "not the readings' answerability"


FENCE = "`" * 3
CODE_PAGES = {
    "query-params.md": (
        "Query Parameters",
        "When you declare other function parameters that are not part of the path parameters, they are interpreted "
        "as query parameters.\n\nThe same way, you can declare optional query parameters, by setting their default "
        f"to `None`:\n\n{FENCE}python\n@app.get('/items/{{item_id}}')\nasync def read_item(item_id: str, "
        f"q: str | None = None):\n    return {{'item_id': item_id}}\n{FENCE}\n",
    ),
    "query-params-str-validations.md": (
        "Query Parameters and String Validations",
        "FastAPI allows you to declare additional information and validation for your query parameters.\n\nWhen you "
        "need a query parameter to be required, do not declare a default value:\n\n"
        f"{FENCE}python\nasync def read_items(q: Annotated[str, Query(min_length=3)]):\n    return q\n{FENCE}\n",
    ),
    "body.md": (
        "Request Body",
        "When you need to send data from a client to your API, you send it as a request body.\n\n"
        f"{FENCE}python\nclass Item(BaseModel):\n    name: str\n    description: str | None = None\n{FENCE}\n",
    ),
    "body-multiple-params.md": (
        "Body - Multiple Parameters",
        "You can mix Path, Query and request body parameter declarations freely.\n\n"
        f"{FENCE}python\nasync def update_item(item_id: int, q: str | None = None, item: Item | None = None):\n"
        f"    return item\n{FENCE}\n",
    ),
}


@pytest.fixture(scope="module")
def code_docs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    rows = [{"doc_id": d, "title": title, "text": text} for d, (title, text) in CODE_PAGES.items()]
    return store_of_rows(tmp_path_factory.mktemp("code-docs"), "test-code-docs", rows)


def test_on_documentation_with_code_a_generic_definite_reference_is_left_to_the_documentation_triage(
    code_docs: tuple[Any, str],
) -> None:
    """ "the request fails" names nothing the user has in mind: on developer docs the heads trained there decide
    whether to ask back, not the reference rule (which asked back on this clear opening with four page titles)."""
    store, data_dir = code_docs
    question = "how do i make a query param optional in fastapi? right now the request fails when i leave it out"
    assert unresolved_references(question, []) == ["the request"]
    # Two readings suffice for the rule here, so only the routing keeps it from asking back.
    context = Context(collection="test-code-docs", data_dir=data_dir, triage={"clarify_min_readings_opening": 2})
    graph = build_graph(chat_model=ScriptedChatModel(script={}), store=store, checkpointer=InMemorySaver())
    (result,) = turns(graph, context, question)
    assert "doc_answerable" in result["signals"], result["signals"]
    assert "answering_readings" not in result["signals"]
    assert result["signals"]["unresolved_references"] == 1.0
