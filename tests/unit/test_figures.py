"""No reply may state a figure its passages do not hold (issue 29, item 2): figures are normalised and compared,
and a written reply with a figure its cited passage lacks fails its groundedness check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context
from reground.tools.signals.figures import extract_figures, unsupported_figures
from reground.tools.tuning.stores import INGEST

from reground.testing.fake_chat import ScriptedChatModel

GLASSES = (
    "Employees who work at a screen can claim glasses for screen work. The company pays up to 80 EUR towards "
    "glasses for screen work in Germany. Submit the optician's invoice within thirty days."
)


def _values(text: str) -> list[tuple[str, str]]:
    return [(f.value, f.unit) for f in extract_figures(text)]


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("EUR 80", "80 EUR"),
        ("€80", "80 euros"),
        ("30 days", "thirty days"),
        ("1,000 EUR", "1000 EUR"),
        ("1.000 EUR", "EUR 1000"),
        ("80.00 EUR", "80 EUR"),
        ("50%", "50 percent"),
        ("1 March 2024", "2024-03-01"),
        ("March 1, 2024", "01.03.2024"),
        ("9:00", "09:00"),
        ("twenty-five days", "25 days"),
    ],
)
def test_written_forms_of_one_figure_normalise_alike(left: str, right: str) -> None:
    assert _values(left) == _values(right) != []


def test_citation_markers_list_numbers_and_stray_number_words_are_not_figures() -> None:
    assert _values("1. Submit the form [2].\n2. Keep one of the copies.") == []


@pytest.mark.parametrize(
    ("reply", "absent"),
    [
        ("The company pays 500 EUR towards glasses.", ["500 EUR"]),
        ("The company pays 80 USD towards glasses.", ["80 USD"]),  # same number, another currency
        ("The company pays EUR 80 towards glasses.", []),
        ("Send the invoice within 30 days.", []),
        ("Send the invoice within 14 days.", ["14 day"]),
    ],
)
def test_unsupported_figures_against_the_passage(reply: str, absent: list[str]) -> None:
    assert [str(f) for f in unsupported_figures(reply, [GLASSES])] == absent


def test_a_passage_date_supports_its_year_and_a_date_without_year() -> None:
    passage = "Carried-over days expire on 31 March 2025."
    assert unsupported_figures("They expire on March 31 [1].", [passage]) == []
    assert unsupported_figures("They expire in 2025.", [passage]) == []
    assert [str(f) for f in unsupported_figures("They expire on 30 April 2025.", [passage])] == ["30 April 2025"]


@pytest.fixture(scope="module")
def glasses_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    root = tmp_path_factory.mktemp("figures")
    corpus = Path(root) / "docs.jsonl"
    docs = [
        {"doc_id": "glasses-de", "title": "Glasses for screen work (Germany)", "country": "DE", "text": GLASSES},
        {
            "doc_id": "travel",
            "title": "Business travel",
            "country": "all",
            "text": "Book trains in second class through the travel portal. Receipts are due within 30 days.",
        },
    ]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    store = PassageStore.open("test-figures", data_dir=root / "store", create=True)
    assert not ingest([corpus], store, progress=False, max_tokens=INGEST.chunk_tokens).errors
    return store, str(root / "store")


def _turn(reply: str, glasses_store: tuple[Any, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """One written-style turn whose answer is `reply`; (the checked draft, the turn's result)."""
    store, data_dir = glasses_store
    context = Context(
        collection="test-figures",
        data_dir=data_dir,
        answer_style="write",
        use_principle_refinement=False,
        groundedness={"max_reground_attempts": 0, "use_llm_groundedness_judge": False},
        refinement={"quote_when_unchecked": False},
    )
    model = ScriptedChatModel(script={"answer": [reply]})
    graph = build_graph(chat_model=model, store=store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "t"})
    question = "How much does the company pay towards glasses for screen work in Germany?"
    out = graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)
    return dict(graph.get_state(config).values["draft"]), out["result"]


def test_a_written_reply_with_a_figure_its_passage_lacks_fails_groundedness(glasses_store: tuple[Any, str]) -> None:
    draft, result = _turn("The company pays 500 EUR towards glasses for screen work in Germany [1].", glasses_store)
    assert draft["groundedness"] == 0.0
    assert draft["groundedness_parts"] == {"figures": 0.0}
    assert draft["unsupported_claims"] == ["the figure '500 EUR' is not in the cited passages"]
    assert result["passed"] is False
    assert "500" not in result["answer"]


def test_the_faithful_figure_passes(glasses_store: tuple[Any, str]) -> None:
    draft, result = _turn(
        "The company pays up to 80 EUR towards glasses for screen work in Germany [1].", glasses_store
    )
    assert "figures" not in draft["groundedness_parts"]
    assert draft["unsupported_claims"] == []
    assert result["passed"] is True, (draft, result)


def test_a_written_reply_that_echoes_the_prompt_fails_groundedness(glasses_store: tuple[Any, str]) -> None:
    """A weak model sometimes answers with the prompt's scaffolding; it is grounded in nothing the documents say."""
    echo = (
        "The user's last message: how much does the company pay towards glasses? The passage sentences closest to "
        "this question (use them if they answer it): up to 80 EUR."
    )
    draft, result = _turn(echo, glasses_store)
    assert draft["groundedness"] == 0.0 and draft["groundedness_parts"] == {"prompt_echo": 0.0}
    assert "repeats the prompt's own words" in draft["unsupported_claims"][0]
    assert result["passed"] is False and "user's last message" not in result["answer"].lower()


def test_prompt_echo_finds_the_scaffolding_not_ordinary_words() -> None:
    from reground.prompts import answer as answer_prompts
    from reground.tools.signals.scoring import prompt_echo

    templates = [answer_prompts.SHARED_PREFIX, Context().prompts.answer_prompt, answer_prompts.EVIDENCE]
    assert prompt_echo("The user's last message: how many days?", templates) == "the user's last message"
    assert prompt_echo("You get 30 working days of paid annual leave per year [1].", templates) == ""
    assert prompt_echo("Yes, the last message you got from HR holds: you can carry over five days.", templates) == ""
    assert prompt_echo("Say it in the passages' own words.", templates) == "the passages' own words"
