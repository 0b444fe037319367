"""A run's JSONL records: read back (a killed run's torn last line ignored), the newest row per case."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; a torn last line (a run killed mid-write) is ignored."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def latest_by_case(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last row per case id (a retried case appends a newer row)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        out[str(row.get("case_id"))] = row
    return out
