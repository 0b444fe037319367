"""Every example question in the README, asked as written on the demo corpus with the scope it shows (extract
default, scripted model: no LLM call is made), answers with the fact a reader of the README expects.

The leave wordings ask for a figure ("how many days", "how much leave"): the judge, its reader and the MiniLM cosines
all prefer "You can carry over up to 5 unused days of annual leave ..." or a pro-rata rule in hours to the
entitlement, and the reply gives the sentences that state a figure of what is asked (signals/evidence.py,
`figure_answer`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context
from reground.tools.stores.ingest import ingest
from reground.tools.stores.store import PassageStore
from reground.tools.tuning.stores import INGEST

from reground.demo import DEMO_COLLECTION, DEMO_SCOPE, DEMO_TURNS, demo_corpus_path
from reground.testing.fake_chat import ScriptedChatModel

ENTITLEMENT = "30 working days"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    data_dir = tmp_path_factory.mktemp("readme-demo")
    store = PassageStore.open(DEMO_COLLECTION, data_dir=data_dir, create=True)
    ingest([demo_corpus_path()], store, progress=False, max_tokens=INGEST.chunk_tokens)
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    return graph, data_dir


def conversation(
    demo: tuple[Any, Path], scope: dict[str, str], questions: list[str], thread: str
) -> list[dict[str, Any]]:
    graph, data_dir = demo
    context = Context(collection=DEMO_COLLECTION, data_dir=str(data_dir), metadata_filter=scope)
    config = run_config(context, configurable={"thread_id": thread})
    return [
        graph.invoke({"messages": [{"role": "user", "content": q}]}, config=config, context=context)["result"]
        for q in questions
    ]


def test_the_demo_conversation_answers_each_turn(demo: tuple[Any, Path]) -> None:
    replies = conversation(demo, DEMO_SCOPE, list(DEMO_TURNS), "demo")
    assert [r["kind"] for r in replies] == ["answer"] * 3
    assert ENTITLEMENT in replies[0]["answer"]
    assert "5 unused days" in replies[1]["answer"]
    assert "31 March" in replies[2]["answer"]


def test_the_customising_example_names_its_country(demo: tuple[Any, Path]) -> None:
    (reply,) = conversation(demo, {}, ["How many days of annual leave do I get in Germany?"], "germany")
    assert ENTITLEMENT in reply["answer"] and reply["citations"][0]["doc_id"] == "annual-leave-de"


def test_an_opening_that_leans_on_a_pronoun_asks_what_it_refers_to(demo: tuple[Any, Path]) -> None:
    (reply,) = conversation(demo, {}, ["How do I configure it?"], "pronoun")
    assert reply["kind"] == "clarify" and reply["answer"].startswith('What does "it" refer to?')


def test_the_use_it_follow_up_carries_over(demo: tuple[Any, Path]) -> None:
    replies = conversation(
        demo, {"country": "DE"}, ["How many days of annual leave do I get?", "Can I carry them over?"], "use-it"
    )
    assert "5 unused days" in replies[1]["answer"]


def test_the_use_it_opening_gets_the_entitlement(demo: tuple[Any, Path]) -> None:
    (reply,) = conversation(demo, {"country": "DE"}, ["How many days of annual leave do I get?"], "use-it-opening")
    assert ENTITLEMENT in reply["answer"]


def test_the_embedding_example_gets_the_entitlement(demo: tuple[Any, Path]) -> None:
    (reply,) = conversation(demo, {"country": "DE"}, ["How much leave do I get?"], "embedding")
    assert ENTITLEMENT in reply["answer"]
