"""Shared fixtures: a small real store (MiniLM + Chroma + BM25 in a temp dir) of HR articles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
    from reground.tools.ingest import ingest
    from reground.tools.store import PassageStore

    data_dir = tmp_path_factory.mktemp("store")
    store = PassageStore.open("test-hr", data_dir=data_dir, create=True)
    summary = ingest([hr_corpus], store, progress=False)
    assert not summary.errors
    return str(data_dir)


@pytest.fixture(scope="session")
def hr_store(hr_store_dir: str) -> Any:
    from reground.tools.store import PassageStore

    return PassageStore.open("test-hr", data_dir=hr_store_dir)
