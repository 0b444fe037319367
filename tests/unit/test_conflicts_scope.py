"""A scope claim is a claim: a page whose scope metadata says "all" (or lists every value) does not override the page
scoped to the user's value; the two disagreeing statements are a conflict, the user's page first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reground.tools.signals.conflicts import conflict_reply, find_conflicts
from reground.tools.signals.scope_claims import scope_breadth, scope_label
from reground.tools.tuning.stores import INGEST

from reground.testing.fake_chat import ScriptedChatModel

NL = {
    "title": "Parental leave in the Netherlands",
    "metadata": {"region": "NL"},
    "text": "Staff based in the Netherlands receive 16 weeks of paid parental leave.",
}
EVERYONE = {
    "title": "Global people handbook",
    "metadata": {"region": "all"},
    "text": "Every Harbourline colleague is entitled to 26 weeks of fully paid parental leave.\n"
    "Parental leave must be requested 8 weeks before it starts.",
}
LISTED = {**EVERYONE, "metadata": {"region": "NL,BE,LU,FR"}, "title": "Benelux and France handbook"}
QUESTION = "How many weeks of parental leave do I get?"


def test_a_page_for_everyone_is_wider_than_the_users_own() -> None:
    scope = {"region": ["NL"]}
    assert scope_breadth({"region": "NL"}, scope) < scope_breadth({"region": "NL,BE"}, scope)
    assert scope_breadth({"region": "NL,BE,LU,FR"}, scope) < scope_breadth({"region": "all"}, scope)
    assert scope_label({"region": "all", "other": "x"}, scope) == "region: all"


def test_the_wider_pages_figure_conflicts_and_the_users_page_comes_first() -> None:
    for wide in (EVERYONE, LISTED):
        passages = [wide, NL]
        # the reply quoted the page for everyone: the user's own page is said first
        [conflict] = find_conflicts(wide["text"].split("\n")[0], QUESTION, passages, scope={"region": "NL"})
        assert conflict.scoped and "16 weeks" in conflict.said.text and "26 weeks" in conflict.other.text
        said = conflict_reply([conflict], passages, scope={"region": "NL"})
        assert said.index("16 weeks") < said.index("26 weeks") and "region: NL" in said
        # the reply quoted the user's page: the wider page's figure is still shown
        [conflict] = find_conflicts(NL["text"], QUESTION, passages, scope={"region": "NL"})
        assert conflict.scoped and "16 weeks" in conflict.said.text and "26 weeks" in conflict.other.text


def test_a_figure_of_something_else_on_the_wider_page_is_no_conflict() -> None:
    # "8 weeks before it starts" is a notice period, not the leave: no conflict with the NL page
    only_notice = {**EVERYONE, "text": "Parental leave must be requested 8 weeks before it starts."}
    assert find_conflicts(NL["text"], QUESTION, [NL, only_notice], scope={"region": "NL"}) == []
    # without a scope nothing is read as a scope claim: differently worded statements stay apart
    assert find_conflicts(NL["text"], QUESTION, [NL, EVERYONE]) == []


def test_the_turn_answers_a_scoped_user_with_the_scoped_figure_and_the_conflict(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from reground.graph.builder import build_graph, run_config
    from reground.nodes.context import Context
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    site = "https://people.harbourline.example"
    docs = [
        {"doc_id": "leave-nl", "title": NL["title"], "url": f"{site}/nl/leave", "region": "NL", "text": NL["text"]},
        {"doc_id": "handbook", "title": EVERYONE["title"], "url": f"{site}/handbook", "region": "all",
         "text": EVERYONE["text"].split("\n")[0] + "\nThe handbook is reviewed every January by the people team."},
        {"doc_id": "leave-be", "title": "Parental leave in Belgium", "url": f"{site}/be/leave", "region": "BE",
         "text": "Staff based in Belgium receive 15 weeks of paid parental leave."},
    ]  # fmt: skip
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    store = PassageStore.open("scoped", data_dir=tmp_path / "data", create=True)
    ingest([corpus], store, progress=False, max_tokens=INGEST.chunk_tokens)
    context = Context(collection="scoped", data_dir=str(tmp_path / "data"), metadata_filter={"region": "NL"})
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "nl"})
    out = graph.invoke({"messages": [{"role": "user", "content": QUESTION}]}, config, context=context)
    result: dict[str, Any] = dict(out["result"])
    answer = result["answer"]
    assert "16 weeks" in answer and "15 weeks" not in answer
    # the page for everyone is in scope too: its 26 weeks is shown as a conflict, after the NL figure
    assert result["conflicts"] and result["conflicts"][0]["scoped"]
    assert answer.index("16 weeks") < answer.index("26 weeks")
