"""Pieces of `reground eval retrieval` that need no store: near-duplicate documents and the --set parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reground.evals.runs.retrieval import near_duplicates, parse_setting


def test_near_duplicates_pairs_versions_of_a_page_and_nothing_else(tmp_path: Path) -> None:
    body = "How the Retirement Estimator Works. The estimator gives estimates from your earnings record. " * 5
    docs = [
        {"doc_id": "est#1", "title": "Estimator", "text": "Retirement Estimator\n" + body},
        {"doc_id": "est#2", "title": "Estimator", "text": body},
        {"doc_id": "other", "title": "Other", "text": body.upper()},  # same length, every letter changed
        {"doc_id": "short", "title": "Short", "text": "A short page."},
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    twins = near_duplicates(path, max_distance=100)
    assert twins == {"est#1": {"est#2"}, "est#2": {"est#1"}}, "a heading apart: twins; other words: not"
    assert near_duplicates(path, max_distance=5) == {}


def test_parse_setting_reads_json_values_and_names_the_fields() -> None:
    assert parse_setting("transform_weight=0.5") == ("transform_weight", 0.5)
    assert parse_setting("query_transform=hyde") == ("query_transform", "hyde")
    assert parse_setting("detect_topic_shift=false") == ("detect_topic_shift", False)
    with pytest.raises(ValueError, match=r"FIELD one of .*chunk_k"):
        parse_setting("chunk_k")
