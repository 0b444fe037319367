"""How the run's settings read their values: a field not given falls back to REGROUND_<FIELD> (a group's to
REGROUND_<GROUP>__<FIELD>), dotted keys ('triage.judge_answer_threshold') reach a group's field, `with_()` changes a
copy, and a bad value is one ContextError line naming the field; with the checks a prompt's placeholders and a
collection's name pass when a context is built; `tuned` makes a field of a value declared in tools/tuning/. The groups
are in context_groups.py, the Context in context.py."""

from __future__ import annotations

import json
import os
import string
from collections.abc import Mapping
from dataclasses import asdict, fields, is_dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from reground.tools.errors import InputError
from reground.tools.tuning.declared import BOUNDS, DESCRIPTION, SCHEMA_EXTRA

ENV_PREFIX = "REGROUND_"
GROUP_SEPARATOR = "__"  # REGROUND_<GROUP>__<FIELD>

# Placeholders of the prompts the nodes fill with str.format: (required, allowed). A prompt missing a required
# one, or naming one the node does not fill, is refused when the context is built, not mid-turn.
PROMPT_PLACEHOLDERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "rerank_prompt": (frozenset({"question"}), frozenset({"question"})),
    "answer_prompt": (frozenset({"question"}), frozenset({"question", "evidence", "escalation"})),
    "groundedness_prompt": (frozenset({"answer"}), frozenset({"answer"})),
    "reground_prompt": (frozenset({"question"}), frozenset({"history", "question", "previous_query"})),
    "refine_prompts": (frozenset({"answer"}), frozenset({"answer", "question"})),
}
# System prompts sent as written (never formatted): a {name} in them would reach the model unfilled.
VERBATIM_PROMPTS = ("refine_question_prompt", "keywords_prompt")


def tuned(values: object, name: str, *, optional: bool = False) -> Any:
    """The field of a setting declared in tools/tuning/ (`values` its frozen group, e.g. TRIAGE): its default,
    description and bounds are that declaration's (`setting`'s metadata). `optional`: the default is None (the run
    then reads a calibrated value, else the declared one, shown as the schema's `fallback`). A value marked
    `user_settable=False` there carries `"user_settable": false` in the schema."""
    declared = next(f for f in fields(values) if f.name == name)  # type: ignore[arg-type]
    value = getattr(values, name)
    meta = declared.metadata
    bounds = {bound: meta[bound] for bound in BOUNDS if bound in meta}
    extra: dict[str, Any] = dict(meta.get(SCHEMA_EXTRA, {}))
    if optional:
        extra["fallback"] = value
        return Field(default=None, description=meta[DESCRIPTION], json_schema_extra=extra, **bounds)
    if isinstance(value, Mapping):
        return Field(
            default_factory=lambda: dict(value),
            description=meta[DESCRIPTION],
            json_schema_extra=extra or None,
            **bounds,
        )
    return Field(default=value, description=meta[DESCRIPTION], json_schema_extra=extra or None, **bounds)


class ContextError(InputError):
    """A context value is invalid; the message names the field and the accepted values."""


