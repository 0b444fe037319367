"""The committed techdocs dev runs (leave-one-corpus-out, extract default) carry no documentation-site markup: no
raw link syntax, admonition or tab markers, language-block markers or macros outside code, in any reply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reground.evals.runs.usefulness import markup_in

RUNS = Path(__file__).resolve().parents[2] / "evals" / "results" / "techdocs_dev"
HELD_OUT = ("reground_loco_fastapi", "reground_loco_uv")


def _replies(run: str) -> list[dict[str, object]]:
    path = RUNS / run / "reground" / "cases.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("run", HELD_OUT)
def test_no_reply_of_a_committed_techdocs_run_carries_site_markup(run: str) -> None:
    rows = _replies(run)
    assert len(rows) >= 50, f"{run}: a full run, not a sample"
    marked = {str(r.get("case_id") or r.get("id")): markup_in(str(r.get("answer") or "")) for r in rows}
    assert {case: kinds for case, kinds in marked.items() if kinds} == {}


def test_markup_in_finds_what_the_run_test_looks_for() -> None:
    assert markup_in("See [the guide](../a.md) for more.") == ["link"]
    assert markup_in('=== "Windows"\n\nRun it.') == ["tab"]
    assert markup_in("!!! note\n    Read this.") == ["admonition"]
    assert markup_in("Use @[APIRouter] here.") == ["macro"]
    assert markup_in("::: pydantic.main.BaseModel options: show_root_heading: true") == ["autodoc"]
    assert markup_in("Docusaurus notes:\n\n::: note\nRead this.") == ["language_block"]  # not an autodoc line
    assert markup_in('Call it:\n\n```python\nitems["a"](x)\n```') == []
