"""The layer contracts, enforced on every run of the suite (CI runs it).

tools/ talk to the outside world and know nothing of the graph; prompts/ are data; nodes/ decide and see the
graph only through its state and context types; evals/ measure through the public API, like a user would.
The checker reads the source with `ast`, so it sees every import: module level, inside functions and under
`if TYPE_CHECKING:` alike.
"""

from __future__ import annotations

import ast
import textwrap
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
# Names the top-level package re-exports, resolved to the module they come from.
PUBLIC_ALIASES = {"reground.Context": "reground.graph.context", "reground.build_graph": "reground.graph.builder"}
CLI = ("reground.cli", "reground.commands", "reground.__main__")


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
        ("reground.graph", "reground.nodes", "reground.evals", *CLI),
        why="tools talk to the outside world and know nothing of the graph, nodes, evals or CLI",
    ),
    Rule("reground.prompts", ("reground",), allowed=("reground.prompts",), why="prompts import nothing of the project"),
    Rule(
        "reground.nodes",
        ("reground.graph", "reground.evals", *CLI),
        allowed=("reground.graph.state", "reground.graph.context"),
        why="nodes use the graph only for its state and context types",
    ),
    Rule("reground.evals", ("reground.nodes", *CLI), why="evals use the public API, not nodes or CLI modules"),
    Rule("reground.graph", ("reground.evals", *CLI), why="the graph does not depend on evals or the CLI"),
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
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:  # `from pkg import name` imports pkg.name (a submodule or an attribute)
                name = f"{base}.{alias.name}"
                found.append((node.lineno, PUBLIC_ALIASES.get(name, name)))
    return found


def import_violations(root: Path) -> list[str]:
    """Every forbidden import under `root` as 'path:line: module imports target (why)'."""
    problems: list[str] = []
    for folder in LAYERS:
        for path in sorted((root / folder).rglob("*.py")):
            module = module_name(path, root)
            if module is None:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            reported: set[int] = set()  # one report per import statement: its first forbidden name
            for line, target in imported_modules(tree, module, path.name == "__init__.py"):
                rule = _broken_rule(module, target)
                if rule is not None and line not in reported:
                    reported.add(line)
                    problems.append(f"{path.relative_to(root)}:{line}: {module} imports {target} ({rule.why})")
    return sorted(problems)


def _broken_rule(module: str, target: str) -> Rule | None:
    for rule in RULES:
        if not _under(module, rule.layer) or _under(target, rule.layer):
            continue
        if any(_under(target, f) for f in rule.forbidden) and not any(_under(target, a) for a in rule.allowed):
            return rule
    return None


def test_the_source_tree_keeps_every_layer_contract() -> None:
    assert import_violations(REPO) == []


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
                from reground.graph.context import Context
            """,
            "reground.tools.clients imports reground.graph.context",
        ),
        ("tools/x.py", "from reground import Context\n", "reground.tools.x imports reground.graph.context"),
        ("prompts/p.py", "from reground.tools.types import Passage\n", "reground.prompts.p imports reground.tools"),
        ("nodes/n.py", "from reground.graph.builder import run_config\n", "imports reground.graph.builder"),
        ("nodes/m.py", "from ..graph import builder\n", "reground.nodes.m imports reground.graph.builder"),
        (
            "evals/e.py",
            """
            def run() -> None:
                from reground.nodes.keywords import lexical_keywords
            """,
            "reground.evals.e imports reground.nodes.keywords",
        ),
        ("evals/b.py", "import reground.commands.conversation\n", "imports reground.commands.conversation"),
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
            "nodes/ok.py": "from reground.graph.state import State\nfrom reground.graph.context import Context\n"
            "from reground.tools.chat import CallStats\nfrom reground.prompts import answer\n",
            "prompts/ok.py": "from reground.prompts import answer\nimport string\n",
            "evals/ok.py": "from reground.graph.builder import build_graph\nfrom reground.tools import retrieval\n",
            "tools/ok.py": "from reground.tools.errors import InputError\n",
            "graph/ok.py": "from reground.nodes.answer import answer\n",
        },
    )
    assert import_violations(tmp_path) == []
