"""The ingestion graph: index documents into a collection through the LangGraph server.

Like the indexer graph of LangChain's RAG templates, indexing is its own graph next to the
conversation (`langgraph.json` serves it as `ingest`), so a team can add documents from Studio or
with the SDK:
`client.runs.wait(None, "ingest", input={"documents": [...]}, context={"collection": ...})`.
Documents come inline (`{"doc_id", "title", "text", "url"?, ...metadata}`; the extra keys are the
metadata that scopes retrieval, e.g. `company`, `country`) and/or as paths on the server's disk.
Both go through `reground.tools.stores.ingest.ingest`, the same path as `reground ingest`. This module only wires: the
nodes are in nodes/ingest.py, the state in nodes/state.py, the context (IngestContext) in nodes/context.py.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from reground.nodes.context import IngestContext
from reground.nodes.ingest import IngestInputError, index_documents, validate_request
from reground.nodes.state import IngestInput, IngestOutput, IngestState

__all__ = ["IngestContext", "IngestInputError", "build_ingest_graph", "graph"]


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
