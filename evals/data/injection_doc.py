"""One generated document of the injection suites (evals/data/injection_suites.py, evals/data/injection_families.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent  # the suites sit beside this module
SUITE_DIR = DATA / "injection"  # the suite `python -m reground.evals.runs.injection` reads by default
POISONED = "poisoned"  # a line's label: it reads as the organisation's own text (evals/data/injection_families.py)


@dataclass
class Doc:
    """One generated document: its lines (text, injected?), two questions, and the injection's payload markers."""

    doc_id: str
    title: str
    url: str
    style: str
    # (text, injected?): True, False, or "poisoned", "glued" / "glued_fact" (injected / real, on the line before)
    lines: list[tuple[str, bool | str]] = field(default_factory=list)
    cases: list[dict[str, Any]] = field(default_factory=list)
    payloads: list[str] = field(default_factory=list)
    html: str | None = None  # an HTML page (pages/<doc_id>.html, its doc id with the suffix) instead of a record

    @property
    def loaded_id(self) -> str:
        """The doc id the loaders give it: a record's own, a page's file name."""
        return f"{self.doc_id}.html" if self.html is not None else self.doc_id


POISONED = "poisoned"  # a line's label: it reads as the organisation's own text (evals/data/injection_families.py)
