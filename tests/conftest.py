"""Shared fixtures: a small real store (MiniLM + Chroma + BM25 in a temp dir) of HR articles."""

from __future__ import annotations

import functools
import inspect
import json
import shutil
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from reground.tools.tuning.stores import INGEST

HR_DOCS = [
    {
        "doc_id": "annual-leave-de",
        "title": "Annual leave (Germany)",
        "url": "https://hr.example/leave/de",
        "country": "DE",
        "employment_type": "full-time",
        "text": "# Entitlement\n\nFull-time employees in Germany get 30 days of paid annual leave per calendar "
        "year (Urlaubsanspruch). Part-time employees get a pro-rata share.\n\n# Carry-over\n\n"
        "You can carry over up to 5 unused days of annual leave to the next year. Carried-over days "
        "expire on 31 March.",
    },
    {
        "doc_id": "annual-leave-us",
        "title": "Paid time off (United States)",
        "url": "https://hr.example/leave/us",
        "country": "US",
        "employment_type": "full-time",
        "text": "# Entitlement\n\nFull-time employees in the United States get 20 days of paid time off per "
        "year, accrued monthly.\n\n# Carry-over\n\nUp to 10 unused days of paid time off roll over to the "
        "next year; there is no expiry date.",
    },
    {
        "doc_id": "sick-pay-all",
        "title": "Sick leave and sick pay",
        "url": "https://hr.example/sick",
        "country": "all",
        "employment_type": "all",
        "text": "# Reporting sick\n\nTell your manager before 10:00 on the first day of illness. From the fourth "
        "day you need a doctor's certificate.\n\n# Pay\n\nYou receive full pay for the first six weeks of illness.",
    },
    {
        "doc_id": "travel-all",
        "title": "Business travel and expenses",
        "url": "https://hr.example/travel",
        "country": "all",
        "employment_type": "all",
        "text": "# Booking\n\nBook trains in second class and flights in economy through the travel portal.\n\n"
        "# Expenses\n\nSubmit receipts in the expense portal within 30 days of the trip. Approved expenses are "
        "paid with your next salary.",
    },
]


@pytest.fixture(scope="session")
def hr_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "hr.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in HR_DOCS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def hr_store_dir(tmp_path_factory: pytest.TempPathFactory, hr_corpus: Path) -> str:
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    data_dir = tmp_path_factory.mktemp("store")
    store = PassageStore.open("test-hr", data_dir=data_dir, create=True)
    summary = ingest([hr_corpus], store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert not summary.errors
    return str(data_dir)


@pytest.fixture(scope="session")
def hr_store(hr_store_dir: str) -> Any:
    from reground.tools.stores.store import PassageStore

    return PassageStore.open("test-hr", data_dir=hr_store_dir)


# Lanes: `make test` runs everything; `make test-fast` runs `-m "not slow and not integration"` on tests/unit.
# Every test under tests/integration is `integration`. A test is `slow` when it, or a fixture it uses, builds a
# real MiniLM + Chroma store (or takes the shared embedder): its source calls one of these, or a helper of its own
# module that does (found to a fixed point, so a helper calling a helper counts). Unit tests that embed a few texts
# with MiniLM directly stay in the fast lane (about a second).
INTEGRATION_DIR = Path(__file__).resolve().parent / "integration"
REAL_STORE_CALLS = (
    "PassageStore",
    "ingest(",
    "ingest_paths(",
    "get_embedder(",
    "embed_passages(",
    "run_ingest(",
    "store_of_rows(",
)


def _source(func: Any) -> str:
    try:
        return inspect.getsource(func)
    except (OSError, TypeError):
        return ""


@functools.cache
def _slow_calls(module: types.ModuleType) -> tuple[str, ...]:
    """REAL_STORE_CALLS plus `name(` for each function of `module` whose source makes one of those calls."""
    helpers = {
        name: _source(obj)
        for name, obj in vars(module).items()
        if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("test_")
    }
    calls = set(REAL_STORE_CALLS)
    grew = True
    while grew:
        found = {f"{name}(" for name, source in helpers.items() if any(call in source for call in calls)}
        grew = not found <= calls
        calls |= found
    return tuple(sorted(calls))


def _builds_a_real_store(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    function = getattr(item, "function", None)
    if module is None or function is None:
        return False
    funcs = [function]
    fixture_info = getattr(item, "_fixtureinfo", None)
    for definitions in getattr(fixture_info, "name2fixturedefs", {}).values():
        funcs.extend(d.func for d in definitions)
    calls = _slow_calls(module)
    return any(call in _source(func) for func in funcs for call in calls)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)
        elif _builds_a_real_store(item):
            item.add_marker(pytest.mark.slow)


def copy_of_hr_store(hr_store_dir: str, tmp_path_factory: pytest.TempPathFactory, label: str) -> str:
    """A copy of the HR store for one test module (the CLI writes threads.sqlite and collections next to it)."""
    target = tmp_path_factory.mktemp(label) / "store"
    shutil.copytree(hr_store_dir, target)
    return str(target)


def store_of_rows(root: Path, collection: str, rows: Iterable[Mapping[str, Any]]) -> tuple[Any, str]:
    """A real store holding these documents (one JSON line each, ingested as a user would), and its data dir."""
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    corpus = root / "docs.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    store = PassageStore.open(collection, data_dir=root / "data", create=True)
    assert not ingest([corpus], store, progress=False, max_tokens=INGEST.chunk_tokens).errors
    return store, str(root / "data")
