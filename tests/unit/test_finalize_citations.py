"""Citations of a grounded answer, with and without [n] markers or self-check verdicts."""

from __future__ import annotations

from typing import Any

from reground.nodes.context import CitationSettings
from reground.nodes.finalize import citations_for, supporting_passages

CITING = CitationSettings()

PASSAGES: list[Any] = [
    {
        "doc_id": "carry",
        "chunk_id": "c1",
        "title": "Annual leave",
        "url": "u1",
        "text": "You can carry over up to 5 unused days. Carried-over days expire on 31 March.",
    },
    {
        "doc_id": "days",
        "chunk_id": "c2",
        "title": "Annual leave",
        "url": "u2",
        "text": "Full-time employees in Germany receive 30 working days of paid annual leave per calendar year.",
    },
    {
        "doc_id": "travel",
        "chunk_id": "c3",
        "title": "Travel",
        "url": "u3",
        "text": "Submit travel receipts within 30 days.",
    },
]


def test_markers_win_over_verdicts_and_support() -> None:
    cited = citations_for("You get 30 working days [2].", PASSAGES, helpful=[1], settings=CITING)
    assert [c["number"] for c in cited] == [2]
    assert cited[0]["quote"].startswith("Full-time employees")


def test_verdicts_choose_among_the_passages_that_hold_the_answer() -> None:
    answer = "You receive 30 working days of paid annual leave."
    assert [c["number"] for c in citations_for(answer, PASSAGES, helpful=[2, 3], settings=CITING)] == [2]


def test_a_verdict_or_marker_on_an_unrelated_passage_is_not_a_citation() -> None:
    """The demo's old second turn cited the training-budget policy for a carry-over answer."""
    answer = "You can carry over up to 5 unused days [3]."
    assert [c["doc_id"] for c in citations_for(answer, PASSAGES, helpful=[3], settings=CITING)] == ["carry"]


def test_no_markers_and_no_verdicts_cite_the_passages_that_hold_the_answer() -> None:
    answer = "Full-time employees in Germany receive 30 working days of paid annual leave."
    assert supporting_passages(answer, PASSAGES, settings=CITING) == [2]
    cited = citations_for(answer, PASSAGES, helpful=[], settings=CITING)
    assert [(c["number"], c["doc_id"]) for c in cited] == [(2, "days")]


def test_an_answer_no_passage_holds_gets_no_citation() -> None:
    assert citations_for("Please ask your manager about the team's rota.", PASSAGES, helpful=[], settings=CITING) == []
    assert supporting_passages("", PASSAGES, settings=CITING) == []


def test_a_two_sentence_answer_quotes_both_of_its_sentences_and_nothing_else() -> None:
    """The demo's third turn quoted only the longer of its two sentences, not the 31 March rule it answered with."""
    text = (
        "You can carry over up to 5 unused days.\n\nCarried-over days expire on 31 March. If you were ill, they "
        "stay available for 15 months.\n\nSubmit requests in the portal."
    )
    passage: Any = {**PASSAGES[0], "text": text}
    answer = "Carried-over days expire on 31 March. If you were ill, they stay available for 15 months."
    (cited,) = citations_for(answer, [passage], helpful=[1], settings=CITING)
    assert cited["quote"] == "Carried-over days expire on 31 March. If you were ill, they stay available for 15 months."
    assert cited["quote"] in text
    (single,) = citations_for("Carried-over days expire on 31 March.", [passage], helpful=[1], settings=CITING)
    assert single["quote"] == "Carried-over days expire on 31 March."


def test_an_answer_restating_no_sentence_quotes_the_closest_not_the_passages_first() -> None:
    text = "Carried-over days expire at the end of March. Submit requests in the portal."
    passage: Any = {**PASSAGES[0], "text": text}
    answer = "Days expire; submit in portal before the deadline arrives soon."
    (cited,) = citations_for(answer, [passage], helpful=[1], settings=CITING)
    assert cited["quote"] == "Submit requests in the portal."
