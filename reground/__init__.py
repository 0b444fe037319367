"""reground: faithful conversational question answering over your own documents, as a LangGraph graph."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Context", "__version__", "build_graph"]

if TYPE_CHECKING:
    from reground.graph.builder import build_graph
    from reground.nodes.context import Context


def __getattr__(name: str) -> Any:
    # Lazy so that `import reground` (e.g. for the CLI's --help) does not import LangGraph.
    if name == "build_graph":
        from reground.graph.builder import build_graph

        return build_graph
    if name == "Context":
        from reground.nodes.context import Context

        return Context
    raise AttributeError(name)
