"""The ask-back model (tools/signals/ask_back.py): its shipped weights and their guards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from reground.tools.signals import ask_back
from reground.tools.signals.ask_back import FEATURE_NAMES, AskBackModel, ask_back_features, shipped_ask_back


def test_the_shipped_model_loads_with_its_pinned_digest_and_reads_every_feature() -> None:
    model = shipped_ask_back()
    assert len(model.weights) == len(model.mean) == len(model.scale) == len(FEATURE_NAMES)
    assert 0.0 < model.threshold < 1.0


def test_the_card_beside_the_weights_names_their_digest_and_the_command_that_trains_them() -> None:
    from reground.tools.signals.ask_back import ASK_BACK_SHA256, ask_back_path

    card = ask_back_path().with_name("ASK_BACK_CARD.md").read_text()
    assert ASK_BACK_SHA256 in card and "python -m reground.evals.train.ask_back" in card


def test_an_unresolved_reference_among_several_fitting_documents_reads_as_more_underspecified() -> None:
    model = shipped_ask_back()
    common = {"answerable": 0.2, "support": 1.0, "coverage": 0.5}
    named = ask_back_features("What awards has Meryl Streep received?", [], references=0, readings=1, **common)
    unnamed = ask_back_features("What awards has the actor received?", [], references=1, readings=4, **common)
    assert model.probability(unnamed) > model.probability(named)


def test_weights_written_for_other_features_are_refused() -> None:
    text = shipped_ask_back().to_json().replace('"readings"', '"documents"')
    with pytest.raises(ValueError, match="this code reads"):
        AskBackModel.from_json(text)


def test_weights_that_do_not_match_their_pinned_digest_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = shipped_ask_back()
    tampered = tmp_path / "ask_back.json"
    tampered.write_text(
        AskBackModel(model.weights, model.bias, model.mean, model.scale, threshold=0.0).to_json() + "\n"
    )
    monkeypatch.setattr(ask_back, "ask_back_path", lambda: tampered)
    shipped_ask_back.cache_clear()
    try:
        with pytest.raises(ValueError, match="pinned sha256"):
            shipped_ask_back()
    finally:
        shipped_ask_back.cache_clear()


def test_a_model_round_trips_through_its_json() -> None:
    model = AskBackModel(
        weights=np.arange(len(FEATURE_NAMES), dtype=np.float32),
        bias=-1.5,
        mean=np.zeros(len(FEATURE_NAMES), dtype=np.float32),
        scale=np.ones(len(FEATURE_NAMES), dtype=np.float32),
        threshold=0.25,
    )
    again = AskBackModel.from_json(model.to_json())
    row = np.ones(len(FEATURE_NAMES), dtype=np.float32)
    assert again.threshold == 0.25 and again.probability(row) == pytest.approx(model.probability(row))
