"""A page that answers once per language or platform: the reply comes from one variant and names the others' calls
(tools/signals/variants_named.py), instead of asking which one the user runs."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context
from reground.tools.signals.evidence import Evidence
from reground.tools.signals.variants_named import named_variants, one_variant, what_it_says, without_named_variants
from reground.tools.types import Passage

from reground.testing.fake_chat import ScriptedChatModel
from tests.conftest import store_of_rows


def _passage(n: int, text: str, variant: str = "") -> Passage:
    return Passage(
        chunk_id=f"c{n}",
        doc_id="state",
        title="State",
        section="Reading the state",
        url="",
        position=n,
        text=text,
        metadata={"variant": variant} if variant else {},
    )


PY = "Read the current state with `graph.get_state(config)`."
JS = "Read the current state with `await graph.getState(config)`."
SHELL = "Install it with the script:\n```sh\ncurl -LsSf https://example.org/install.sh | sh\n```"
PLAIN = "The state holds the values of the last step."
PASSAGES = [_passage(1, PY, "Python"), _passage(2, JS, "JavaScript"), _passage(3, PLAIN)]


def test_the_reply_keeps_the_best_unit_s_variant_and_names_the_other_with_its_call() -> None:
    evidence = [Evidence(PY, 1, 2.0, 1.0, 0.8), Evidence(JS, 2, 1.9, 1.0, 0.8), Evidence(PLAIN, 3, 1.0, 0.5, 0.5)]
    kept, others = one_variant(evidence, PASSAGES)
    assert [e.text for e in kept] == [PY, PLAIN] and [e.text for e in others] == [JS]
    assert named_variants(others, PASSAGES) == "In JavaScript: `await graph.getState(config)`."


def test_one_variant_or_none_changes_nothing() -> None:
    evidence = [Evidence(PY, 1, 2.0, 1.0, 0.8), Evidence(PLAIN, 3, 1.0, 0.5, 0.5)]
    assert one_variant(evidence, PASSAGES) == (evidence, [])


def test_what_a_unit_says_is_its_inline_code_or_its_block_s_first_line() -> None:
    assert what_it_says(JS) == "`await graph.getState(config)`"
    assert what_it_says(SHELL) == "`curl -LsSf https://example.org/install.sh | sh`"
    assert what_it_says(PLAIN) == ""
    assert what_it_says("Run `" + "x" * 100 + "`.") == "", "too long to name in passing"


TABS = """# Persistence

## Reading the state

Every step of a run saves a checkpoint.

=== "Python"

    Read the current state with `graph.get_state(config)`:

    ```python
    snapshot = graph.get_state(config)
    ```

=== "JavaScript"

    Read the current state with `await graph.getState(config)`:

    ```typescript
    const snapshot = await graph.getState(config);
    ```

## Deleting a thread

Delete a thread's checkpoints with `checkpointer.delete_thread(thread_id)`.
"""


@pytest.fixture(scope="module")
def tabs_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    return store_of_rows(
        tmp_path_factory.mktemp("variants"),
        "test-variants",
        [{"doc_id": "persistence.md", "title": "Persistence", "text": TABS}],
    )


def test_a_question_that_names_no_language_is_answered_from_one_tab_naming_the_other(
    tabs_store: tuple[Any, str],
) -> None:
    store, data_dir = tabs_store
    # The judge's triage with its thresholds at 0 and the hand-made ranking: a test of how the tabs are answered, not
    # of the documentation triage (which abstains on one short page).
    context = Context(
        collection="test-variants",
        data_dir=data_dir,
        triage={"judge_hedge_threshold": 0.0, "judge_answer_threshold": 0.0},
        evidence={"unit_ranking": "off"},
    )
    graph = build_graph(chat_model=ScriptedChatModel(), store=store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "t"})
    question = "How do I read the current state of a thread?"
    result = graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)[
        "result"
    ]
    assert result["kind"] != "clarify", result["answer"]
    said = result["answer"]
    assert ("get_state(config)" in said and "In JavaScript: `" in said) or (
        "getState(config)" in said and "In Python: `" in said
    ), said


def test_a_named_call_the_passages_hold_is_quoted_and_an_invented_one_is_not() -> None:
    named = "Read the current state with `graph.get_state(config)`. In JavaScript: `await graph.getState(config)`."
    assert without_named_variants(named, PASSAGES) == PY
    invented = "In JavaScript: `graph.readState()`."
    assert without_named_variants(invented, PASSAGES) == invented
