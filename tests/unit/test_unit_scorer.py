"""The unit scorer as the unit ranker's last input (signals/unit_scorer.py, signals/units.py): a ranker whose weights
name it reads the scorer's logit for every unit, from the `REGROUND_DOC_MODELS` folder's scorer when one is set.
The scorer here is the shipped reader's own graph (the same inputs and `logit` output as a fitted scorer's)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from reground.tools.adapters.cross_encoder import READER_FILE, shipped_reader
from reground.tools.signals.evidence import Evidence
from reground.tools.signals.unit_scorer import SCORER_FEATURE, UNIT_SCORER_FILE, shipped_unit_scorer
from reground.tools.signals.units import DOC_MODELS_ENV, FEATURE_NAMES, UnitRanker, rank_units
from reground.tools.types import Passage

QUESTION = "how do I turn the lifespan protocol off?"
TEXTS = (
    "The lifespan protocol runs as a sibling task alongside your main application.",
    "To disable the lifespan protocol, set the lifespan option to off:\n```bash\nuvicorn main:app --lifespan off\n```",
    "Uvicorn is an ASGI web server implementation for Python.",
)


@pytest.fixture
def fold_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A documentation models folder whose scorer is the reader's graph."""
    reader = Path(str(resources.files("reground") / "data" / "judge" / READER_FILE))
    shutil.copyfile(reader, tmp_path / UNIT_SCORER_FILE)
    monkeypatch.setenv(DOC_MODELS_ENV, str(tmp_path))
    shipped_unit_scorer.cache_clear()
    yield tmp_path
    shipped_unit_scorer.cache_clear()


def _units() -> tuple[list[Evidence], list[Passage]]:
    units = [Evidence(text=t, passage=i + 1, score=0.5, lexical=0.5, dense=0.5, order=i) for i, t in enumerate(TEXTS)]
    passages = [
        Passage(chunk_id=f"c{i}", doc_id="lifespan.md", title="Lifespan", section="", url="", position=i, text=t)
        for i, t in enumerate(TEXTS)
    ]
    return units, passages


def test_a_ranker_that_names_the_scorer_ranks_by_its_logit(fold_folder: Path) -> None:
    units, passages = _units()
    weights = np.zeros(len(FEATURE_NAMES) + 1, dtype=np.float32)
    weights[-1] = 1.0  # the scorer's logit alone
    ranker = UnitRanker(weights=weights, mean=np.zeros_like(weights), scale=np.ones_like(weights))
    assert ranker.reads_scorer and ranker.to_json()["features"][-1] == SCORER_FEATURE
    ranked = rank_units(ranker, QUESTION, units, passages)
    logits = shipped_reader().logits(QUESTION, list(TEXTS))
    assert [u.text for u in ranked] == [TEXTS[i] for i in np.argsort(-logits, kind="stable")]
    assert [u.unit_score for u in ranked] == pytest.approx(sorted(logits.tolist(), reverse=True), abs=1e-5)


def test_a_ranker_without_the_scorer_never_loads_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DOC_MODELS_ENV, str(tmp_path))  # no scorer there: loading it would fail
    shipped_unit_scorer.cache_clear()
    units, passages = _units()
    weights = np.ones(len(FEATURE_NAMES), dtype=np.float32)
    ranker = UnitRanker(weights=weights, mean=np.zeros_like(weights), scale=np.ones_like(weights))
    assert not ranker.reads_scorer
    assert len(rank_units(ranker, QUESTION, units, passages)) == len(TEXTS)


def test_the_ranker_file_must_name_its_features(tmp_path: Path) -> None:
    data = UnitRanker(weights=np.ones(7), mean=np.zeros(7), scale=np.ones(7)).to_json()
    assert UnitRanker.from_json(data).reads_scorer
    data["features"] = [*FEATURE_NAMES, "judge"]
    with pytest.raises(ValueError, match="scorer"):
        UnitRanker.from_json(data)


def test_a_missing_scorer_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DOC_MODELS_ENV, str(tmp_path))
    shipped_unit_scorer.cache_clear()
    with pytest.raises(FileNotFoundError, match=UNIT_SCORER_FILE):
        shipped_unit_scorer()
    shipped_unit_scorer.cache_clear()
