"""Where reground keeps its data (stores), cache (assembled models) and run state (server URLs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

CALIBRATION_FILE = "calibration.json"  # written by `reground eval calibrate`


def data_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The store directory: the override, else $REGROUND_DATA_DIR, else ~/.local/share/reground."""
    raw = str(override) if override else os.environ.get("REGROUND_DATA_DIR", "")
    path = Path(raw).expanduser() if raw else Path.home() / ".local" / "share" / "reground"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Assembled model files and seeded tokenizer caches: $REGROUND_CACHE_DIR or ~/.cache/reground."""
    raw = os.environ.get("REGROUND_CACHE_DIR", "")
    path = Path(raw).expanduser() if raw else Path.home() / ".cache" / "reground"
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_dir(data: str | os.PathLike[str] | None = None) -> Path:
    """Run state (the local LLM server's record, pid, URL and log): $REGROUND_STATE_DIR, else <data_dir>/run.

    It follows the data directory the user chose (the override, else $REGROUND_DATA_DIR), so two users
    or two data dirs on one account each have their own server record and never stop or reuse each
    other's server.
    """
    raw = os.environ.get("REGROUND_STATE_DIR", "")
    path = Path(raw).expanduser() if raw else data_dir(data) / "run"
    path.mkdir(parents=True, exist_ok=True)
    return path


def read_calibrated_value(
    name: str,
    path: str | os.PathLike[str] | None = None,
    *,
    low: float = 0.0,
    high: float = 1.0,
    collection: str = "",
) -> float | None:
    """A value `reground eval calibrate` wrote (e.g. "groundedness_threshold", "support_threshold"), or None when
    there is no (valid) calibration file or it holds no value in [low, high] for `name`. A value calibrated for
    `collection` (`--for-collection`: the file's "collections" entry of that name) wins over the file's own.

    Default path: `<data_dir>/calibration.json` ($REGROUND_DATA_DIR or ~/.local/share/reground).
    """
    file = Path(path) if path else data_dir() / CALIBRATION_FILE
    try:
        calibration = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(calibration, dict):
        return None
    scoped = calibration.get("collections")
    own = scoped.get(collection) if collection and isinstance(scoped, dict) else None
    for source in (own, calibration):
        value = source.get(name) if isinstance(source, dict) else None
        if not isinstance(value, bool) and isinstance(value, int | float) and low <= value <= high:
            return float(value)
    return None


def read_calibrated_threshold(path: str | os.PathLike[str] | None = None, collection: str = "") -> float | None:
    """The calibrated groundedness threshold, or None when there is no (valid) calibration file."""
    return read_calibrated_value("groundedness_threshold", path, collection=collection)
