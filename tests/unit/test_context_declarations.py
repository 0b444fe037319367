"""One declaration per setting: every tuned value a run reads is declared once, in tools/tuning/, with its meaning;
the run's Context is generated from those declarations, and nodes read settings from the Context only.

- Every Context (and IngestContext) field, top-level or in a group, maps to exactly one declaration: a tools/tuning/
  field whose default and description it takes, or the Context field itself when no tuning field declares the value
  (a switch, a model spec, a prompt). `retrieval` and `index` are tools/tuning/ dataclasses themselves, each field a
  `setting`.
- Every Context field, nested ones too, has a description in the Studio schema; a tuned field's bounds there are its
  declaration's.
- No tools/tuning/ field holds a second copy of another's default (a same-named field with an equal literal).
- No module in nodes/ but the context modules imports tools.tuning.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import operator
import pkgutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field
from reground.tools import tuning
from reground.tools.tuning.declared import DESCRIPTION, USER_SETTABLE

REPO = Path(__file__).resolve().parents[2]
CONTEXT_MODULES = ("context.py", "context_base.py", "context_groups.py")

# Same-named tuning fields with equal values that are separate settings, each with why.
INDEPENDENT = {
    "start_timeout_s": "the llama.cpp server's start (LocalServer) and `reground ui`'s langgraph dev (ChatPage)",
    "stop_grace_s": "the same two servers' stop waits",
}


@dataclasses.dataclass(frozen=True)
class Declaration:
    """A tools/tuning/ field the Context exposes: where it is, its default and its meaning."""

    where: str
    name: str
    default: Any
    description: str
    user_settable: bool


def declarations() -> list[Declaration]:
    """Every tools/tuning/ dataclass field declared with `setting` (it carries a description and user_settable)."""
    found = []
    for info in pkgutil.iter_modules(tuning.__path__):
        module = importlib.import_module(f"{tuning.__name__}.{info.name}")
        for cls in vars(module).values():
            if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__):
                continue
            for field in dataclasses.fields(cls):
                if USER_SETTABLE in field.metadata:  # declared with `setting`
                    if field.default_factory is not dataclasses.MISSING:
                        default = field.default_factory()
                    else:
                        default = field.default
                    where = f"{info.name}.{cls.__name__}.{field.name}"
                    meta = field.metadata
                    found.append(Declaration(where, field.name, default, meta[DESCRIPTION], meta[USER_SETTABLE]))
    return found


def _tuning_classes() -> set[type]:
    return {
        cls
        for info in pkgutil.iter_modules(tuning.__path__)
        for cls in vars(importlib.import_module(f"{tuning.__name__}.{info.name}")).values()
        if isinstance(cls, type) and dataclasses.is_dataclass(cls)
    }


@dataclasses.dataclass(frozen=True)
class DataclassField:
    """A field of a settings dataclass the Context holds (`retrieval`, `index`), as pydantic reads it: the
    `setting` metadata is its description, bounds and schema extras."""

    description: str | None
    default: Any
    default_factory: Any
    json_schema_extra: Any


def _dataclass_field(field: dataclasses.Field[Any]) -> DataclassField:
    return DataclassField(
        field.metadata.get(DESCRIPTION),
        None if field.default is dataclasses.MISSING else field.default,
        None if field.default_factory is dataclasses.MISSING else field.default_factory,
        field.metadata.get("json_schema_extra"),
    )


def context_fields(models: list[type[BaseModel]]) -> dict[str, Any]:
    """{'Context.triage.judge_answer_threshold': its FieldInfo} for the models' fields and their groups' fields; a
    group that is a tools/tuning/ dataclass is listed as itself and each of its fields as a DataclassField."""
    out: dict[str, Any] = {}
    for model in models:
        for name, info in model.model_fields.items():
            kind = info.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                for sub, sub_info in kind.model_fields.items():
                    out[f"{model.__name__}.{name}.{sub}"] = sub_info
            elif isinstance(kind, type) and dataclasses.is_dataclass(kind):
                out[f"{model.__name__}.{name}"] = kind
                for field in dataclasses.fields(kind):
                    out[f"{model.__name__}.{name}.{field.name}"] = _dataclass_field(field)
            else:
                out[f"{model.__name__}.{name}"] = info
    return out


def _default_of(info: Any) -> Any:
    return info.default_factory() if info.default_factory is not None else info.default


def declaration_problems(models: list[type[BaseModel]], declared: list[Declaration]) -> list[str]:
    """What breaks 'one declaration per setting' in the models' fields, one line each."""
    problems: list[str] = []
    by_description: dict[str, list[Declaration]] = defaultdict(list)
    for declaration in declared:
        by_description[declaration.description].append(declaration)
    for description, same in by_description.items():
        if len(same) > 1:
            problems.append(f"{', '.join(d.where for d in same)} share one description: {description[:60]!r}")
    names = {d.name for d in declared}
    used: dict[str, list[str]] = defaultdict(list)
    tuning_classes = _tuning_classes()
    for path, info in context_fields(models).items():
        if isinstance(info, type):
            if info not in tuning_classes:
                problems.append(f"{path}: a dataclass group that is not a tools/tuning/ declaration")
            continue
        matches = by_description.get(info.description or "", [])
        if isinstance(info, DataclassField) and not matches:
            problems.append(f"{path}: a field of a settings dataclass not declared with `setting`")
            continue
        if not matches:
            if path.rsplit(".", 1)[-1] in names:
                problems.append(f"{path}: declared in the Context although tools/tuning/ declares that name")
            continue
        declaration = matches[0]
        used[declaration.where].append(path)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        default = _default_of(info)
        if default is None and extra.get("fallback") == declaration.default:
            pass  # calibrated at run time, else the declared value
        elif default != (dict(declaration.default) if isinstance(default, dict) else declaration.default):
            problems.append(f"{path}: default {default!r} is not its declaration's {declaration.default!r}")
        if (extra.get(USER_SETTABLE) is False) == declaration.user_settable:
            problems.append(f"{path}: its schema's user_settable differs from {declaration.where}")
    for declaration in declared:
        fields_of_it = used.get(declaration.where, [])
        if len(fields_of_it) != 1:
            problems.append(f"{declaration.where} is the declaration of {len(fields_of_it)} Context fields")
    return problems


