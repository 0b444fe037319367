"""The ingestion graph's nodes: validate a request, then index it with the shared ingestion tool.

Both go through `reground.tools.stores.ingest.ingest`, the same path as `reground ingest`; the wiring is in
graph/ingest_graph.py.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime
from reground.nodes.context import IngestContext
from reground.nodes.state import IngestState
from reground.tools.errors import InputError


class IngestInputError(InputError):
    """An ingestion request is malformed; the message names the document or path."""


def validate_request(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Reject malformed documents and missing paths before anything is written."""
    documents = state.get("documents") or []
    paths = state.get("paths") or []
    delete = state.get("delete") or []
    if not isinstance(documents, list) or not isinstance(paths, list) or not isinstance(delete, list):
        raise IngestInputError("'documents', 'paths' and 'delete' must be lists")
    if not documents and not paths and not delete:
        raise IngestInputError(
            "nothing to ingest: pass {'documents': [{'doc_id', 'title', 'text', ...}]} and/or "
            "{'paths': ['/path/on/the/server']}"
        )
    seen: set[str] = set()
    for index, doc in enumerate(documents):
        if not isinstance(doc, dict):
            raise IngestInputError(f"documents[{index}] must be an object, got {type(doc).__name__}")
        doc_id = doc.get("doc_id")
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise IngestInputError(f"documents[{index}] needs a non-empty string 'doc_id'")
        if not isinstance(doc.get("text"), str) or not doc["text"].strip():
            raise IngestInputError(f"document {doc_id!r} (documents[{index}]) needs a non-empty 'text'")
        for key, value in doc.items():
            if not _filterable(value):
                raise IngestInputError(
                    f"document {doc_id!r}: metadata field {key!r} must be a string, number, boolean "
                    "or a list of them (metadata is what retrieval filters on)"
                )
        if doc_id in seen:
            raise IngestInputError(f"document {doc_id!r} appears twice in 'documents'")
        seen.add(doc_id)
    for raw in paths:
        if not isinstance(raw, str) or not Path(raw).expanduser().exists():
            raise IngestInputError(
                f"path {raw!r} does not exist on the server; paths are read on the server's disk "
                "(send the text inline as 'documents' otherwise)"
            )
    runtime.stream_writer(
        {
            "node": "validate_request",
            "message": f"{len(documents)} inline document(s), {len(paths)} path(s)",
        }
    )
    return {}


def _filterable(value: Any) -> bool:
    scalar = (str, int, float, bool)
    return (
        value is None
        or isinstance(value, scalar)
        or (isinstance(value, list) and all(isinstance(v, scalar) for v in value))
    )


def index_documents(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Write the documents with the shared ingestion tool (chunk, embed, store, lexical index)."""
    from reground.tools.adapters.embeddings import load_embedder
    from reground.tools.stores.factory import open_store
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.vector_store import store_spec

    context = runtime.context

    def on_wait(message: str) -> None:
        runtime.stream_writer({"node": "index_documents", "message": message})

    store = open_store(
        context.store or store_spec(context.data_dir or None, context.chroma_url),
        context.collection,
        embedder=load_embedder(context.embedding_model),
        create=True,
        on_wait=on_wait,
    )
    runtime.stream_writer({"node": "index_documents", "message": f"writing into {context.collection!r}"})
    with tempfile.TemporaryDirectory(prefix="reground-ingest-") as tmp:
        sources: list[Path] = [Path(p).expanduser() for p in state.get("paths") or []]
        documents = state.get("documents") or []
        if documents:
            inline = Path(tmp) / "inline-documents.jsonl"
            inline.write_text("".join(json.dumps(doc) + "\n" for doc in documents), encoding="utf-8")
            sources.insert(0, inline)
        # Runs of this graph (and `reground ingest` processes) into one collection take turns on its write
        # lock; a run that has to wait says so on the custom stream.
        summary = ingest(
            sources,
            store,
            max_tokens=context.max_tokens,
            delete=tuple(state.get("delete") or ()),
            progress=False,
            on_wait=on_wait,
        )
    result = summary_dict(summary)
    result["collection"] = context.collection
    runtime.stream_writer({"node": "index_documents", "message": "done", **_counts(result)})
    return {"summary": result}


def summary_dict(summary: Any) -> dict[str, Any]:
    """An IngestSummary as JSON-safe data (it crosses the server's API)."""
    if hasattr(summary, "as_dict"):
        raw: dict[str, Any] = summary.as_dict()
    elif dataclasses.is_dataclass(summary) and not isinstance(summary, type):
        raw = dataclasses.asdict(summary)
    elif hasattr(summary, "_asdict"):
        raw = dict(summary._asdict())
    else:
        raw = dict(summary)
    return json.loads(json.dumps(raw, default=str))


def _counts(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if isinstance(v, int | float) and not isinstance(v, bool)}
