"""The scope policy: which collections and metadata scopes the chat page's users may ask in, checked server-side.

The page lets a person pick a collection and a value for each scope field (the HR bot's country, employment type).
What they may pick is the deployment's decision, written in a policy file the server reads
(`$REGROUND_UI_POLICY`; `reground ui` writes one):

    {"collections": {"demo-hr": {"scope": {"country": ["DE"], "employment_type": ["full-time"]},
                                 "default": {"country": "DE", "employment_type": "full-time"}}},
     "context": {"escalation": "please open a ticket with the HR team"}}

A run's context is accepted only when it names a listed collection and sets every scope field of it to one listed
value, and nothing else; the server then runs it with exactly that scope plus the policy's fixed `context`. A
request that edits the scope (another value, a list of values, a field left out, `data_dir`, a store spec) is
refused before any run starts (reground/web/guard.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reground.tools.errors import InputError
from reground.tools.stores.search_index import BOOKKEEPING_FIELDS, MATCH_ANY

POLICY_ENV = "REGROUND_UI_POLICY"
# The only context keys a page request may carry; everything else is the server's (model, store, prompts, ...).
CLIENT_CONTEXT_KEYS = frozenset({"collection", "metadata_filter"})


class ScopeViolation(InputError):
    """A request asks for a scope or setting the policy does not grant; the message says what is allowed."""


class PolicyError(InputError):
    """A policy file that cannot be read or does not have the documented shape."""


@dataclass(frozen=True)
class CollectionScope:
    """One collection the page may ask in: each scope field with the values a user may choose."""

    fields: Mapping[str, tuple[str, ...]]
    default: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"scope": {k: list(v) for k, v in self.fields.items()}, "default": dict(self.default)}


@dataclass(frozen=True)
class ScopePolicy:
    """What the page may ask with (collections and their scopes) and the context the server adds to every run."""

    collections: Mapping[str, CollectionScope]
    context: Mapping[str, Any] = field(default_factory=dict)

    def enforce(self, context: Any) -> dict[str, Any]:
        """The context a run gets for a page request's `context`, or ScopeViolation saying what is not allowed."""
        if not isinstance(context, Mapping):
            raise ScopeViolation("the run's context must be an object with 'collection' and 'metadata_filter'")
        extra = sorted(set(context) - CLIENT_CONTEXT_KEYS)
        if extra:
            raise ScopeViolation(f"the chat page may not set {', '.join(extra)}: the server fixes it")
        name = context.get("collection")
        scope = self.collections.get(name) if isinstance(name, str) else None
        if scope is None:
            raise ScopeViolation(f"collection {name!r} is not open to this page (open: {', '.join(self.collections)})")
        wanted = context.get("metadata_filter") or {}
        if not isinstance(wanted, Mapping):
            raise ScopeViolation("metadata_filter must be an object of field: value")
        unknown = sorted(set(wanted) - set(scope.fields))
        if unknown:
            raise ScopeViolation(f"{name}: the scope may not name {', '.join(unknown)} (fields: {_names(scope)})")
        bound: dict[str, str] = {}
        for key, allowed in scope.fields.items():
            value = wanted.get(key)
            if not isinstance(value, str) or value not in allowed:
                raise ScopeViolation(f"{name}: {key} must be one of {', '.join(allowed)}; got {value!r}")
            bound[key] = value
        return {**self.context, "collection": name, "metadata_filter": bound}

    def allows(self, context: Any) -> bool:
        """Whether a run's recorded context (the server's keys included) is in a scope this policy grants: a listed
        collection and exactly one listed value for each of its scope fields. A conversation held under a wider
        policy is readable only while every one of its runs is."""
        if not isinstance(context, Mapping):
            return False
        name = context.get("collection")
        scope = self.collections.get(name) if isinstance(name, str) else None
        wanted = context.get("metadata_filter") or {}
        if scope is None or not isinstance(wanted, Mapping) or set(wanted) != set(scope.fields):
            return False
        return all(isinstance(wanted[k], str) and wanted[k] in allowed for k, allowed in scope.fields.items())

    def as_json(self) -> dict[str, Any]:
        """The policy file's form (also what the page reads to offer its choices)."""
        return {
            "collections": {name: scope.as_json() for name, scope in self.collections.items()},
            "context": dict(self.context),
        }


def _names(scope: CollectionScope) -> str:
    return ", ".join(scope.fields) or "none"


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise PolicyError(f"{where} must be a non-empty list of strings")
    return tuple(dict.fromkeys(value))