def test_every_context_field_maps_to_exactly_one_declaration() -> None:
    from reground.nodes.context import Context, IngestContext

    declared = declarations()
    assert len(declared) > 50, "the tuned values the Context exposes are declared with `setting`"
    assert declaration_problems([Context, IngestContext], declared) == []


def test_a_context_field_with_its_own_copy_of_a_tuned_value_fails() -> None:
    from reground.nodes.context import Context, IngestContext
    from reground.tools.tuning.turn import BUDGETS

    class Copied(BaseModel):
        top_n: int = Field(default=BUDGETS.top_n, description="Paragraphs kept (a second description).")

    class Shifted(BaseModel):
        doc_candidates: int = Field(default=BUDGETS.doc_candidates + 1, description=_meaning("doc_candidates"))

    problems = declaration_problems([Context, IngestContext, Copied, Shifted], declarations())
    assert any(p.startswith("Copied.top_n: declared in the Context although") for p in problems)
    assert any(p.startswith("Shifted.doc_candidates: default 9 is not its declaration's 8") for p in problems)
    assert any("BudgetTuning.doc_candidates is the declaration of 2 Context fields" in p for p in problems)


def _meaning(name: str) -> str:
    return next(d.description for d in declarations() if d.name == name)


def test_the_studio_schema_says_which_settings_a_user_should_not_normally_set() -> None:
    from reground.nodes.context import Context

    groups = Context.model_json_schema()["$defs"]
    assert groups["CitationSettings"]["properties"]["max_quote_chars"][USER_SETTABLE] is False
    assert groups["Budgets"]["properties"]["keyword_recent_messages"][USER_SETTABLE] is False
    assert USER_SETTABLE not in groups["TriageSettings"]["properties"]["judge_answer_threshold"]
    support = groups["TriageSettings"]["properties"]["support_threshold"]
    assert support["default"] is None and support["fallback"] == _declared("support_threshold")
    assert Context().triage.judge_answer_threshold == _declared("judge_answer_threshold")


def _declared(name: str) -> Any:
    (default,) = [d.default for d in declarations() if d.name == name]
    return default


# --- no second copy of a default inside tools/tuning/ -------------------------------------------------------------


