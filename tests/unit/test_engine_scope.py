"""The engine backend's scope tokens let through exactly what the embedded store's `matches` lets through.

The engine applies a user's scope inside SQL (`scope_tokens && ARRAY[...]` per field, tools/stores/scope.py);
the embedded index applies `search_index.matches`. The two must agree on every metadata and scope, including the
edge cases: comma-separated values, 'all' as a whole value or as one part, and field names or values holding '='.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from reground.tools.stores.scope import scope_clause, scope_tokens
from reground.tools.stores.search_index import matches, normalize_where

WORDS = st.sampled_from(["DE", "US", "all", "a=b", "b", "c", "DE,all", "US,DE", "b=c", "x,y"])
KEYS = st.sampled_from(["country", "a", "a=b", "company"])


def engine_lets_through(metadata: dict[str, Any], scope: dict[str, list[str]]) -> bool:
    """The SQL's decision, evaluated in Python: every field's token array overlaps the chunk's tokens."""
    held = set(scope_tokens(metadata))
    _, params = scope_clause(scope)
    return all(held & set(tokens) for tokens in params)


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(KEYS, WORDS, max_size=3), st.dictionaries(KEYS, st.lists(WORDS, min_size=1, max_size=3), max_size=2)
)
def test_scope_tokens_agree_with_matches(metadata: dict[str, Any], where: dict[str, list[str]]) -> None:
    scope = normalize_where(where)
    assert engine_lets_through(metadata, scope) == matches(metadata, scope)


def test_the_edge_cases_named() -> None:
    assert engine_lets_through({"country": "all"}, {"country": ["DE"]})
    assert not engine_lets_through({"country": "DE,all"}, {"country": ["US"]})
    assert engine_lets_through({"country": "DE,all"}, {"country": ["all"]})
    assert not engine_lets_through({"a=b": "c"}, {"a": ["b=c"]})
    assert not engine_lets_through({}, {"country": ["DE"]})  # fail closed: a missing field never matches
    assert scope_clause({}) == ("TRUE", [])
