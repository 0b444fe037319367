"""The ingestion graph: index documents into a collection through the LangGraph server.

Like the indexer graph of LangChain's RAG templates, indexing is its own graph next to the
conversation (`langgraph.json` serves it as `ingest`), so a team can add documents from Studio or
with the SDK:
`client.runs.wait(None, "ingest", input={"documents": [...]}, context={"collection": ...})`.
Documents come inline (`{"doc_id", "title", "text", "url"?, ...metadata}`; the extra keys are the
metadata that scopes retrieval, e.g. `company`, `country`) and/or as paths on the server's disk.
Both go through `reground.tools.ingest.ingest`, the same path as `reground ingest`.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from reground.graph.context import Context, ContextError, apply_env_fallbacks, check_collection
from reground.tools.errors import InputError

_READER = Context.__dataclass_fields__  # the conversation's defaults: ingest where it reads


def _describe(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class IngestContext:
    """Where the ingestion graph writes; unset fields fall back to REGROUND_<FIELD>."""

    collection: str = field(
        default=_READER["collection"].default,
        metadata=_describe("Chroma collection to write into (created if missing), 3-512 characters."),
    )
    data_dir: str = field(
        default="",
        metadata=_describe("Directory of the persistent store; empty = $REGROUND_DATA_DIR or ~/.local/share/reground."),
    )
    chroma_url: str = field(
        default="",
        metadata=_describe("URL of a Chroma server (chroma run); empty = the embedded store in data_dir."),
    )
    max_tokens: int = field(
        default=160,
        metadata=_describe("Maximum tokens per chunk (chunks follow headings and paragraphs)."),
    )
    embedding_model: str = field(
        default=_READER["embedding_model"].default,
        metadata=_describe("Embedding spec; must match the one the conversation graph reads the collection with."),
    )

    def __post_init__(self) -> None:
        apply_env_fallbacks(self)
        check_collection(self.collection)
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 16:
            raise ContextError(f"context field 'max_tokens' must be an integer >= 16, got {self.max_tokens!r}")


class IngestInput(TypedDict, total=False):
    """Inline documents and/or server-side paths (files or folders), and doc_ids to delete first."""

    documents: list[dict[str, Any]]
    paths: list[str]
    delete: list[str]


class IngestOutput(TypedDict, total=False):
    summary: dict[str, Any]


class IngestState(IngestInput, IngestOutput, total=False):
    pass


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
    from reground.tools.embeddings import load_embedder
    from reground.tools.ingest import ingest
    from reground.tools.store import PassageStore

    context = runtime.context

    def on_wait(message: str) -> None:
        runtime.stream_writer({"node": "index_documents", "message": message})

    store = PassageStore.open(
        context.collection,
        data_dir=context.data_dir or None,
        embedder=load_embedder(context.embedding_model),
        chroma_url=context.chroma_url,
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


def build_ingest_graph() -> Any:
    """validate_request → index_documents, compiled without a checkpointer (the server has one)."""
    builder = StateGraph(
        IngestState,
        input_schema=IngestInput,
        output_schema=IngestOutput,
        context_schema=IngestContext,
    )
    builder.add_node("validate_request", validate_request)
    builder.add_node("index_documents", index_documents)
    builder.add_edge(START, "validate_request")
    builder.add_edge("validate_request", "index_documents")
    builder.add_edge("index_documents", END)
    return builder.compile(name="ingest")


graph = build_ingest_graph()
