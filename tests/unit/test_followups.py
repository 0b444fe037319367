"""Follow-ups move on: a unit whose calls the previous reply gave is not the reply again (signals/evidence.py,
`gives_again`); when nothing else answers, the turn says the documents do not, instead of repeating itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context

from reground.testing.fake_chat import ScriptedChatModel
from tests.conftest import store_of_rows
from tests.unit.test_code_terms import PAGE

FIRST = "How do I limit the q query parameter to 50 characters?"
FOLLOW_UP = "and does that need anything else?"


def _replies(root: Path, page: str, turns: list[list[dict[str, str]]]) -> list[dict[str, Any]]:
    store, data_dir = store_of_rows(root, "test-followups", [{"doc_id": "query.md", "title": "Query", "text": page}])
    # The judge's triage at 0 and the hand-made ranking: a test of what a follow-up is given, not of the triage.
    context = Context(
        collection="test-followups",
        data_dir=data_dir,
        triage={"judge_hedge_threshold": 0.0, "judge_answer_threshold": 0.0},
        evidence={"unit_ranking": "off"},
        use_clarify=False,
    )
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "t"})
    return [graph.invoke({"messages": messages}, config=config, context=context)["result"] for messages in turns]


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_a_follow_up_gets_what_comes_next_not_the_same_call_in_the_page_s_words(tmp_path: Path) -> None:
    """The earlier reply gave the call in its own words (a person's, another model's): the page's unit holding the
    same call is no answer to what comes next."""
    said = "Put `Query(max_length=50)` inside `Annotated` for `q`: `q: Annotated[str | None, Query(max_length=50)]`."
    earlier = [*_user(FIRST), {"role": "assistant", "content": said}, *_user(FOLLOW_UP)]
    (reply,) = _replies(tmp_path, PAGE, [earlier])
    assert "fastapi dev main.py" in reply["answer"] and "Query(max_length=50)" not in reply["answer"], reply["answer"]


def test_a_follow_up_nothing_new_answers_is_not_given_the_reply_again(tmp_path: Path) -> None:
    only_the_unit = PAGE.split("Run it with")[0]
    first, second = _replies(tmp_path, only_the_unit, [_user(FIRST), _user(FOLLOW_UP)])
    assert first["kind"] == "answer"
    assert second["kind"] == "abstain" and "max_length" not in second["answer"], second["answer"]
