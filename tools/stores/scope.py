"""The metadata scope every store enforces the same way: the check of a scope's fields, and the engine's form of it.

`search_index.matches` is the rule (fail closed: a filtered field must be present and hold one of the values, a
comma-separated part of it, or 'all'). The embedded index applies it in memory; the engine backend stores, per
chunk, tokens that say what the rule lets through (`scope_tokens`) and turns a scope into SQL array overlaps
(`scope_clause`), so the database decides exactly as `matches` does (tests/unit/test_engine_scope.py).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from reground.tools.stores.search_index import BOOKKEEPING_FIELDS, MATCH_ANY, Where, normalize_where
from reground.tools.stores.vector_store import UnknownMetadataFieldError


def checked_scope(
    where: Where | None, collection: str, fields: Collection[str], *, empty: bool
) -> dict[str, list[str]]:
    """The normalised scope, or MetadataFilterError (shape, operator) / UnknownMetadataFieldError: a field no
    document of the collection has (`fields`) is an error, not an empty result, unless the collection is `empty`."""
    scope = normalize_where(where)
    unknown = sorted(set(scope) - set(fields))
    if unknown and not empty:
        known = ", ".join(sorted(fields)) or "none"
        raise UnknownMetadataFieldError(
            f"metadata filter names {', '.join(map(repr, unknown))}, which no document in collection "
            f"{collection!r} has (known fields: {known}); fix the filter or ingest documents with that field"
        )
    return scope


def _token(key: str, value: str | None = None) -> str:
    """One scope token: JSON, so no field name or value can forge another's (`a=b: c` vs `a: b=c`)."""
    return json.dumps([key] if value is None else [key, value])


def scope_tokens(metadata: Mapping[str, Any]) -> list[str]:
    """What a chunk's metadata lets through, as `search_index.matches` decides it: a token for the value and for
    each comma-separated part of it ('DE,AT' is both), and a wildcard token when the value is exactly 'all'. A scope
    {field: [values]} is then `scope_tokens && [field's value tokens..., field's wildcard]` per field."""
    out: set[str] = set()
    for key, value in metadata.items():
        if key in BOOKKEEPING_FIELDS:
            continue
        text = str(value)
        out.add(_token(key, text))
        out.update(_token(key, part) for part in text.split(","))
        if text == MATCH_ANY:
            out.add(_token(key))
    return sorted(out)


def scope_clause(scope: Mapping[str, Sequence[str]], column: str = "scope_tokens") -> tuple[str, list[Any]]:
    """SQL (AND of one array overlap per field) and its parameters for a normalised scope; ('TRUE', []) for none."""
    if not scope:
        return "TRUE", []
    parts, params = [], []
    for key, values in sorted(scope.items()):
        parts.append(f"{column} && %s::text[]")
        params.append([*(_token(key, v) for v in values), _token(key)])
    return " AND ".join(parts), params
