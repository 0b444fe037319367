"""evals/README.md stays a reference: at most MAX_LINES lines, no diary wording ("not adopted", "tried"), and a
commit hash only in a results table's "code" column. Studies measured and left out go to docs/experiments.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = Path("evals") / "README.md"
EXPERIMENTS = Path("docs") / "experiments.md"
MAX_LINES = 300
DIARY = re.compile(r"\bnot adopted\b|\btried\b", re.IGNORECASE)
COMMIT = re.compile(r"`([0-9a-f]{7,40})`")


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def reference_problems(text: str) -> list[str]:
    """'line N: why' for every way `text` stops being a reference."""
    lines = text.splitlines()
    problems = [f"{len(lines)} lines, more than {MAX_LINES}"] if len(lines) > MAX_LINES else []
    header: list[str] = []
    for number, line in enumerate(lines, start=1):
        if match := DIARY.search(line):
            problems.append(f"line {number}: {match.group(0)!r} is diary wording (docs/experiments.md holds studies)")
        is_row = line.lstrip().startswith("|")
        if is_row and (not header or not lines[number - 2].lstrip().startswith("|")):
            header = [cell.lower() for cell in _cells(line)]
        if not is_row:
            header = []
        for found in COMMIT.finditer(line):
            cells = _cells(line) if is_row else []
            in_code = "code" in header and len(cells) == len(header) and found.group(0) in cells[header.index("code")]
            if not in_code:
                problems.append(f"line {number}: commit {found.group(1)} outside a results table's code column")
    return problems


def test_the_evals_readme_is_a_reference() -> None:
    assert reference_problems((REPO / README).read_text(encoding="utf-8")) == []


def test_the_studies_left_out_have_their_table() -> None:
    text = (REPO / EXPERIMENTS).read_text(encoding="utf-8")
    assert "| what was tried | the figure | commit | why not |" in text
    assert "docs/experiments.md" in (REPO / README).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("x\n" * (MAX_LINES + 1), f"{MAX_LINES + 1} lines, more than {MAX_LINES}"),
        ("A listwise loss was tried.\n", "line 1: 'tried' is diary wording"),
        ("Re-fusion (not adopted).\n", "line 1: 'not adopted' is diary wording"),
        ("Latest: `retrieval_dev/`, code `dd2b8b6`.\n", "line 1: commit dd2b8b6 outside"),
        ("| run | r@1 |\n|---|---|\n| `abc1234` | 0.8 |\n", "line 3: commit abc1234 outside"),
    ],
)
def test_planted_diary_text_is_reported(text: str, problem: str) -> None:
    assert any(found.startswith(problem) for found in reference_problems(text)), reference_problems(text)


def test_a_hash_in_the_code_column_is_fine() -> None:
    assert reference_problems("| run | r@1 | code |\n|---|---|---|\n| default | 0.852 | `dd2b8b6` |\n") == []
