"""A scope claim is a claim: how wide a document's scope metadata reaches over the user's scope fields, so a page
"for everyone" does not outrank the page scoped to the user's own value (signals/conflicts.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reground.tools.types import MATCH_ANY


def scope_breadth(metadata: Mapping[str, Any], scope: Mapping[str, Sequence[str]]) -> float:
    """How wide a document's claim is over the user's scope fields: per field, the number of values it lists ('DE' 1,
    'DE,AT' 2), 'all' as unbounded; the widest field counts. A page scoped to the user's own value is the narrowest
    (1): it is about the user, where a page for everyone only claims to be."""
    widest = 0.0
    for key in scope:
        value = str(metadata.get(key, "")).strip()
        if value == MATCH_ANY:
            return float("inf")
        widest = max(widest, float(len([part for part in value.split(",") if part.strip()])))
    return widest


def scope_label(metadata: Mapping[str, Any], scope: Mapping[str, Sequence[str]]) -> str:
    """The document's values of the user's scope fields, as a source is named beside its title ("country: DE")."""
    return ", ".join(f"{key}: {metadata[key]}" for key in sorted(scope) if key in metadata)
