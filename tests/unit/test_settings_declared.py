"""A tuned value the run's Context carries is declared once, with `setting(...)`, and read from the Context: no class
holds a second copy of its default, and no tool parameter defaults to it (a caller that left the argument out would
silently ignore the user's setting). Read from the source with `ast`:

- every Context field whose type holds numbers is generated from a declaration (`tuned(...)`), and every field of
  a settings dataclass the Context holds (`retrieval`, `index`) is a `setting(...)`;
- no tools/tuning/ field defaults to a setting (a second name for one value), and no function parameter or class
  field in tools/, nodes/, graph/ or reground/ defaults to one, directly or through a module-level alias.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("tools", "nodes", "graph", "reground")
CONTEXT_MODULES = ("nodes/context.py", "nodes/context_groups.py")
# Classes built by an app without a run's Context, whose defaults name the run's declarations on purpose.
NO_CONTEXT = {"RegroundRetriever": "a LangChain retriever the app builds (tools/retrieval/langchain.py)"}
TUNED_TYPE = re.compile(r"\b(int|float)\b")  # a number, or a mapping or list of numbers


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_call(node: ast.AST | None, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def setting_references(root: Path) -> tuple[set[str], list[str]]:
    """({'BUDGETS.doc_candidates', 'RetrievalSettings.rrf_k', ...}: the expressions that read a setting's default,
    through a class or its module-level instance; ['Search.rrf_k = RetrievalSettings.rrf_k', ...]: tuning fields
    whose default is one of them)."""
    classes: dict[str, dict[str, ast.expr]] = {}
    instances: dict[str, str] = {}
    for path in sorted((root / "tools" / "tuning").glob("*.py")):
        for node in _tree(path).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = {
                    s.target.id: s.value
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None
                }
            target = node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            value = getattr(node, "value", None)
            if isinstance(target, ast.Name) and isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                instances[target.id] = value.func.id

    def names(cls: str, field: str) -> set[str]:
        return {f"{cls}.{field}", *(f"{i}.{field}" for i, c in instances.items() if c == cls)}

    refs: set[str] = set()
    for cls, fields in classes.items():
        for field, value in fields.items():
            if _is_call(value, "setting"):
                refs |= names(cls, field)
    copies = [
        f"{cls}.{field} = {ast.unparse(value)}"
        for cls, fields in classes.items()
        for field, value in fields.items()
        if ast.unparse(value) in refs
    ]
    return refs, copies


def defaults_naming_a_setting(root: Path, folders: tuple[str, ...] = PRODUCT) -> list[str]:
    """'path:line f(x=BUDGETS.doc_candidates)' for each parameter or class field default in `folders` (tools/tuning/
    aside) that reads a setting, directly or through a module-level alias (`LIMIT = EVIDENCE.max_code_lines`) of any
    module."""
    refs, _ = setting_references(root)
    paths = [p for folder in folders for p in sorted((root / folder).rglob("*.py")) if "tuning" not in p.parts]
    trees = {path: _tree(path) for path in paths}
    aliases = {
        target.id
        for tree in trees.values()
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and ast.unparse(node.value) in refs
    }
    found = []
    for path, tree in trees.items():
        where = path.relative_to(root)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                positional = [*args.posonlyargs, *args.args]
                pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
                pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
                found += [
                    f"{where}:{node.lineno} {node.name}({arg.arg}={ast.unparse(default)})"
                    for arg, default in pairs
                    if ast.unparse(default) in refs or ast.unparse(default) in aliases
                ]
            elif isinstance(node, ast.ClassDef) and node.name not in NO_CONTEXT:
                for field in node.body:
                    if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name) and field.value:
                        default = ast.unparse(field.value)
                        if default in refs or default in aliases:
                            found.append(f"{where}:{field.lineno} {node.name}.{field.target.id} = {default}")
    return found


def test_the_references_to_settings_are_found() -> None:
    refs, _ = setting_references(REPO)
    assert {"BUDGETS.doc_candidates", "RetrievalSettings.rrf_k", "CHAT.timeout_s", "INGEST.chunk_tokens"} <= refs
    assert "ENDPOINTS.reachable_timeout_s" not in refs, "a value no Context carries may stay a default"


def test_no_tuning_field_holds_a_second_name_for_a_setting() -> None:
    assert setting_references(REPO)[1] == []


def test_no_tool_parameter_or_class_field_defaults_to_a_value_the_context_carries() -> None:
    assert defaults_naming_a_setting(REPO) == []


def test_planted_defaults_naming_a_setting_are_reported(tmp_path: Path) -> None:
    (tmp_path / "tools" / "tuning").mkdir(parents=True)
    (tmp_path / "tools" / "tuning" / "t.py").write_text(
        "@dataclass(frozen=True)\nclass Budgets:\n    k: int = setting(8, meaning='k')\n    fixed: int = 3\n"
        "@dataclass(frozen=True)\nclass Search:\n    k: int = BUDGETS.k\n"
        "BUDGETS: Final = Budgets()\n",
        encoding="utf-8",
    )
    (tmp_path / "tools" / "a.py").write_text(
        "LIMIT = BUDGETS.k\n"
        "def f(x, k=BUDGETS.k, *, n=LIMIT, fixed=BUDGETS.fixed):\n    pass\n"
        "class Weights:\n    k: int = Budgets.k\n",
        encoding="utf-8",
    )
    assert setting_references(tmp_path)[1] == ["Search.k = BUDGETS.k"]
    assert defaults_naming_a_setting(tmp_path, ("tools",)) == [
        "tools/a.py:2 f(k=BUDGETS.k)",
        "tools/a.py:2 f(n=LIMIT)",
        "tools/a.py:5 Weights.k = Budgets.k",
    ]


def context_fields_not_from_a_declaration(root: Path) -> list[str]:
    """'Class.field' for each field of the Context modules' classes whose type holds numbers (a tuned value) and
    whose value is not generated from a declaration (`tuned(...)`)."""
    out = []
    for name in CONTEXT_MODULES:
        for cls in _tree(root / name).body:
            if not isinstance(cls, ast.ClassDef):
                continue
            for field in cls.body:
                if not (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)):
                    continue
                if TUNED_TYPE.search(ast.unparse(field.annotation)) and not _is_call(field.value, "tuned"):
                    out.append(f"{cls.name}.{field.target.id}")
    return out


def test_every_tuned_value_of_the_context_is_generated_from_its_declaration() -> None:
    assert context_fields_not_from_a_declaration(REPO) == []


def test_a_tuned_value_declared_in_the_context_is_reported(tmp_path: Path) -> None:
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "context.py").write_text(
        "class Context(EnvSettings):\n    top_n: int = Field(default=3, description='kept')\n"
        "    recursion_limit: int = tuned(BUDGETS, 'recursion_limit')\n    name: str = Field(default='x')\n",
        encoding="utf-8",
    )
    (tmp_path / "nodes" / "context_groups.py").write_text(
        "class Refinement(Group):\n    weights: dict[str, float] = Field(default_factory=dict)\n", encoding="utf-8"
    )
    assert context_fields_not_from_a_declaration(tmp_path) == ["Context.top_n", "Refinement.weights"]


@pytest.mark.parametrize("group", ["retrieval", "index"])
def test_every_field_of_a_settings_dataclass_the_context_holds_is_a_setting(group: str) -> None:
    from reground.nodes.context import Context
    from reground.tools.tuning.declared import DESCRIPTION, USER_SETTABLE

    kind = Context.model_fields[group].annotation
    assert kind is not None and dataclasses.is_dataclass(kind)
    bare = [
        f.name for f in dataclasses.fields(kind) if DESCRIPTION not in f.metadata or USER_SETTABLE not in f.metadata
    ]
    assert bare == []


def test_evidence_weights_hold_no_default_of_their_own() -> None:
    """EvidenceWeights is built from the Context only (Context.evidence_weights())."""
    from reground.nodes.context import Context
    from reground.tools.signals.reading import EvidenceWeights

    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(EvidenceWeights))
    weights = Context(evidence={"dialogue_weight": 0.7}).evidence_weights()
    assert weights.dialogue == 0.7 and weights.reader_top == Context().evidence.reader_top
