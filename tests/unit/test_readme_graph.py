"""The README's drawing of the graph is the compiled graph: every edge it shows exists in `graph/builder.py`'s graph,
and every edge of that graph is shown (a route added or dropped in the builder fails here until the README follows).

The drawing is a `text` block of lines `source → target | target (why) → next ...`, `a, b → c` for several sources."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def drawing(text: str) -> str:
    section = text[text.index("\n## The graph\n") :]
    return re.search(r"```text\n(.*?)```", section, re.DOTALL).group(1)  # type: ignore[union-attr]


def drawn_edges(block: str) -> set[tuple[str, str]]:
    """(source, target) for each arrow: each name on the left of an arrow leads to each name on its right."""
    edges: set[tuple[str, str]] = set()
    for line in block.splitlines():
        stages = [re.sub(r"\([^)]*\)", "", stage) for stage in line.split("→")]
        names = [[m for m in re.findall(r"[A-Za-z_]+", stage) if m not in ("or", "hedge")] for stage in stages]
        for sources, targets in itertools.pairwise(names):
            edges |= {(s, "__end__" if t == "END" else t) for s in sources for t in targets}
    return edges


def graph_edges() -> set[tuple[str, str]]:
    from reground.graph.builder import build_graph

    graph = build_graph().get_graph()
    return {(e.source, e.target) for e in graph.edges if e.source != "__start__"}


def test_the_drawing_is_the_compiled_graph() -> None:
    drawn = drawn_edges(drawing((REPO / "README.md").read_text(encoding="utf-8")))
    compiled = graph_edges()
    assert {"missing from the README": compiled - drawn, "not in the graph": drawn - compiled} == {
        "missing from the README": set(),
        "not in the graph": set(),
    }


def test_a_missing_edge_is_found() -> None:
    """The drawing that left out `start_turn → finalize` would fail."""
    old = drawing((REPO / "README.md").read_text(encoding="utf-8"))
    without = old.replace("refine_question | finalize (no question in the input)", "refine_question")
    assert ("start_turn", "finalize") in graph_edges() - drawn_edges(without)
