"""The chat page's ratings as evaluation cases: `reground eval feedback export --out FILE`.

Each rated reply is stored on the LangGraph server (reground/web/turns.py) with the turn as the server ran it. Export
turns them into the doc2dial case schema (evals/data/datasets.py) that `reground eval answers` reads, so a team's real
questions become its regression set:
- a helpful answer or partial answer: its text (citation marks removed) is the gold answer, its cited documents the
  gold documents, labelled ANSWERABLE / PARTIAL;
- a helpful question back, hedge or abstention: no gold answer, labelled UNDERSPECIFIED / UNANSWERABLE (asking or
  declining was right);
- a reply rated not helpful: no gold answer and no label (what would have been right is unknown); the reply and the
  note come along (`rating`, `note`, `reply`) for a person to fill in `gold_answer`.
Every case keeps its scope (`metadata_filter`) and collection (`collection_name`) as extra keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from reground.evals.data.datasets import case_from_dict
from reground.tools.errors import DataError
from reground.tools.text.sentences import strip_citations

from reground.web.turns import FEEDBACK_NAMESPACE

PAGE_SIZE = 100  # store items read per request
HELPFUL_LABELS = {
    "answer": "ANSWERABLE",
    "partial": "PARTIAL",
    "clarify": "UNDERSPECIFIED",
    "hedge": "UNANSWERABLE",
    "abstain": "UNANSWERABLE",
}


def feedback_case(record: Mapping[str, Any]) -> dict[str, Any]:
    """One rated reply as a case row of the doc2dial schema (plus its rating, note, reply and scope)."""
    helpful = record["rating"] == "up"
    kind = str(record.get("kind", "answer"))
    answered = helpful and kind in ("answer", "partial")
    cited = [str(c["doc_id"]) for c in record.get("citations", []) if c.get("doc_id")]
    quotes = [str(c["quote"]) for c in record.get("citations", []) if c.get("quote")]
    row = {
        "case_id": f"feedback-{record['thread_id']}-{record['message_id']}",
        "dial_id": str(record["thread_id"]),
        "domain": str(record.get("collection", "")),
        "history": [{"role": t["role"], "text": t["text"]} for t in record.get("history", [])],
        "question": str(record["question"]),
        "gold_answer": strip_citations(str(record["answer"])) if answered else None,
        "gold_doc_id": cited[0] if answered and cited else "",
        "gold_doc_ids": list(dict.fromkeys(cited)) if answered else [],
        "gold_span": quotes[0] if answered and quotes else "",
        "answerable": answered,
        "answerability": HELPFUL_LABELS.get(kind) if helpful else None,
        "split": "feedback",
        "source": "chat page feedback",
        "rating": record["rating"],
        "note": str(record.get("note", "")),
        "reply": str(record["answer"]),
        "reply_kind": kind,
        "collection_name": str(record.get("collection", "")),
        "metadata_filter": dict(record.get("metadata_filter") or {}),
        "rated_at": record.get("rated_at"),
    }
    case_from_dict(row, where=row["case_id"])  # the schema `eval answers` reads: fail here, not there
    return row


def fetch_feedback(url: str) -> list[dict[str, Any]]:
    """Every rating stored on the LangGraph server at `url`, oldest first."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=None)
    records: list[dict[str, Any]] = []
    offset = 0
    try:
        while True:
            page = client.store.search_items((FEEDBACK_NAMESPACE,), limit=PAGE_SIZE, offset=offset)
            items = page.get("items", [])
            records.extend(dict(item["value"]) for item in items)
            if len(items) < PAGE_SIZE:
                break
            offset += len(items)
    except Exception as exc:  # the SDK's connection and HTTP errors: one line naming the server
        raise DataError(f"cannot read the ratings from the server at {url}: {' '.join(str(exc).split())}") from exc
    return sorted(records, key=lambda r: (r.get("rated_at") or 0, r.get("message_id", "")))


def write_cases(records: Iterable[Mapping[str, Any]], out: str | Path) -> dict[str, int]:
    """Write the rated turns as a case file; returns how many were helpful / not helpful."""
    rows = [feedback_case(r) for r in records]
    if not rows:
        raise DataError("no rated replies yet: rate replies in the chat page (Helpful / Not helpful) first")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    helpful = sum(row["rating"] == "up" for row in rows)
    return {"cases": len(rows), "helpful": helpful, "not_helpful": len(rows) - helpful}