def _literal(node: ast.expr | None) -> Any:
    """The value of a literal default (a constant, a signed or computed one, `setting(<literal>, ...)`), else a
    sentinel: a default that names another declaration is a reference, not a copy."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setting" and node.args:
        node = node.args[0]
    if node is None:
        return _REFERENCE
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _literal(node.left), _literal(node.right)
        if _REFERENCE in (left, right):
            return _REFERENCE
        return _OPERATORS[type(node.op)](left, right)
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _REFERENCE


_REFERENCE = object()
_OPERATORS: dict[type[ast.operator], Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
}


def second_copies(root: Path) -> list[str]:
    """'name: A.name and B.name both hold 3' for same-named tools/tuning/ fields of different classes with equal
    literal defaults (one of them should name the other), bar the INDEPENDENT ones."""
    seen: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for path in sorted((root / "tools" / "tuning").glob("*.py")):
        for cls in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(cls, ast.ClassDef):
                continue
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    value = _literal(node.value)
                    if value is not _REFERENCE:
                        seen[node.target.id].append((f"{path.stem}.{cls.name}", value))
    copies = []
    for name, places in seen.items():
        for i, (first, value) in enumerate(places):
            for second, other in places[i + 1 :]:
                if value == other and name not in INDEPENDENT:
                    copies.append(f"{name}: {first}.{name} and {second}.{name} both hold {value!r}")
    return copies


def test_no_tuning_declaration_holds_a_second_copy_of_anothers_default() -> None:
    assert second_copies(REPO) == []


def test_a_planted_second_copy_is_reported_and_a_reference_is_not(tmp_path: Path) -> None:
    folder = tmp_path / "tools" / "tuning"
    folder.mkdir(parents=True)
    (folder / "a.py").write_text(
        "class Search:\n    rrf_k: int = 60\n    depth: int = Other.depth\n    size: int = 2**10\n", encoding="utf-8"
    )
    (folder / "b.py").write_text(
        "class Fusion:\n    rrf_k: int = setting(60, meaning='k')\n    depth: int = 4\n    size: int = 1 << 10\n",
        encoding="utf-8",
    )
    assert second_copies(tmp_path) == [
        "rrf_k: a.Search.rrf_k and b.Fusion.rrf_k both hold 60",
        "size: a.Search.size and b.Fusion.size both hold 1024",
    ]


# --- nodes read settings from the run's context only ------------------------------------------------------------


def tuning_readers(root: Path) -> list[str]:
    """Modules of nodes/ (bar the context modules) that import tools.tuning anywhere in them."""
    readers = []
    for path in sorted((root / "nodes").glob("*.py")):
        if path.name in CONTEXT_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if isinstance(node, ast.ImportFrom) and node.module == "reground.tools":
                modules += [f"reground.tools.{alias.name}" for alias in node.names]
            if any(m == "reground.tools.tuning" or m.startswith("reground.tools.tuning.") for m in modules):
                readers.append(path.name)
                break
    return readers


def test_nodes_read_settings_from_the_runs_context_only() -> None:
    assert tuning_readers(REPO) == []


@pytest.mark.parametrize(
    "source",
    [
        "from reground.tools.tuning.turn import BUDGETS\n",
        "def node():\n    import reground.tools.tuning.models as m\n    return m\n",
        "from reground.tools import tuning\n",
    ],
)
def test_a_planted_tuning_import_in_a_node_is_reported(tmp_path: Path, source: str) -> None:
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "context_groups.py").write_text("from reground.tools.tuning.turn import BUDGETS\n")
    (tmp_path / "nodes" / "answer.py").write_text(source, encoding="utf-8")
    assert tuning_readers(tmp_path) == ["answer.py"]


# --- Studio's form describes every field, with its declaration's bounds ------------------------------------------


def undescribed(schema: dict[str, Any]) -> list[str]:
    """'Group.field' for each property of the schema (and its $defs) with no description."""
    return [
        f"{group}.{name}"
        for group, part in [("Context", schema), *schema.get("$defs", {}).items()]
        for name, prop in part.get("properties", {}).items()
        if not prop.get("description")
    ]


def test_every_context_field_has_a_description_in_the_studio_schema() -> None:
    from reground.nodes.context import Context, IngestContext

    assert undescribed(Context.model_json_schema()) == []
    assert undescribed(IngestContext.model_json_schema()) == []
    assert undescribed({"properties": {"x": {"type": "integer"}}}) == ["Context.x"], "the check sees a bare field"


def _bounds(prop: dict[str, Any]) -> dict[str, Any]:
    kinds = prop.get("anyOf", [prop])
    names = {"minimum": "ge", "exclusiveMinimum": "gt", "maximum": "le", "exclusiveMaximum": "lt"}
    return {names[k]: v for kind in kinds for k, v in kind.items() if k in names}


def test_each_tuned_fields_bounds_in_the_schema_are_its_declarations() -> None:
    """Bounds live with the default (tools/tuning/): the schema shows them, and no Context field adds its own."""
    from reground.nodes.context import Context

    schema = Context.model_json_schema()
    by_description = {d.description: d for d in declarations()}
    checked = 0
    for group, part in [("Context", schema), *schema["$defs"].items()]:
        for name, prop in part.get("properties", {}).items():
            declaration = by_description.get(prop.get("description", ""))
            if declaration is None:
                continue
            meta = _declared_field(declaration).metadata
            wanted = {k: meta[k] for k in ("ge", "gt", "le", "lt") if k in meta}
            extra = meta.get("json_schema_extra") or {}
            if "maximum" in extra:
                wanted["le"] = extra["maximum"]
            assert _bounds(prop) == wanted, f"{group}.{name}: schema bounds {_bounds(prop)} vs declared {wanted}"
            checked += 1
    assert checked > 80


def _declared_field(declaration: Declaration) -> dataclasses.Field[Any]:
    module_name, class_name, field_name = declaration.where.split(".")
    cls = getattr(importlib.import_module(f"{tuning.__name__}.{module_name}"), class_name)
    return next(f for f in dataclasses.fields(cls) if f.name == field_name)


def test_a_bound_is_validated_where_it_is_declared() -> None:
    from reground.nodes.context import Context, ContextError

    with pytest.raises(ContextError, match=r"retrieval\.chunk_k"):
        Context(retrieval={"chunk_k": 0})
    with pytest.raises(ContextError, match=r"triage\.judge_answer_threshold"):
        Context(triage={"judge_answer_threshold": 1.5})
