"""The leave-one-corpus-out command's parts that need no graph (evals/train/loco.py): one collection a file, the
figures of a collection's replies, the mean and the worst over collections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reground.evals.data.datasets import load_cases
from reground.evals.train import loco
from reground.prompts.injection import CAUTION


def write_set(folder: Path, collections: dict[str, int]) -> None:
    """A documentation set: per collection one page and `turns` turns of one conversation."""
    folder.mkdir(parents=True)
    docs, cases = [], []
    for name, turns in collections.items():
        docs.append({"doc_id": f"{name}/index.md", "title": name, "text": f"# {name}\n\nRun `{name} go`.", "url": ""})
        docs[-1]["collection"] = name
        history: list[dict[str, str]] = []
        for k in range(turns):
            cases.append(
                {
                    "case_id": f"{name}-d_{k + 1}",
                    "dial_id": f"{name}-d",
                    "history": list(history),
                    "question": f"question {k}",
                    "gold_answer": f"Run `{name} go`.",
                    "gold_doc_id": f"{name}/index.md",
                    "gold_doc_ids": [f"{name}/index.md"],
                    "answerability": "ANSWERABLE",
                    "collection": name,
                    "must_contain": [f"{name} go"],
                }
            )
            history += [{"role": "user", "text": f"question {k}"}, {"role": "agent", "text": f"Run `{name} go`."}]
    (folder / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "cases_dev.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))


def test_split_sets_writes_one_collection_a_file_and_keeps_unchanged_files(tmp_path: Path) -> None:
    write_set(tmp_path / "a", {"alpha": 2, "beta": 1})
    write_set(tmp_path / "b", {"gamma": 3})
    split = loco.split_sets([tmp_path / "a", tmp_path / "b"], tmp_path / "work")
    assert sorted(split) == ["alpha", "beta", "gamma"]
    docs, cases = split["gamma"]
    assert [json.loads(line)["collection"] for line in docs.read_text().splitlines()] == ["gamma"]
    assert len(load_cases(cases)) == 3
    before = docs.stat().st_mtime_ns
    loco.split_sets([tmp_path / "a", tmp_path / "b"], tmp_path / "work")
    assert docs.stat().st_mtime_ns == before  # the same content: the eval store's name stays


def test_split_sets_names_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"docs\.jsonl"):
        loco.split_sets([tmp_path / "empty"], tmp_path / "work")


def row(case: str, label: str, behaviour: str, answer: str, must: list[str], seconds: float = 0.1) -> dict:
    return {
        "case_id": case,
        "answerability": label,
        "behaviour": behaviour,
        "answer": answer,
        "must_contain": must,
        "passages": [{"text": "first"}, {"text": "uv sync --frozen here"}, {"text": "third"}, {"text": "uv lock"}],
        "seconds": seconds,
        "error": None,
    }


def test_fold_figures_read_usefulness_behaviour_repeats_markup_and_cautions(tmp_path: Path) -> None:
    write_set(tmp_path / "s", {"uv": 4})
    _, cases = loco.split_sets([tmp_path / "s"], tmp_path / "work")["uv"]
    caution = CAUTION.format(reasons="it gives a contact")
    rows = [
        row("uv-d_1", "ANSWERABLE", "answer", "Use `uv sync --frozen`.", ["uv sync --frozen"], 0.2),
        row("uv-d_2", "ANSWERABLE", "hedge", "Use `uv sync --frozen`.", ["uv sync --frozen"], 0.4),  # repeats turn 1
        row("uv-d_3", "ANSWERABLE", "clarify", "Which one do you use?", ["uv lock"], 0.3),  # 4th passage: not read
        row("uv-d_4", "UNANSWERABLE", "answer", f"{caution}\nSee [the docs](https://x).", [], 0.1),
    ]
    figures = loco.fold_figures(rows, load_cases(cases))
    assert figures["answerable_useful"] == pytest.approx(2 / 3, abs=1e-4)
    assert figures["answerable_stated"] == pytest.approx(1 / 3, abs=1e-4)
    assert figures["answerable_asked_back"] == pytest.approx(1 / 3, abs=1e-4)
    assert figures["answerable_three_passages"] == pytest.approx(2 / 3, abs=1e-4)
    assert figures["unanswerable_answered"] == 1.0
    assert figures["underspecified_asked_back"] is None  # no such turn
    assert (figures["followups"], figures["followups_repeating"]) == (3, 1)
    assert figures["replies_with_markup"] == 1 and figures["replies_cautioned"] == 1
    assert figures["median_turn_s"] == pytest.approx(0.25)


def test_across_gives_the_mean_and_the_worst_in_each_figures_direction() -> None:
    folds = {
        "a": {"answerable_useful": 0.8, "unanswerable_answered": 0.0, "replies_with_markup": 1, "median_turn_s": 0.1},
        "b": {"answerable_useful": 0.4, "unanswerable_answered": 0.25, "replies_with_markup": 2, "median_turn_s": 0.3},
    }
    out = loco.across(folds)
    assert out["mean"]["answerable_useful"] == pytest.approx(0.6)
    assert out["worst"]["answerable_useful"] == 0.4
    assert out["worst"]["unanswerable_answered"] == 0.25
    assert out["mean"]["replies_with_markup"] == 3  # a count is summed
    assert out["worst"]["median_turn_s"] == 0.3
    assert "| **worst** |" in loco.table({"collections": {}, **out})
