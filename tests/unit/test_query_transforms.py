"""Query transforms (HyDE, intended topics, multi-query): the model's structured call, how retrieval uses the
texts, and the graph's retrieve node turning them on through `context.retrieval`."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context
from reground.tools.adapters.chat import CallStats, LLMReplyError, one_line
from reground.tools.retrieval.query_transforms import (
    IntendedTopics,
    QueryVariants,
    recent_history,
    transform_query,
)
from reground.tools.retrieval.search import HybridRetriever, RetrievalQuery, RetrievalSettings
from reground.tools.text.tokens import history_query
from reground.tools.tuning.retrieval import QUERY_TRANSFORMS

from reground.testing.fake_chat import ScriptedChatModel
from tests.unit.test_retrieval import CHUNKS, FakeStore

HISTORY = [
    {"role": "user", "text": "How many days of annual leave do I get in the US?"},
    {"role": "agent", "text": "You get 20 days of paid time off."},
]


@pytest.fixture()
def store() -> FakeStore:
    return FakeStore(list(CHUNKS))


@pytest.mark.parametrize(
    ("name", "reply", "expected"),
    [
        ("hyde", '{"passage": "Payslips are published in the portal every month."}', 1),
        ("topics", '{"topics": ["payslip dates", "payslip errors", "payslip dates"]}', 2),
        ("multi_query", '{"queries": ["when are payslips published", "payslip publication date", "pay"]}', 3),
    ],
)
def test_each_transform_is_one_structured_call_with_the_conversation(name: str, reply: str, expected: int) -> None:
    model = ScriptedChatModel(script={"other": [reply]})
    stats = CallStats()
    texts = transform_query(
        model,
        name,
        "And when do I get it?",
        HISTORY,
        stats,
        history_tokens=RetrievalSettings.transform_history_tokens,
        max_tokens=RetrievalSettings.transform_max_tokens,
    )
    assert len(texts) == expected, texts  # topics: the duplicate is dropped
    assert all(t.strip() for t in texts)
    assert stats.llm_calls == 1
    ((_, messages),) = model.calls
    prompt = str(messages[-1].content)
    assert "20 days of paid time off" in prompt and prompt.index("20 days") < prompt.index("And when do I get it?")


def test_none_makes_no_call_and_bad_names_and_replies_are_refused() -> None:
    model = ScriptedChatModel(script={"other": ['{"topics": []}']})
    assert (
        transform_query(
            model,
            "none",
            "question?",
            HISTORY,
            CallStats(),
            history_tokens=RetrievalSettings.transform_history_tokens,
            max_tokens=RetrievalSettings.transform_max_tokens,
        )
        == ()
    )
    assert model.calls == []
    with pytest.raises(ValueError, match="unknown query transform 'hype'"):
        transform_query(
            model,
            "hype",
            "question?",
            HISTORY,
            CallStats(),
            history_tokens=RetrievalSettings.transform_history_tokens,
            max_tokens=RetrievalSettings.transform_max_tokens,
        )
    with pytest.raises(LLMReplyError):  # an empty topic list is no reply, even after the repair retry
        transform_query(
            model,
            "topics",
            "question?",
            HISTORY,
            CallStats(),
            history_tokens=RetrievalSettings.transform_history_tokens,
            max_tokens=RetrievalSettings.transform_max_tokens,
        )
    with pytest.raises(ValueError, match="unknown query transform"):
        RetrievalSettings(query_transform="hype")  # type: ignore[arg-type]


def test_reply_texts_are_folded_onto_one_line_and_short_ones_name_the_problem() -> None:
    assert one_line("  when are\n payslips   published ", min_words=3, problem="short") == "when are payslips published"
    with pytest.raises(ValueError, match=r"^the rewrite is a single word$"):
        one_line(" payslips \n", min_words=2, problem="the rewrite is a single word")
    texts = [" payslip  dates", "payslip dates", "", *(f"topic {i}" for i in range(9))]
    for reply in (IntendedTopics(topics=texts).topics, QueryVariants(queries=texts).queries):
        assert reply[:2] == ["payslip dates", "topic 0"] and len(reply) == QUERY_TRANSFORMS.max_items
    with pytest.raises(ValueError, match="no non-empty item"):
        QueryVariants(queries=[" ", ""])


def test_recent_history_keeps_the_newest_turns_within_the_budget() -> None:
    long_turns = [{"role": "user", "text": "bicycles " * 300}, *HISTORY]
    kept = recent_history(long_turns, budget_tokens=40)
    assert [t["text"] for t in kept[-2:]] == [t["text"] for t in HISTORY]
    assert kept[0]["text"].count("bicycles") < 40, "the oldest turn is cut to its tail"
    assert recent_history(HISTORY, 0) == []


def _vague() -> RetrievalQuery:
    question = "What about the other thing?"
    return RetrievalQuery(question, history_query(question, HISTORY, 100))


@pytest.mark.parametrize("name", ["hyde", "topics"])
def test_dense_transforms_add_the_texts_as_a_document_signal(store: FakeStore, name: str) -> None:
    texts = ("Lease a bicycle through salary conversion: bike leasing.",)
    plain = HybridRetriever(store).rank_documents(_vague(), where=None, k=3)
    assert plain[0][0] != "bikes"
    query = dataclasses.replace(_vague(), expansions=texts)
    # The texts are ignored unless the settings select the transform.
    assert HybridRetriever(store).rank_documents(query, where=None, k=3) == plain
    on = HybridRetriever(store, RetrievalSettings(query_transform=name, transform_weight=10.0))  # type: ignore[arg-type]
    assert on.rank_documents(query, where=None, k=1)[0][0] == "bikes"
    assert on.rank_documents(query, where={"country": "US"}, k=3)[0][0] != "bikes", "the scope still applies"
    assert on.rank_documents(_vague(), where=None, k=3) == plain, "no texts (a failed call): the plain ranking"


def test_multi_query_fuses_the_variants_rankings_by_reciprocal_rank(store: FakeStore) -> None:
    variants = ("When are payslips published in the portal?", "payslip publication date each month")
    settings = RetrievalSettings(query_transform="multi_query", transform_weight=1.0)
    retriever = HybridRetriever(store, settings)
    query = dataclasses.replace(_vague(), expansions=variants)
    fused = retriever.rank_documents(query, where=None, k=4)
    assert fused[0][0] == "payslips", "two variants naming payslips outvote the vague question"
    assert fused == sorted(fused, key=lambda d: -d[1])
    original = HybridRetriever(store).rank_documents(_vague(), where=None, k=4)
    assert original[0][0] in {d for d, _ in fused}, "the original ranking is one of the fused ones"
    passages = retriever.search(query, where=None, doc_k=2, paragraph_k=4)
    assert {p["doc_id"] for p in passages} == {d for d, _ in fused[:2]}, "passages come from the fused top documents"


# --- through the graph -------------------------------------------------------------------------------------


def _run(model: ScriptedChatModel, hr_store: Any, context: Context) -> dict[str, Any]:
    graph = build_graph(chat_model=model, store=hr_store, checkpointer=InMemorySaver())
    question = "What do I do with the paperwork afterwards?"
    config = run_config(context, configurable={"thread_id": "t"})
    return graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)


def test_the_context_turns_a_transform_on_in_the_retrieve_node(hr_store_dir: str, hr_store: Any) -> None:
    base = Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        groundedness={"max_reground_attempts": 0},
        refinement={"max_refine_iterations": 0},
    )
    off = ScriptedChatModel()
    plain = _run(off, hr_store, base)["result"]["passages"]
    assert off.calls_for("other") == 0, "no transform call by default"
    assert plain[0]["doc_id"] == "travel-all"

    hyde = ScriptedChatModel(
        script={"other": ['{"passage": "From the fourth day of illness you need a doctor\'s certificate."}']}
    )
    context = base.with_(retrieval=RetrievalSettings(query_transform="hyde", transform_weight=5.0))
    out = _run(hyde, hr_store, context)
    assert hyde.calls_for("other") == 1, "one transform call with the refiner model"
    assert out["result"]["passages"][0]["doc_id"] == "sick-pay-all", "the hypothetical passage moves the search"

    broken = ScriptedChatModel(script={"other": ["no"]})  # too short for a passage, however it is read
    out = _run(broken, hr_store, context)
    assert broken.calls_for("other") >= 1
    assert [p["chunk_id"] for p in out["result"]["passages"]] == [p["chunk_id"] for p in plain], (
        "an unusable reply leaves retrieval as it is without a transform"
    )


def test_settings_for_the_eval_parse_and_refuse_unknown_fields() -> None:
    from reground.evals.runs.retrieval import settings_with

    s = settings_with(["query_transform=topics", "transform_weight=0.5", 'weights={"dense_question": 0.2}'])
    assert s.query_transform == "topics" and s.transform_weight == 0.5
    assert s.weights["dense_question"] == 0.2
    assert s.weights["lexical_history"] == RetrievalSettings().weights["lexical_history"], "the others keep defaults"
    with pytest.raises(ValueError, match="use FIELD=VALUE"):
        settings_with(["nope=1"])
    with pytest.raises(ValueError, match="unknown query transform"):
        settings_with(["query_transform=hype"])
