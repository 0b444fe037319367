"""One meaning per type name: no class (or type alias) is defined twice across tools/tuning/, nodes/ and
tools/signals/. A tuned-values dataclass is named for its tuning (`EvidenceTuning`, `BudgetTuning`), so it never
reads as the evidence sentence (`signals.evidence.Evidence`) or the Context's group (`nodes.context.Budgets`)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = (Path("tools") / "tuning", Path("nodes"), Path("tools") / "signals")


def _type_names(tree: ast.Module) -> list[str]:
    """Module-level class names, and module-level CamelCase assignments (type aliases: `Share = Annotated[...]`)."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Name) and target.id[:1].isupper() and not target.id.isupper():
                names.append(target.id)
    return names


def clashing_names(root: Path) -> dict[str, list[str]]:
    """{type name: the modules defining it} for every name defined in more than one module of the folders."""
    where: dict[str, list[str]] = defaultdict(list)
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            for name in dict.fromkeys(_type_names(ast.parse(path.read_text(encoding="utf-8")))):
                where[name].append(str(path.relative_to(root)))
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def test_no_type_name_is_defined_twice_across_tuning_nodes_and_signals() -> None:
    assert clashing_names(REPO) == {}


def test_a_planted_clash_is_reported(tmp_path: Path) -> None:
    for folder, text in (
        ("tools/tuning/turn.py", "class Evidence:\n    pass\n"),
        ("tools/signals/evidence.py", "class Evidence:\n    pass\nShare = float\nLIMIT = 3\n"),
        ("nodes/context.py", "Share = float\nLIMIT = 4\n"),
    ):
        (tmp_path / folder).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / folder).write_text(text, encoding="utf-8")
    assert clashing_names(tmp_path) == {
        "Share": ["nodes/context.py", "tools/signals/evidence.py"],
        "Evidence": ["tools/tuning/turn.py", "tools/signals/evidence.py"],
    }
