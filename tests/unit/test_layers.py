"""The layer contracts, enforced on every run of the suite (CI runs it).

tools/ talk to the outside world and know nothing of the graph; prompts/ are data; nodes/ decide, owning the
turn's state and context types, and never see the wiring; graph/ wires nodes; evals/ measure through the public API
(`reground`, graph/, tools/, and the state and context types); the CLI uses the public API and graph, not nodes.
No module imports itself back through others, and no two sibling folders import each other.
The checker reads the source with `ast`, so it sees every import: module level, inside functions, under
`if TYPE_CHECKING:`, `import reground` (what it re-exports) and `importlib.import_module("...")` alike.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Source folder -> installed package (pyproject.toml's package-dir).
LAYERS = {
    "graph": "reground.graph",
    "nodes": "reground.nodes",
    "tools": "reground.tools",
    "prompts": "reground.prompts",
    "evals": "reground.evals",
    "reground": "reground",
}
# Names the top-level package re-exports, resolved to the module they come from; `import reground` reaches both.
PUBLIC_ALIASES = {"reground.Context": "reground.nodes.context", "reground.build_graph": "reground.graph.builder"}
CLI = ("reground.cli", "reground.commands", "reground.__main__")
TYPES = ("reground.nodes.state", "reground.nodes.context")  # the turn's state and context: public types
TESTING = "reground.testing"


@dataclass(frozen=True)
class Rule:
    """Modules of `layer` may not import `forbidden` (prefixes), except the `allowed` ones."""

    layer: str
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    why: str = ""


RULES = (
    Rule(
        "reground.tools",
        ("reground.graph", "reground.nodes", "reground.evals", TESTING, *CLI),
        why="tools talk to the outside world and know nothing of the graph, nodes, evals, test doubles or CLI",
    ),
    Rule("reground.prompts", ("reground",), allowed=("reground.prompts",), why="prompts import nothing of the project"),
    Rule(
        "reground.nodes",
        ("reground.graph", "reground.evals", TESTING, *CLI),
        why="nodes own the state and context types and never see the wiring",
    ),
    Rule(
        "reground.evals",
        ("reground.nodes", *CLI),
        allowed=TYPES,
        why="evals use the public API (graph, tools, state and context types), not nodes or CLI modules",
    ),
    Rule("reground.graph", ("reground.evals", TESTING, *CLI), why="the graph does not depend on evals, tests or CLI"),
    *(
        Rule(cli, ("reground.nodes",), allowed=TYPES, why="the CLI uses the public API and the graph, not nodes")
        for cli in CLI
    ),
    Rule(TESTING, ("reground.graph", "reground.nodes", "reground.evals", *CLI), why="a test double stands alone"),
)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def module_name(path: Path, root: Path) -> str | None:
    """The installed module name of a source file, or None when it is outside every layer."""
    relative = path.relative_to(root)
    package = LAYERS.get(relative.parts[0])
    if package is None:
        return None
    parts = [*package.split("."), *relative.parts[1:]]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) for every import in the tree; `from pkg import name` counts as importing `pkg.name`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                targets = sorted(PUBLIC_ALIASES.values()) if alias.name == "reground" else [alias.name]
                found.extend((node.lineno, target) for target in targets)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:  # `from pkg import name` imports pkg.name (a submodule or an attribute)
                name = f"{base}.{alias.name}"
                found.append((node.lineno, PUBLIC_ALIASES.get(name, name)))
        elif isinstance(node, ast.Call) and (target := _dynamic_import(node)):
            found.append((node.lineno, target))
    return found


def _dynamic_import(call: ast.Call) -> str | None:
    """The module `importlib.import_module(...)` or `__import__(...)` names: a constant, or an f-string's constant
    prefix up to its last dot (`f"reground.commands.{group}"` imports from reground.commands)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("import_module", "__import__") or not call.args:
        return None
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, ast.JoinedStr) and first.values and isinstance(first.values[0], ast.Constant):
        prefix = str(first.values[0].value)
        return prefix.rpartition(".")[0] or None
    return None


def source_modules(root: Path) -> Iterator[tuple[str, Path]]:
    """(module name, path) of every source file under the layers."""
    for folder in LAYERS:
        for path in sorted((root / folder).rglob("*.py")):
            module = module_name(path, root)
            if module is not None:
                yield module, path


def import_violations(root: Path) -> list[str]:
    """Every forbidden import under `root` as 'path:line: module imports target (why)'."""
    problems: list[str] = []
    for module, path in source_modules(root):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        reported: set[int] = set()  # one report per import statement: its first forbidden name
        for line, target in imported_modules(tree, module, path.name == "__init__.py"):
            rule = _broken_rule(module, target)
            if rule is not None and line not in reported:
                reported.add(line)
                problems.append(f"{path.relative_to(root)}:{line}: {module} imports {target} ({rule.why})")
    return sorted(problems)


def module_graph(root: Path) -> dict[str, set[str]]:
    """Project module -> the project modules it imports (an attribute resolved to its module)."""
    paths = dict(source_modules(root))
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets = set()
        for _, target in imported_modules(tree, module, path.name == "__init__.py"):
            while target and target not in paths:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):  # a package's own parent
                targets.add(target)
        graph[module] = targets
    return graph


def import_cycles(root: Path) -> list[str]:
    """Every set of modules that import each other round (a strongly connected component), as 'a -> b -> a'."""
    graph = module_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(" -> ".join([*sorted(component), min(component)]))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(cycles)


