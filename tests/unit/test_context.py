"""The groundedness threshold in force: explicit value, environment, calibration file, built-in default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reground.graph.context import DEFAULT_GROUNDEDNESS_THRESHOLD, Context, ContextError


def write_calibration(data_dir: Path, value: float) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "calibration.json").write_text(json.dumps({"groundedness_threshold": value}))


def test_calibration_file_sets_the_threshold_when_nothing_else_does(tmp_path: Path) -> None:
    write_calibration(tmp_path, 0.37)
    context = Context(data_dir=str(tmp_path))
    assert context.groundedness_threshold is None  # constructing a context reads no file (server event loop)
    assert context.resolved_groundedness_threshold() == pytest.approx(0.37)


def test_without_calibration_the_builtin_default_holds(tmp_path: Path) -> None:
    assert Context(data_dir=str(tmp_path)).resolved_groundedness_threshold() == DEFAULT_GROUNDEDNESS_THRESHOLD


def test_explicit_and_environment_values_win_over_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_calibration(tmp_path, 0.37)
    assert Context(data_dir=str(tmp_path), groundedness_threshold=0.8).resolved_groundedness_threshold() == 0.8
    monkeypatch.setenv("REGROUND_GROUNDEDNESS_THRESHOLD", "0.25")
    assert Context(data_dir=str(tmp_path)).resolved_groundedness_threshold() == 0.25


def test_a_threshold_outside_unit_interval_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match="groundedness_threshold"):
        Context(data_dir=str(tmp_path), groundedness_threshold=1.5)
