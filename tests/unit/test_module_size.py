"""Modules a reader can hold in their head: no module in graph/, nodes/ or tools/ runs past MAX_LINES lines (the
developers' guide aims at one job per ~150-400 line module; a module past the cap holds several jobs and is split
by job, its old import path re-exporting what users import)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("graph", "nodes", "tools")
MAX_LINES = 600


def oversized(root: Path, limit: int = MAX_LINES) -> list[str]:
    """'path: N lines' for every Python module under the folders longer than `limit` lines."""
    found: list[str] = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                found.append(f"{path.relative_to(root)}: {lines} lines")
    return found


def test_no_module_in_graph_nodes_or_tools_is_over_the_cap() -> None:
    assert oversized(REPO) == [], f"split these modules by job (at most {MAX_LINES} lines each)"


@pytest.mark.parametrize(("lines", "reported"), [(MAX_LINES, False), (MAX_LINES + 1, True)])
def test_a_planted_long_module_is_reported(tmp_path: Path, lines: int, reported: bool) -> None:
    (tmp_path / "tools" / "signals").mkdir(parents=True)
    (tmp_path / "tools" / "signals" / "long.py").write_text("x = None\n" * lines, encoding="utf-8")
    assert oversized(tmp_path) == ([f"tools/signals/long.py: {lines} lines"] if reported else [])
