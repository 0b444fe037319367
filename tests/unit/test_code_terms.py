"""The code-aware groundedness check: a written reply that names a call, parameter, flag or command its passages do
not hold fails, and the loops replace it with the passages' own unit instead of passing it."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context
from reground.tools.signals.code_terms import code_names, unsupported_code

from reground.testing.fake_chat import ScriptedChatModel
from tests.conftest import store_of_rows

FENCE = "`" * 3
PAGE = """# Query Parameters and String Validations

## Add `Query` to `Annotated` in the `q` parameter

Add `Query` inside of `Annotated`, and set the parameter `max_length` to `50`:

```python
from typing import Annotated

from fastapi import FastAPI, Query

app = FastAPI()


@app.get("/items/")
async def read_items(q: Annotated[str | None, Query(max_length=50)] = None):
    return {"q": q}
```

Run it with `fastapi dev main.py`.
"""
INVENTED = (
    'Add `Query(max_len=50)` to the parameter [1]:\n```python\n@app.get("/items/")\n'
    'async def read_items(q: Annotated[str | None, Query(max_len=50)] = None):\n    return {"q": q}\n```'
)
FAITHFUL = (
    'Add `Query` inside `Annotated` and set `max_length` to 50 [1]:\n```python\n@app.get("/items/")\n'
    'async def read_items(q: Annotated[str | None, Query(max_length=50)] = None):\n    return {"q": q}\n```'
)


@pytest.mark.parametrize(
    ("reply", "absent"),
    [
        (INVENTED, ["max_len", "Query(max_len=50)"]),
        (FAITHFUL, []),
        (
            "Start it with `fastapi run main.py --reload` or `uvicorn.run(app)`.",
            ["fastapi run main.py --reload", "uvicorn.run(app)"],
        ),
        ("Use the `--dev` flag: `uv add --dev pytest`.", ["--dev", "uv add --dev pytest"]),
    ],
)
def test_unsupported_code_against_the_page(reply: str, absent: list[str]) -> None:
    assert unsupported_code(reply, [PAGE]) == absent


def test_a_pinned_hash_is_no_name_and_its_tail_is_not_one_either() -> None:
    """`actions/checkout@3d3c42e5...`: a hex pin starts with a digit; the letters inside it are not an identifier of
    their own (the written-reply check reported "d3c42e5..." as code the passages lack, though they hold the pin)."""
    pin = "3d3c42e5aac5ba805825da76410c181273ba90b1"
    reply = f"{FENCE}yaml\nsteps:\n  - uses: actions/checkout@{pin} # v7.0.1\n{FENCE}"
    assert not any(pin[1:] in name for name in code_names(reply))
    assert unsupported_code(reply, [reply]) == []


def test_comments_strings_keywords_and_the_users_own_names_are_not_checked() -> None:
    reply = '```python\nasync def get_db():  # open a session\n    return "a fresh connection"\n```'
    assert "session" not in code_names(reply) and "fresh" not in code_names(reply)
    assert "async" not in code_names(reply) and "def" not in code_names(reply)
    assert unsupported_code(reply, [PAGE], ["my get_db dependency opens the session"]) == []
    assert unsupported_code(reply, [PAGE]) == ["get_db"]


@pytest.fixture(scope="module")
def docs_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    rows = [{"doc_id": "query.md", "title": "Query", "text": PAGE}]
    return store_of_rows(tmp_path_factory.mktemp("code-terms"), "test-code-terms", rows)


def _turn(reply: str, docs_store: tuple[Any, str], *, quote: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    store, data_dir = docs_store
    context = Context(
        collection="test-code-terms",
        data_dir=data_dir,
        answer_style="write",
        use_principle_refinement=False,
        use_clarify=False,
        # The judge's triage with its thresholds at 0, so the turn answers and the model writes: this is a test of
        # the check, not of the documentation triage (which hedges on one short page).
        triage={"judge_hedge_threshold": 0.0, "judge_answer_threshold": 0.0},
        evidence={"unit_ranking": "off"},
        groundedness={"max_reground_attempts": 0, "use_llm_groundedness_judge": False},
        refinement={"quote_when_unchecked": quote},
    )
    graph = build_graph(
        chat_model=ScriptedChatModel(script={"answer": [reply]}), store=store, checkpointer=InMemorySaver()
    )
    config = run_config(context, configurable={"thread_id": "t"})
    question = "How do I limit the q query parameter to 50 characters?"
    out = graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)
    return dict(graph.get_state(config).values["draft"]), out["result"]


def test_a_written_reply_with_an_invented_call_fails_and_is_never_passed(docs_store: tuple[Any, str]) -> None:
    draft, result = _turn(INVENTED, docs_store, quote=False)
    assert draft["groundedness"] == 0.0 and draft["groundedness_parts"] == {"code": 0.0}
    assert "the code 'max_len' is not in the cited passages" in draft["unsupported_claims"]
    assert result["passed"] is False and "max_len" not in result["answer"]


def test_the_loops_mend_an_invented_call_with_the_pages_own_unit(docs_store: tuple[Any, str]) -> None:
    _, result = _turn(INVENTED, docs_store, quote=True)
    assert "max_len=" not in result["answer"] and "Query(max_length=50)" in result["answer"]


def test_the_faithful_code_passes(docs_store: tuple[Any, str]) -> None:
    draft, result = _turn(FAITHFUL, docs_store, quote=False)
    assert "code" not in draft["groundedness_parts"] and result["passed"] is True, (draft, result)
    assert result["answer"].startswith("Add `Query` inside `Annotated`")  # the model's own words, not an extract


def test_a_written_reply_keeps_its_code_lines_and_a_cut_block_is_closed() -> None:
    from reground.nodes.answer import cap_sentences

    reply = "Set it like this:\n```python\ndef f():\n    return 1\n```\nThen restart the server. It works now. Really."
    capped = cap_sentences(reply, 2)
    assert capped == "Set it like this:\n```python\ndef f():\n    return 1\n```\nThen restart the server."
    assert cap_sentences("Run this:\n```console\n$ uv sync", 2) == "Run this:\n```console\n$ uv sync\n```"
