"""Where each kind of code lives, read from the source with `ast`: graph/ only wires (its routes are nodes/routes.py's),
no node's module imports another node's module (what several nodes share is in nodes/common.py or nodes/routes.py),
tools/ never read the turn's state, every node function says what it does (Studio shows the docstring), and the
product cites no issue numbers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Modules of nodes/ that hold no node: the shared helpers, the routes, the state and context types.
SHARED = {"__init__", "common", "routes", "state", "context", "context_base", "context_groups", "thread_messages"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def state_keys() -> set[str]:
    """The keys of the turn's State (and its input), from nodes/state.py."""
    keys: set[str] = set()
    for node in _tree(REPO / "nodes" / "state.py").body:
        if isinstance(node, ast.ClassDef) and node.name in ("State", "InputState"):
            keys |= {b.target.id for b in node.body if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name)}
    return keys


def keys_read(tree: ast.AST, keys: set[str]) -> list[tuple[int, str]]:
    """(line, key) for each `x["key"]` or `x.get("key")` whose key is one of `keys`."""
    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            key = node.args[0].value
        if isinstance(key, str) and key in keys:
            found.append((node.lineno, key))
    return found


def is_node_function(fn: ast.FunctionDef) -> bool:
    """A node: a public function of (state, env) or (state, runtime) and nothing else."""
    names = [a.arg for a in fn.args.args]
    return not fn.name.startswith("_") and names in (["state", "env"], ["state", "runtime"])


def node_modules() -> dict[str, Path]:
    """nodes/ modules that define a node function, by module name."""
    out = {}
    for path in sorted((REPO / "nodes").glob("*.py")):
        if path.stem in SHARED:
            continue
        tree = _tree(path)
        if any(isinstance(f, ast.FunctionDef) and is_node_function(f) for f in tree.body):
            out[path.stem] = path
    return out


def imports_of(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_state_keys_are_read_from_the_state_module() -> None:
    keys = state_keys()
    assert {"question", "standalone_question", "retrieval_query", "query_mode", "keywords"} <= keys


def test_no_module_under_tools_reads_a_state_key() -> None:
    """Tools take explicit arguments: a tool that reads `state["standalone_question"]` knows the graph's state."""
    keys = state_keys()
    offenders = [
        f"{path.relative_to(REPO)}:{line} reads {key!r}"
        for path in sorted((REPO / "tools").rglob("*.py"))
        for line, key in keys_read(_tree(path), keys)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_state_key_check_sees_a_tool_that_reads_one() -> None:
    tree = ast.parse('def f(s):\n    return s.get("standalone_question") or s["query_mode"]\n')
    assert [key for _, key in keys_read(tree, state_keys())] == ["standalone_question", "query_mode"]


def test_graph_functions_read_no_state_and_route_only_through_nodes_routes() -> None:
    """graph/ wires: it defines no route and reads no State key; each conditional edge's path is a function of
    nodes/routes.py, whose result (a node's name) is all the graph reads."""
    keys = state_keys()
    for path in sorted((REPO / "graph").glob("*.py")):
        tree = _tree(path)
        assert not keys_read(tree, keys), f"{path.name} reads the turn's state: {keys_read(tree, keys)}"
        routes = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "reground.nodes.routes"
            for alias in node.names
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                assert not node.name.startswith("route"), f"{path.name} defines the route {node.name}"
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_conditional_edges":
                target = node.args[1]
                assert isinstance(target, ast.Name) and target.id in routes, (
                    f"{path.name}:{node.lineno}: a conditional edge's path must be a route of nodes/routes.py"
                )


def test_no_node_module_imports_another_node_module() -> None:
    modules = node_modules()
    assert {"answer", "refine", "reground", "refine_question", "review", "finalize", "triage"} <= set(modules)
    offenders = []
    for name, path in modules.items():
        imported = imports_of(_tree(path))
        offenders += [
            f"nodes/{name}.py imports nodes/{other}.py"
            for other in modules
            if other != name
            and any(i == f"reground.nodes.{other}" or i.startswith(f"reground.nodes.{other}.") for i in imported)
        ]
    assert not offenders, "\n".join(offenders) + "\n(what several nodes share belongs in nodes/common.py)"


def test_every_node_function_has_a_docstring() -> None:
    """Studio shows each node's docstring."""
    missing = [
        f"nodes/{path.name}: {fn.name}"
        for path in sorted((REPO / "nodes").glob("*.py"))
        for fn in _tree(path).body
        if isinstance(fn, ast.FunctionDef) and is_node_function(fn) and not ast.get_docstring(fn)
    ]
    assert not missing, missing


def test_every_graph_node_is_a_documented_node_function() -> None:
    from reground.graph.builder import graph

    undocumented = [
        name for name, spec in graph.builder.nodes.items() if not (getattr(spec.runnable, "func", None).__doc__ or "")
    ]
    assert not undocumented, undocumented


@pytest.mark.parametrize("folder", ["graph", "nodes", "tools", "reground"])
def test_the_product_cites_no_issue_numbers(folder: str) -> None:
    """An issue number means nothing to a reader of the code: say what happened instead."""
    pattern = re.compile(r"\bissues? ?#?\d+", re.IGNORECASE)
    offenders = []
    for path in sorted((REPO / folder).rglob("*")):
        if path.suffix not in (".py", ".js", ".html", ".md") or "__pycache__" in path.parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{path.relative_to(REPO)}: {m.group(0)!r}" for m in pattern.finditer(text)]
    assert not offenders, offenders[:10]


def test_every_package_says_what_it_holds() -> None:
    for init in sorted([*REPO.glob("*/__init__.py"), *REPO.glob("tools/*/__init__.py")]):
        if init.parent.name in ("tests", "examples", "docs"):
            continue
        assert ast.get_docstring(_tree(init)), f"{init.relative_to(REPO)} has no docstring"