def policy_from_json(data: Any, *, where: str = "policy") -> ScopePolicy:
    """A policy from its JSON form; PolicyError names the first entry that is wrong."""
    if not isinstance(data, Mapping) or not isinstance(data.get("collections"), Mapping) or not data["collections"]:
        raise PolicyError(f'{where}: expected {{"collections": {{"<name>": {{"scope": {{...}}}}}}}}')
    collections: dict[str, CollectionScope] = {}
    for name, entry in data["collections"].items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("scope", {}), Mapping):
            raise PolicyError(f'{where}: collections.{name} must be {{"scope": {{field: [values]}}}}')
        fields = {k: _strings(v, f"{where}: collections.{name}.scope.{k}") for k, v in entry.get("scope", {}).items()}
        default = dict(entry.get("default") or {})
        for key, value in default.items():
            if value not in fields.get(key, ()):
                raise PolicyError(f"{where}: collections.{name}.default.{key}={value!r} is not one of its values")
        collections[str(name)] = CollectionScope(fields=fields, default=default)
    context = data.get("context") or {}
    if not isinstance(context, Mapping) or set(context) & CLIENT_CONTEXT_KEYS:
        raise PolicyError(f"{where}: context must be an object of fixed settings without collection/metadata_filter")
    return ScopePolicy(collections=collections, context=dict(context))


def load_policy(path: str | os.PathLike[str]) -> ScopePolicy:
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyError(f"cannot read the scope policy {file}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise PolicyError(f"the scope policy {file} is not valid JSON: {exc}") from exc
    return policy_from_json(data, where=str(file))


def policy_from_env() -> ScopePolicy | None:
    """The policy named by $REGROUND_UI_POLICY, or None (then the page offers the data's scopes, unenforced)."""
    path = os.environ.get(POLICY_ENV, "").strip()
    return load_policy(path) if path else None


def scope_values(metadatas: Iterable[Mapping[str, Any]], fields: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each scope field's values over a collection's chunks ('all' and comma lists expanded), sorted; a field no
    chunk carries is left out."""
    seen: dict[str, set[str]] = {f: set() for f in fields}
    for metadata in metadatas:
        for key in fields:
            raw = metadata.get(key)
            if raw is not None:
                seen[key].update(v.strip() for v in str(raw).split(",") if v.strip() and v.strip() != MATCH_ANY)
    return {key: tuple(sorted(values)) for key, values in seen.items() if values}


def scope_fields(metadatas: Iterable[Mapping[str, Any]]) -> list[str]:
    """The fields a collection's documents are scoped by, read from their metadata: a field some document sets to
    'all' or to a comma list of values says whom a document applies to (a topic or an owner never does). A field
    whose value follows from another's (a region from the country) is left out: choosing it adds nothing."""
    rows = [m for m in metadatas if isinstance(m, Mapping)]
    candidates = sorted(
        {
            key
            for row in rows
            for key, value in row.items()
            if key not in BOOKKEEPING_FIELDS and (str(value).strip() == MATCH_ANY or "," in str(value))
        }
    )
    values = {key: {str(row.get(key, "")) for row in rows} for key in candidates}

    def follows(field: str, source: str) -> bool:
        seen: dict[str, str] = {}
        return all(seen.setdefault(str(row.get(source, "")), str(row.get(field, ""))) == str(row.get(field, ""))
                   for row in rows)  # fmt: skip

    return [
        field
        for field in candidates
        if not any(
            other != field
            and follows(field, other)
            and (
                len(values[other]) > len(values[field]) or (len(values[other]) == len(values[field]) and other < field)
            )
            for other in candidates
        )
    ]


def data_policy(
    collections: Mapping[str, Iterable[Mapping[str, Any]]],
    fields: Sequence[str] | None,
    *,
    defaults: Mapping[str, Mapping[str, str]] | None = None,
    context: Mapping[str, Any] | None = None,
) -> ScopePolicy:
    """A policy opening every given collection with every value its chunks hold in `fields` (`collections`: name ->
    chunk metadatas; `fields` None: each collection's own `scope_fields`): a user picks a value per field but cannot
    leave the scope out or change other settings."""
    scopes: dict[str, CollectionScope] = {}
    for name, chunks in collections.items():
        metadatas = list(chunks)
        values = scope_values(metadatas, scope_fields(metadatas) if fields is None else fields)
        wanted = (defaults or {}).get(name, {})
        default = {k: v for k, v in wanted.items() if v in values.get(k, ())}
        scopes[name] = CollectionScope(fields=values, default=default)
    return ScopePolicy(collections=scopes, context=dict(context or {}))


def policy_from_data(
    data_dir: str | os.PathLike[str] | None,
    fields: Sequence[str] | None,
    *,
    defaults: Mapping[str, Mapping[str, str]] | None = None,
    context: Mapping[str, Any] | None = None,
) -> ScopePolicy:
    """`data_policy` over every collection of a data dir (read from its chunks' metadata; no model is loaded)."""
    from reground.tools.stores.store import PassageStore

    names = [row["collection"] for row in PassageStore.describe(data_dir=data_dir)]
    metadatas = {
        name: [chunk.get("metadata") or {} for chunk in PassageStore.open(name, data_dir=data_dir).all_chunks()]
        for name in names
    }
    return data_policy(metadatas, fields, defaults=defaults, context=context)
