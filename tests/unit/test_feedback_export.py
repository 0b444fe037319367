"""Ratings from the chat page become cases `reground eval answers` reads (evals/data/feedback.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from reground.evals.data.datasets import load_cases
from reground.evals.data.feedback import feedback_case, write_cases
from reground.tools.errors import DataError

QUOTE = "You can carry over up to 5 unused days."


def _record(rating: str, kind: str = "answer", **extra: Any) -> dict[str, Any]:
    return {
        "thread_id": "t1",
        "message_id": f"m-{rating}-{kind}",
        "rating": rating,
        "note": "",
        "question": "Can I carry unused days over?",
        "history": [{"role": "user", "text": "How much leave?"}, {"role": "agent", "text": "30 days [1]."}],
        "answer": "You can carry over up to 5 unused days [1].",
        "kind": kind,
        "passed": True,
        "citations": [{"number": 1, "doc_id": "annual-leave-de", "title": "Leave", "chunk_id": "c1", "quote": QUOTE}],
        "passage_doc_ids": ["annual-leave-de"],
        "collection": "demo-hr",
        "metadata_filter": {"country": "DE"},
        "rated_at": 1.0,
        **extra,
    }


def test_a_helpful_answer_becomes_a_case_with_its_reply_as_the_gold_answer() -> None:
    row = feedback_case(_record("up"))
    assert row["gold_answer"] == "You can carry over up to 5 unused days."
    assert (row["gold_doc_id"], row["gold_doc_ids"]) == ("annual-leave-de", ["annual-leave-de"])
    assert row["gold_span"] == "You can carry over up to 5 unused days."
    assert row["answerable"] is True and row["answerability"] == "ANSWERABLE"
    assert row["history"][1] == {"role": "agent", "text": "30 days [1]."}
    assert row["metadata_filter"] == {"country": "DE"} and row["collection_name"] == "demo-hr"


@pytest.mark.parametrize(
    ("rating", "kind", "label"),
    [
        ("up", "partial", "PARTIAL"),
        ("up", "clarify", "UNDERSPECIFIED"),
        ("up", "hedge", "UNANSWERABLE"),
        ("up", "abstain", "UNANSWERABLE"),
        ("down", "answer", None),
        ("down", "abstain", None),
    ],
)
def test_labels_follow_the_rating_and_the_reply_kind(rating: str, kind: str, label: str | None) -> None:
    row = feedback_case(_record(rating, kind, note="should say 31 March"))
    assert row["answerability"] == label
    assert (row["gold_answer"] is not None) == (rating == "up" and kind in ("answer", "partial"))
    assert row["rating"] == rating and row["note"] == "should say 31 March" and row["reply_kind"] == kind


def test_the_written_file_is_a_case_file_eval_answers_reads(tmp_path: Path) -> None:
    out = tmp_path / "cases" / "feedback.jsonl"
    counts = write_cases([_record("up"), _record("down")], out)
    assert counts == {"cases": 2, "helpful": 1, "not_helpful": 1}
    cases = load_cases(out)
    assert [c.case_id for c in cases] == ["feedback-t1-m-up-answer", "feedback-t1-m-down-answer"]
    assert cases[0].gold_answer and cases[0].is_followup and cases[0].answerability == "ANSWERABLE"
    assert cases[1].gold_answer is None and cases[1].extra["rating"] == "down"


def test_no_ratings_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no rated replies"):
        write_cases([], tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()