class EnvSettings(BaseModel):
    """Settings with REGROUND_<FIELD> fallbacks for the fields not given, and one-line ContextErrors.

    Explicit values are never replaced (the fallback looks at which fields were passed, not at their values).
    A group of a larger context (`Group`) reads REGROUND_<GROUP>__<FIELD>.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
    env_prefix: ClassVar[str] = ENV_PREFIX
    location: ClassVar[tuple[str, ...]] = ()  # where the settings sit in a context, for error messages

    @model_validator(mode="before")
    @classmethod
    def _environment_fallbacks(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        filled = _nested(cls, data)
        for name, info in cls.model_fields.items():
            variable = cls.env_prefix + name.upper()
            raw = os.environ.get(variable)
            if name not in filled and raw is not None:
                filled[name] = _env_value(variable, raw, info.annotation)
            elif raw is not None and _is_group(info.annotation) and isinstance(filled[name], Mapping):
                # A group given in part: the group's JSON variable fills the fields it leaves out.
                filled[name] = {**_env_value(variable, raw, info.annotation), **filled[name]}
            if is_dataclass(info.annotation):  # retrieval, index: REGROUND_RETRIEVAL__RRF_K fills that field
                _dataclass_fallbacks(filled, name, variable + GROUP_SEPARATOR)
        return filled

    if not TYPE_CHECKING:  # mypy keeps pydantic's typed keyword signature

        def __init__(self, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise ContextError(_one_line(exc, data, type(self).location)) from None

    def with_(self, **changes: Any) -> Self:
        """A copy with `changes` applied and validated; every other value is kept (environment not re-read).
        A group's mapping or a dotted key (`**{"triage.judge_answer_threshold": 0.8}`) changes only the group
        fields it names."""
        values: dict[str, Any] = {name: getattr(self, name) for name in type(self).model_fields}
        for name, value in _nested(type(self), changes).items():
            current = values.get(name)
            if isinstance(value, Mapping) and (isinstance(current, BaseModel) or is_dataclass(current)):
                value = {**_fields_of(current), **value}
            values[name] = value
        return type(self)(**values)


class Group(EnvSettings):
    """A group of expert settings inside the Context (`context.triage`, ...); its fields fall back to
    REGROUND_<GROUP>__<FIELD>."""

    if not TYPE_CHECKING:

        def __init__(self, **data: Any) -> None:
            try:
                BaseModel.__init__(self, **data)
            except ValidationError as exc:
                raise ContextError(_one_line(exc, data, type(self).location)) from None

        # Inside a Context, pydantic validates a group without this __init__, so the Context's one error line names
        # the group's field ('triage.reading_ratio') instead of nesting a second message.
        __init__.__pydantic_base_init__ = True


def group_named(name: str) -> Any:
    """A class decorator: the group's name in the context, for its environment variables and error messages."""

    def mark(cls: type[Group]) -> type[Group]:
        cls.env_prefix = f"{ENV_PREFIX}{name.upper()}{GROUP_SEPARATOR}"
        cls.location = (name,)
        return cls

    return mark


def _is_group(annotation: Any) -> bool:
    """Whether a field holds a group of settings (a pydantic group or a settings dataclass), not a plain value."""
    return is_dataclass(annotation) or (isinstance(annotation, type) and issubclass(annotation, BaseModel))


def _fields_of(value: Any) -> dict[str, Any]:
    """A group's current values by field name (a pydantic group or a settings dataclass)."""
    if isinstance(value, BaseModel):
        return {name: getattr(value, name) for name in type(value).model_fields}
    return {name: getattr(value, name) for name in asdict(value)}