def _folder(module: str, graph: dict[str, set[str]]) -> str:
    """The package a module lives in (a package's __init__ is its own folder)."""
    is_package = any(other.startswith(module + ".") for other in graph)
    return module if is_package else module.rpartition(".")[0]


def folder_loops(root: Path) -> list[str]:
    """Pairs of sibling folders (neither inside the other) that import each other, each with one import each way."""
    graph = module_graph(root)
    example: dict[tuple[str, str], str] = {}
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = _folder(module, graph), _folder(target, graph)
            if a != b and not _under(a, b) and not _under(b, a):
                example.setdefault((a, b), f"{module} imports {target}")
    return sorted(f"{a} <-> {b}: {example[a, b]}; {example[b, a]}" for a, b in example if a < b and (b, a) in example)


def _broken_rule(module: str, target: str) -> Rule | None:
    for rule in RULES:
        if not _under(module, rule.layer) or _under(target, rule.layer):
            continue
        if any(_under(target, f) for f in rule.forbidden) and not any(_under(target, a) for a in rule.allowed):
            return rule
    return None


def test_the_source_tree_keeps_every_layer_contract() -> None:
    assert import_violations(REPO) == []


def test_no_module_or_folder_imports_itself_back() -> None:
    assert import_cycles(REPO) == []
    assert folder_loops(REPO) == []


def write_tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.mark.parametrize(
    ("relative", "source", "reported"),
    [
        (
            "tools/clients.py",
            """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from reground.nodes.context import Context
            """,
            "reground.tools.clients imports reground.nodes.context",
        ),
        ("tools/x.py", "from reground import Context\n", "reground.tools.x imports reground.nodes.context"),
        ("prompts/p.py", "from reground.tools.types import Passage\n", "reground.prompts.p imports reground.tools"),
        ("nodes/n.py", "from reground.graph.builder import run_config\n", "imports reground.graph.builder"),
        ("tools/bare.py", "import reground\n", "reground.tools.bare imports reground.graph.builder"),
        (
            "evals/runs/dyn.py",
            "import importlib\nNODE = importlib.import_module('reground.nodes.answer')\n",
            "reground.evals.runs.dyn imports reground.nodes.answer",
        ),
        ("reground/commands/c.py", "from reground.nodes.triage import triage\n", "imports reground.nodes.triage"),
        ("nodes/s.py", "from reground.testing.fake_chat import ScriptedChatModel\n", "imports reground.testing"),
        ("nodes/m.py", "from ..graph import builder\n", "reground.nodes.m imports reground.graph.builder"),
        (
            "evals/train/e.py",
            """
            def run() -> None:
                from reground.nodes.keywords import lexical_keywords
            """,
            "reground.evals.train.e imports reground.nodes.keywords",
        ),
        ("evals/perf/b.py", "import reground.commands.conversation\n", "imports reground.commands.conversation"),
    ],
)
def test_a_forbidden_import_is_reported(tmp_path: Path, relative: str, source: str, reported: str) -> None:
    write_tree(tmp_path, {relative: source})
    problems = import_violations(tmp_path)
    assert len(problems) >= 1 and all(relative in p for p in problems), problems
    assert any(reported in p for p in problems), problems


def test_allowed_imports_are_not_reported(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "nodes/ok.py": "from reground.nodes.state import State\nfrom reground.nodes.context import Context\n"
            "from reground.tools.adapters.chat import CallStats\nfrom reground.prompts import answer\n",
            "prompts/ok.py": "from reground.prompts import answer\nimport string\n",
            "evals/data/ok.py": "from reground.graph.builder import build_graph\nfrom reground.tools import types\n",
            "tools/ok.py": "from reground.tools.errors import InputError\n",
            "graph/ok.py": "from reground.nodes.answer import answer\n",
        },
    )
    assert import_violations(tmp_path) == []


def test_a_planted_module_cycle_is_reported(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "tools/a.py": "from reground.tools.b import helper\n",
            "tools/b.py": "def helper() -> None:\n    from reground.tools.c import other\n",
            "tools/c.py": "import reground.tools.a\n",
            "tools/d.py": "from reground.tools.a import x\n",  # imports into the cycle, not part of it
        },
    )
    assert import_cycles(tmp_path) == ["reground.tools.a -> reground.tools.b -> reground.tools.c -> reground.tools.a"]


def test_a_planted_folder_loop_is_reported_but_a_package_and_its_parent_are_not(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "tools/__init__.py": "",
            "tools/errors.py": "",
            "tools/services.py": "from reground.tools.stores.store import open\n",
            "tools/stores/__init__.py": "",
            "tools/stores/store.py": "from reground.tools.errors import E\nfrom reground.tools.text.split import s\n",
            "tools/text/__init__.py": "",
            "tools/text/split.py": "from reground.tools.signals.flags import f\n",
            "tools/signals/__init__.py": "",
            "tools/signals/flags.py": "from reground.tools.text.words import w\n",
            "tools/text/words.py": "",
        },
    )
    assert import_cycles(tmp_path) == []
    assert folder_loops(tmp_path) == [
        "reground.tools.signals <-> reground.tools.text: reground.tools.signals.flags imports "
        "reground.tools.text.words; reground.tools.text.split imports reground.tools.signals.flags"
    ]
