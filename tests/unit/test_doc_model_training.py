"""The documentation models' trainers (evals/train/unit_ranker.py, evals/train/doc_triage.py) on hand-built turns:
every fit reads both readings of a turn (without an LLM and with its rewrites), every held-out figure is given per
reading, and the triage's calibrated answer threshold keeps the unanswerable turns it was fitted on under its cap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from reground.evals.train import doc_triage, unit_ranker
from reground.evals.train.unit_ranker import LLM_FREE, REWRITTEN, Turn
from reground.tools.signals.evidence import Evidence

UNITS = 6
ANSWER = "uv sync --frozen"


def turn(case: str, collection: str, signal_feature: int, rng: np.random.Generator) -> Turn:
    """Six units; the one holding the answer stands out only in `signal_feature`."""
    rows = rng.normal(0.0, 1.0, size=(UNITS, len(unit_ranker_features())))
    answer = int(rng.integers(UNITS))
    rows[answer, signal_feature] += 4.0
    texts = [
        f"Run `{ANSWER}` to install the locked versions exactly." if i == answer else f"Section {i} explains a setting."
        for i in range(UNITS)
    ]
    units = [Evidence(text=t, passage=1, score=0.0, lexical=0.0, dense=0.0, order=i) for i, t in enumerate(texts)]
    return Turn(
        case_id=case,
        collection=collection,
        answerability="ANSWERABLE",
        question="how do I install exactly what the lock file says?",
        asked="how do I install exactly what the lock file says?",
        history=[],
        units=units,
        rows=rows.astype(np.float32),
        labels=np.asarray([i == answer for i in range(UNITS)], dtype=np.float32),
        passages=[1] * UNITS,
        baseline=-np.arange(UNITS, dtype=np.float32),
        texts=texts,
        candidate_texts=[" ".join(texts)],
        candidate_doc_ids=["page"],
        must_contain=[ANSWER],
        gold_doc_ids=["page"],
    )


def unit_ranker_features() -> tuple[str, ...]:
    from reground.tools.signals.units import FEATURE_NAMES

    return FEATURE_NAMES


def readings(rng: np.random.Generator) -> dict[str, list[Turn]]:
    """The answer stands out in feature 0 when read without an LLM and in feature 1 once the LLM rewrote it."""
    return {
        name: [turn(f"{c}-{i}", c, feature, rng) for c in ("alpha", "beta") for i in range(30)]
        for name, feature in ((LLM_FREE, 0), (REWRITTEN, 1))
    }


def test_each_held_out_figure_is_given_per_reading_and_the_fit_reads_both() -> None:
    both = readings(np.random.default_rng(0))
    held_out = unit_ranker.leave_one_corpus_out(both)
    assert set(held_out) == {"alpha", "beta"}
    for entry in held_out.values():
        assert entry["trained_on"] in (["alpha"], ["beta"])
        for name in (LLM_FREE, REWRITTEN):
            assert entry[name]["unit_ranker"]["turns"] == 30
            assert entry[name]["unit_ranker"]["best_unit"] > 0.8  # fitted on both readings: right in each


def test_a_ranker_fitted_without_the_rewritten_reading_misses_it() -> None:
    both = readings(np.random.default_rng(1))
    held_out = unit_ranker.leave_one_corpus_out({LLM_FREE: both[LLM_FREE]})
    assert held_out["alpha"][LLM_FREE]["unit_ranker"]["best_unit"] > 0.8
    weights, mean, scale = unit_ranker.fit(both[LLM_FREE])
    rewritten = both[REWRITTEN]
    scores = [((t.rows - mean) / scale) @ weights for t in rewritten]
    assert unit_ranker.measure(rewritten, scores)["best_unit"] < 0.5


def test_the_calibrated_answer_threshold_answers_at_most_the_capped_share_of_unanswerable_turns() -> None:
    rng = np.random.default_rng(2)
    turns = []
    rows = []
    for i in range(200):
        label = ("ANSWERABLE", "UNANSWERABLE", "UNDERSPECIFIED")[i % 3]
        base = turn(f"t{i}", "alpha", 0, rng)
        turns.append(Turn(**{**base.__dict__, "answerability": label}))
        shift = {"ANSWERABLE": 1.0, "UNANSWERABLE": -1.0, "UNDERSPECIFIED": 0.0}[label]
        rows.append(rng.normal(shift, 1.0, size=len(doc_triage_features())))
    x = np.asarray(rows, dtype=np.float32)
    triage = doc_triage.fit_triage(turns, x)
    decided = [triage.decide(r, may_ask_back=False)[0] for r, t in zip(x, turns, strict=True)]
    unanswerable = [d for d, t in zip(decided, turns, strict=True) if t.answerability == "UNANSWERABLE"]
    answered = sum(d == "answer" for d in unanswerable) / len(unanswerable)
    assert answered <= doc_triage.MAX_UNANSWERABLE_ANSWERED + 1 / len(unanswerable)
    assert any(d == "answer" for d, t in zip(decided, turns, strict=True) if t.answerability == "ANSWERABLE")


def doc_triage_features() -> tuple[str, ...]:
    from reground.tools.signals.doc_triage import FEATURE_NAMES

    return FEATURE_NAMES


def test_each_fold_is_fitted_and_measured_on_the_turns_collected_for_it() -> None:
    """With per-fold turns (collected with that fold's chunk ranker), a fold reads only its own: here the answer
    stands out in feature 0 in alpha's fold and feature 1 in beta's, so each fold is right only on its own turns."""
    rng = np.random.default_rng(3)
    main = readings(rng)
    folds = {
        "alpha": {LLM_FREE: [turn(f"{c}-{i}", c, 0, rng) for c in ("alpha", "beta") for i in range(30)]},
        "beta": {LLM_FREE: [turn(f"{c}-{i}", c, 1, rng) for c in ("alpha", "beta") for i in range(30)]},
    }
    held_out = unit_ranker.leave_one_corpus_out(main, folds)
    assert set(held_out["alpha"]) == {"trained_on", LLM_FREE}, "alpha's fold has its one reading, not main's two"
    assert held_out["alpha"][LLM_FREE]["unit_ranker"]["best_unit"] > 0.8
    assert held_out["beta"][LLM_FREE]["unit_ranker"]["best_unit"] > 0.8
    assert set(unit_ranker.leave_one_corpus_out(main)["alpha"]) == {"trained_on", LLM_FREE, REWRITTEN}
    unanswerable = Turn(**{**folds["alpha"][LLM_FREE][0].__dict__, "answerability": "UNANSWERABLE", "must_contain": []})
    assert unit_ranker.answerable({LLM_FREE: [unanswerable]}) == {LLM_FREE: []}


def test_the_triage_trainer_fits_and_measures_each_fold_on_its_own_turns(tmp_path: Path) -> None:
    """The triage trainer's folds read the turns collected for them (`--fold-cache`), not the main collection."""
    import pickle

    rng = np.random.default_rng(4)
    main = readings(rng)
    cache = tmp_path / "main.pkl"
    cache.write_bytes(pickle.dumps(main))
    folds = {held: {LLM_FREE: main[LLM_FREE]} for held in ("alpha", "beta")}
    summary = doc_triage.train(
        tmp_path / "docs.jsonl", tmp_path / "cases.jsonl", data_dir=None, cache=cache, out=tmp_path / "out", folds=folds
    )
    for held in ("alpha", "beta"):
        assert set(summary["leave_one_corpus_out"][held]) == {"trained_on", LLM_FREE}
    assert (tmp_path / "out" / "loco" / "alpha" / "doc_triage.json").is_file()


def test_the_thresholds_read_each_turn_as_a_collection_the_heads_never_saw() -> None:
    from reground.tools.signals.judge import logistic

    rng = np.random.default_rng(3)
    turns, rows = [], []
    for i in range(120):
        collection = ("alpha", "beta", "gamma")[i % 3]
        label = ("ANSWERABLE", "UNANSWERABLE", "UNDERSPECIFIED", "ANSWERABLE")[i % 4]
        base = turn(f"t{i}", collection, 0, rng)
        turns.append(Turn(**{**base.__dict__, "answerability": label}))
        rows.append(rng.normal({"ANSWERABLE": 1.0, "UNANSWERABLE": -1.0}.get(label, 0.0), 1.0, size=10))
    x = np.asarray(rows, dtype=np.float32)
    p_a, _ = doc_triage.unseen_collection_probabilities(turns, x)
    others = [i for i, t in enumerate(turns) if t.collection != "alpha"]
    head_a, _ = doc_triage.fit_heads([turns[i] for i in others], x[others])
    alpha = [i for i, t in enumerate(turns) if t.collection == "alpha"]
    assert [round(p_a[i], 5) for i in alpha] == [round(float(logistic(head_a, x[i])), 5) for i in alpha]
    in_sample, _ = doc_triage.fit_heads(turns, x)
    assert any(abs(p_a[i] - float(logistic(in_sample, x[i]))) > 1e-3 for i in alpha), "not the in-sample fit"