def _nested(cls: type[BaseModel], data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` with each dotted key ('triage.judge_answer_threshold') moved into its group's mapping. A key whose
    first part is not a field is left as it is (validation then names it as unknown)."""
    out = dict(data)
    for key in [k for k in data if isinstance(k, str) and "." in k]:
        group, _, name = key.partition(".")
        if group not in cls.model_fields:
            continue
        value = out.pop(key)
        current = out.get(group, {})
        if isinstance(current, BaseModel) or is_dataclass(current):
            current = _fields_of(current)
        out[group] = {**current, name: value}
    return out


def _dataclass_fallbacks(filled: dict[str, Any], name: str, prefix: str) -> None:
    """Fill a settings dataclass's fields that were not given from PREFIX<FIELD> variables (JSON, else text)."""
    found = {k[len(prefix) :].lower(): v for k, v in os.environ.items() if k.startswith(prefix)}
    if not found:
        return
    current = filled.get(name, {})
    current = _fields_of(current) if is_dataclass(current) else dict(current)
    for key, raw in found.items():
        if key not in current:
            try:
                current[key] = json.loads(raw)
            except ValueError:
                current[key] = raw
    filled[name] = current


def _env_value(variable: str, raw: str, annotation: Any) -> Any:
    """The environment's text for a field: JSON for objects, else the text (pydantic converts it)."""
    structured = get_origin(annotation) in (dict, Mapping) or (
        isinstance(annotation, type) and not issubclass(annotation, str | int | float | bool)
    )
    if not structured:
        return raw
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ContextError(f"environment variable {variable}={raw!r}: not JSON ({exc})") from exc


def _given(given: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether the caller's values name the field at `path` (a dotted key or inside a group's mapping)."""
    if ".".join(path) in given:
        return True
    value: Any = given
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


def _one_line(exc: ValidationError, given: Mapping[str, Any], location: tuple[str, ...] = ()) -> str:
    """'context field 'top_n': Input should be greater than or equal to 1, got 0' (and where a value came from);
    a group's field is named with its group: 'triage.judge_answer_threshold'."""
    parts = []
    for error in exc.errors():
        path = tuple(str(part) for part in error["loc"])
        loc = ".".join((*location, *path))
        message = str(error["msg"]).removeprefix("Value error, ")
        source = ""
        field_path = (*location, *path[: 2 - len(location)])
        variable = ENV_PREFIX + GROUP_SEPARATOR.join(part.upper() for part in field_path)
        if path and not _given(given, path[: 2 - len(location)]) and variable in os.environ:
            source = f" (from the environment variable {variable})"
        if loc:
            got = f", got {error['input']!r}" if error["type"] != "value_error" else ""
            parts.append(f"context field {loc!r}{source}: {message}{got}")
        else:
            parts.append(message)
    return "; ".join(parts)


def _placeholders(name: str, text: str) -> set[str]:
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as exc:
        raise ValueError(f"{exc}; write {{{{ and }}}} for literal braces") from None
    roots = {f.split(".")[0].split("[")[0] for f in fields}
    if "" in roots or any(r.isdigit() for r in roots):
        raise ValueError("positional placeholders ({} or {0}) are not filled; name them")
    return roots


def check_prompt(name: str, text: str) -> None:
    """Raise ValueError if a prompt misses a required placeholder or names one its node does not fill."""
    if name in VERBATIM_PROMPTS:
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(text) if f}
        except ValueError:
            return  # unbalanced braces are fine in text sent as written
        names = sorted(f for f in fields if f.isidentifier())
        if names:
            raise ValueError(f"is sent as written, so {{{names[0]}}} would reach the model unfilled; remove it")
        return
    required, allowed = PROMPT_PLACEHOLDERS[name]
    found = _placeholders(name, text)
    if missing := sorted(required - found):
        raise ValueError(f"misses the placeholder {{{missing[0]}}} (required: {', '.join(sorted(required))})")
    if unknown := sorted(found - allowed):
        raise ValueError(f"names the unknown placeholder {{{unknown[0]}}} (known: {', '.join(sorted(allowed))})")


def check_collection(collection: str) -> None:
    """The store's naming rule (a ValueError naming the problem), checked before any run starts."""
    from reground.tools.stores.store import collection_name_problem

    problem = collection_name_problem(str(collection))
    if problem:
        raise ValueError(problem)


def in_order(group: BaseModel, name: str, low: str, high: str, *, strict: bool) -> None:
    """Two fields of a group that bound a band: `low` below `high` (or not above it, when equal is allowed)."""
    low_value, high_value = getattr(group, low), getattr(group, high)
    if low_value > high_value or (strict and low_value == high_value):
        relation = "be below" if strict else "not be above"
        raise ValueError(f"context field '{name}.{low}' ({low_value}) must {relation} '{name}.{high}' ({high_value})")


def _checked_collection(collection: str) -> str:
    check_collection(collection)
    return collection


# A collection name the store accepts, checked when a context is built (a bad one fails before any run starts).
CollectionName = Annotated[str, AfterValidator(_checked_collection)]
