"""Case and document loaders: the converted doc2dial files and the official MultiDoc2Dial release format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reground.evals.data.datasets import (
    DatasetError,
    load_cases,
    load_corpus,
    load_multidoc2dial,
    write_cases_jsonl,
    write_corpus_jsonl,
)


def _case(dial: str, turn: int, history: int, answer: str | None = "ok") -> dict:
    return {
        "case_id": f"{dial}_{turn}",
        "dial_id": dial,
        "domain": "dmv",
        "history": [{"role": "user" if i % 2 == 0 else "agent", "text": f"t{i}"} for i in range(history)],
        "question": f"question {turn}",
        "gold_answer": answer,
        "gold_doc_id": "doc#1_0",
        "gold_doc_ids": ["doc#1_0"],
        "gold_span_ids": ["3"],
        "gold_span": "span text",
        "answerable": True,
        "gold_doc_in_corpus": True,
        "extra_key": 1,
    }


@pytest.fixture()
def cases_file(tmp_path: Path) -> Path:
    rows = [
        _case("a", 1, 0),
        _case("a", 3, 2),
        _case("a", 5, 4, None),
        _case("b", 1, 0),
        _case("b", 3, 2),
    ]
    rows += [_case(f"c{i}", 1, 0) for i in range(20)]
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    return path


def test_load_cases_fields_and_filters(cases_file: Path) -> None:
    cases = load_cases(cases_file)
    assert len(cases) == 25
    second = cases[1]
    assert second.case_id == "a_3" and second.is_followup
    assert second.history == [{"role": "user", "text": "t0"}, {"role": "agent", "text": "t1"}]
    assert second.history_pairs() == [("user", "t0"), ("agent", "t1")]
    assert second.gold_span_ids == ["3"] and second.gold_doc_in_corpus
    assert [c.case_id for c in load_cases(cases_file, limit=2)] == ["a_1", "a_3"]
    assert len(load_cases(cases_file, only_with_answer=True)) == 24
    assert [c.case_id for c in load_cases(cases_file, only_followups=True)] == ["a_3", "a_5", "b_3"]


def test_seeded_sample_is_reproducible_and_in_file_order(cases_file: Path) -> None:
    one = [c.case_id for c in load_cases(cases_file, limit=6, seed=7)]
    two = [c.case_id for c in load_cases(cases_file, limit=6, seed=7)]
    other = [c.case_id for c in load_cases(cases_file, limit=6, seed=8)]
    order = [c.case_id for c in load_cases(cases_file)]
    assert one == two and one != other and len(set(one)) == 6
    assert one == sorted(one, key=order.index)


def test_round_trip(tmp_path: Path, cases_file: Path) -> None:
    cases = load_cases(cases_file)
    again = load_cases(write_cases_jsonl(cases, tmp_path / "out.jsonl"))
    assert again == cases


def test_bad_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not found"):
        load_cases(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"case_id": "x"}\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl:1: case is missing dial_id, gold_doc_id, question"):
        load_cases(bad)
    bad.write_text("{not json\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl:1: not valid JSON"):
        load_cases(bad)


def test_load_corpus_keeps_extra_keys_as_metadata(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"doc_id": "d1", "title": "T", "domain": "va", "text": "body", "source": "x"}) + "\n")
    docs = load_corpus(path)
    assert docs == [
        {
            "doc_id": "d1",
            "title": "T",
            "text": "body",
            "url": "",
            "metadata": {"domain": "va", "source": "x"},
        }
    ]
    again = load_corpus(write_corpus_jsonl(docs, tmp_path / "copy.jsonl"))
    assert again == docs
    path.write_text(json.dumps({"doc_id": "d1", "title": "T"}) + "\n")
    with pytest.raises(DatasetError, match="without 'text'"):
        load_corpus(path)


# A tiny file in the published MultiDoc2Dial layout: doc_data[domain][doc_id], dial_data[domain] = [dialogues].
MDD_DOCS = {
    "doc_data": {
        "dmv": {
            "License#1_0": {
                "doc_id": "License#1_0",
                "title": "License#1",
                "domain": "dmv",
                "doc_text": "Renew your license online. You need an eye test.",
                "spans": {
                    "1": {
                        "id_sp": "1",
                        "text_sp": "Renew your license online. ",
                        "start_sp": 0,
                        "end_sp": 27,
                    },
                    "2": {
                        "id_sp": "2",
                        "text_sp": "You need an eye test.",
                        "start_sp": 27,
                        "end_sp": 48,
                    },
                },
            }
        },
        "va": {
            "Benefits#2_0": {
                "doc_id": "Benefits#2_0",
                "title": "Benefits#2",
                "domain": "va",
                "doc_text": "Apply for disability benefits.",
                "spans": {"1": {"id_sp": "1", "text_sp": "Apply for disability benefits."}},
            }
        },
    }
}
MDD_DIALS = {
    "dial_data": {
        "dmv": [
            {
                "dial_id": "d1",
                "domain": "dmv",
                "turns": [
                    {
                        "turn_id": 1,
                        "role": "user",
                        "da": "query",
                        "utterance": "How do I renew?",
                        "references": [{"id_sp": "1", "label": "solution", "doc_id": "License#1_0"}],
                    },
                    {
                        "turn_id": 2,
                        "role": "agent",
                        "da": "respond_solution",
                        "utterance": "Online.",
                        "references": [
                            {"id_sp": "2", "label": "solution", "doc_id": "License#1_0"},
                            {"id_sp": "1", "label": "solution", "doc_id": "License#1_0"},
                        ],
                    },
                    {
                        "turn_id": 3,
                        "role": "user",
                        "da": "query",
                        "utterance": "And veterans benefits?",
                        "references": [{"id_sp": "1", "label": "solution", "doc_id": "Benefits#2_0"}],
                    },
                    {
                        "turn_id": 4,
                        "role": "agent",
                        "da": "respond_no_solution",
                        "utterance": "Unfortunately, no relevant information is found.",
                        "references": [],
                    },
                    {
                        "turn_id": 5,
                        "role": "user",
                        "da": "query",
                        "utterance": "Is it in another office?",
                        "references": [{"id_sp": "9", "label": "solution", "doc_id": "Missing#1_0"}],
                    },
                ],
            }
        ]
    }
}


def test_multidoc2dial_release_format(tmp_path: Path) -> None:
    doc_path = tmp_path / "multidoc2dial_doc.json"
    dial_path = tmp_path / "multidoc2dial_dial_validation.json"
    doc_path.write_text(json.dumps(MDD_DOCS))
    dial_path.write_text(json.dumps(MDD_DIALS))
    cases, docs = load_multidoc2dial(doc_path, dial_path)
    assert {d["doc_id"] for d in docs} == {"License#1_0", "Benefits#2_0"}
    assert docs[0]["metadata"]["domain"] == "dmv" and docs[0]["text"].startswith("Renew")
    assert [c.case_id for c in cases] == ["d1_1", "d1_3", "d1_5"]
    first, second, last = cases
    assert first.split == "validation" and first.history == []
    assert first.gold_answer == "Online." and first.gold_doc_id == "License#1_0"
    assert first.gold_span_ids == ["1", "2"]
    assert first.gold_span == "Renew your license online. You need an eye test."
    assert first.answerable and first.gold_doc_in_corpus
    assert [t["role"] for t in second.history] == ["user", "agent"]
    assert second.gold_doc_id == "Benefits#2_0", "an agent turn without references falls back to the user's"
    assert not second.answerable and second.gold_da == "respond_no_solution"
    assert last.gold_answer is None and not last.gold_doc_in_corpus and len(last.history) == 4
    # Same Case format as the converted files: a round trip through write/load keeps everything.
    assert load_cases(write_cases_jsonl(cases, tmp_path / "c.jsonl")) == cases
    assert len(load_multidoc2dial(doc_path, dial_path, only_with_answer=True)[0]) == 2


def test_multidoc2dial_wrong_file(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"something": []}))
    with pytest.raises(DatasetError, match="'doc_data'"):
        load_multidoc2dial(path, path)


def test_mtrag_cases_keep_labels_and_tasks_without_passages(tmp_path: Path) -> None:
    """MTRAG-UN rows: labels read into the case, other keys kept, a null gold document is no document."""
    answerable = {
        **_case("m", 7, 2),
        "task_id": "m<::>7",
        "gold_span": None,
        "answerability": "PARTIAL",
        "collection": "govt",
        "multi_turn": "Follow-up",
        "question_type": ["Factoid", "Summarization"],
    }
    unanswerable = {
        **answerable,
        "case_id": "m_9",
        "gold_doc_id": None,
        "gold_doc_ids": [],
        "gold_doc_in_corpus": False,
        "answerable": False,
        "answerability": "UNANSWERABLE",
        "question_type": "Non-Question",
    }
    path = tmp_path / "mtrag.jsonl"
    path.write_text(json.dumps(answerable) + "\n" + json.dumps(unanswerable) + "\n")
    first, second = load_cases(path)
    assert first.labels() == {
        "answerability": "PARTIAL",
        "collection": "govt",
        "multi_turn": "Follow-up",
        "question_type": ["Factoid", "Summarization"],
    }
    assert first.extra == {"extra_key": 1, "task_id": "m<::>7"} and first.gold_span == ""
    assert second.gold_doc_id == "" and second.gold_doc_ids == [] and not second.gold_doc_in_corpus
    assert second.answerability == "UNANSWERABLE" and second.question_type == ["Non-Question"]
    again = load_cases(write_cases_jsonl([first, second], tmp_path / "again.jsonl"))
    assert again == [first, second]
    assert json.loads((tmp_path / "again.jsonl").read_text().splitlines()[0])["task_id"] == "m<::>7"
    # doc2dial rows carry no labels
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps(_case("a", 1, 0)) + "\n")
    assert load_cases(plain)[0].labels() == {
        "answerability": None,
        "collection": None,
        "multi_turn": None,
        "question_type": [],
    }
