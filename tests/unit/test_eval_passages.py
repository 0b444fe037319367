"""`python -m reground.evals.runs.passages`: the shares it reports from its per-case rows."""

from __future__ import annotations

from pathlib import Path

from reground.evals.runs.passages import summarize


def test_the_summary_counts_each_systems_hits_and_the_cases_only_one_found() -> None:
    rows = [
        {
            "case_id": "a",
            "followup": False,
            "kind": "answer",
            "reground": True,
            "history_rag": True,
            "reply_token_f1": 1.0,
        },
        {
            "case_id": "b",
            "followup": True,
            "kind": "answer",
            "reground": True,
            "history_rag": False,
            "reply_token_f1": 0.5,
        },
        {
            "case_id": "c",
            "followup": True,
            "kind": "abstain",
            "reground": False,
            "history_rag": False,
            "reply_token_f1": 0,
        },
        {
            "case_id": "d",
            "followup": True,
            "kind": "answer",
            "reground": False,
            "history_rag": True,
            "reply_token_f1": 0.1,
        },
    ]
    summary = summarize(rows, Path("docs.jsonl"), Path("cases.jsonl"), 1.25)
    assert summary["cases"] == 4
    assert summary["gold_doc_in_passages"] == {"reground": 0.5, "history_rag": 0.5}
    assert summary["followups"] == {"n": 3, "reground": 0.3333, "history_rag": 0.3333}
    assert summary["only_reground"] == 1 and summary["only_history_rag"] == 1
    assert summary["reground_reply_token_f1"] == 0.4
    assert summary["docs"] == "docs.jsonl" and summary["seconds"] == 1.2


def test_no_follow_ups_gives_no_share_rather_than_zero() -> None:
    rows = [
        {
            "case_id": "a",
            "followup": False,
            "kind": "answer",
            "reground": True,
            "history_rag": False,
            "reply_token_f1": 0.2,
        }
    ]
    summary = summarize(rows, Path("d"), Path("c"), 0.0)
    assert summary["followups"] == {"n": 0, "reground": None, "history_rag": None}
