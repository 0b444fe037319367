"""The chat page's scope policy: what a page request may ask with, and the context the server runs it with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reground.web.policy import (
    PolicyError,
    ScopeViolation,
    data_policy,
    load_policy,
    policy_from_json,
    scope_values,
)

POLICY = {
    "collections": {
        "demo-hr": {
            "scope": {"country": ["DE", "US"], "employment_type": ["full-time"]},
            "default": {"country": "DE", "employment_type": "full-time"},
        },
        "handbook": {"scope": {}},
    },
    "context": {"escalation": "please open a ticket with the HR team"},
}
GRANTED = {"collection": "demo-hr", "metadata_filter": {"country": "US", "employment_type": "full-time"}}


def test_a_granted_scope_runs_with_exactly_that_scope_and_the_fixed_context() -> None:
    policy = policy_from_json(POLICY)
    assert policy.enforce(GRANTED) == {**POLICY["context"], **GRANTED}
    assert policy.enforce({"collection": "handbook"}) == {
        **POLICY["context"],
        "collection": "handbook",
        "metadata_filter": {},
    }


@pytest.mark.parametrize(
    ("context", "needle"),
    [
        ({"collection": "demo-hr", "metadata_filter": {}}, "country must be one of DE, US"),
        ({"collection": "demo-hr"}, "country must be one of DE, US"),
        ({**GRANTED, "metadata_filter": {"country": "UK", "employment_type": "full-time"}}, "got 'UK'"),
        ({**GRANTED, "metadata_filter": {"country": ["DE", "US"], "employment_type": "full-time"}}, "got ['DE', 'US']"),
        ({**GRANTED, "metadata_filter": {"country": {"$in": ["DE", "UK"]}, "employment_type": "full-time"}}, "$in"),
        ({**GRANTED, "metadata_filter": {**GRANTED["metadata_filter"], "region": "EU"}}, "may not name region"),
        ({**GRANTED, "data_dir": "/"}, "may not set data_dir"),
        ({**GRANTED, "store": "chroma:/elsewhere"}, "may not set store"),
        ({**GRANTED, "prompts": {"answer_prompt": "{question}"}}, "may not set prompts"),
        ({"collection": "secret-hr", "metadata_filter": {}}, "'secret-hr' is not open to this page"),
        ({"collection": "handbook", "metadata_filter": {"country": "DE"}}, "may not name country"),
        ({**GRANTED, "metadata_filter": ["DE"]}, "metadata_filter must be an object"),
        ("demo-hr", "must be an object"),
    ],
    ids=[
        "no-filter",
        "filter-left-out",
        "other-value",
        "list-of-values",
        "operator",
        "extra-field",
        "data-dir",
        "store",
        "prompts",
        "unknown-collection",
        "scope-on-unscoped",
        "filter-not-object",
        "context-not-object",
    ],
)
def test_a_widened_or_edited_scope_is_refused_saying_what_is_allowed(context: Any, needle: str) -> None:
    with pytest.raises(ScopeViolation) as refused:
        policy_from_json(POLICY).enforce(context)
    assert needle in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({}, "expected"),
        ({"collections": {"demo-hr": {"scope": {"country": []}}}}, "non-empty list"),
        ({"collections": {"demo-hr": {"scope": {"country": ["DE"]}, "default": {"country": "UK"}}}}, "default"),
        ({"collections": {"demo-hr": {}}, "context": {"collection": "x"}}, "context"),
        ({"collections": {"demo-hr": ["DE"]}}, "must be"),
    ],
)
def test_a_malformed_policy_names_its_problem(data: Any, needle: str) -> None:
    with pytest.raises(PolicyError) as bad:
        policy_from_json(data)
    assert needle in str(bad.value)


def test_a_policy_file_round_trips_and_a_broken_one_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY), encoding="utf-8")
    assert load_policy(path).as_json() == {
        "collections": {
            "demo-hr": POLICY["collections"]["demo-hr"],
            "handbook": {"scope": {}, "default": {}},
        },
        "context": POLICY["context"],
    }
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(PolicyError, match="not valid JSON"):
        load_policy(path)
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "missing.json")


def test_scope_values_come_from_the_documents_without_the_match_any_marker() -> None:
    metadatas = [
        {"country": "DE", "employment_type": "full-time"},
        {"country": "all", "employment_type": "part-time,contractor"},
        {"country": "US"},
    ]
    assert scope_values(metadatas, ["country", "employment_type", "team"]) == {
        "country": ("DE", "US"),
        "employment_type": ("contractor", "full-time", "part-time"),
    }
    policy = data_policy({"demo-hr": metadatas}, ["country"], defaults={"demo-hr": {"country": "DE", "team": "x"}})
    assert policy.collections["demo-hr"].default == {"country": "DE"}
    assert policy.enforce({"collection": "demo-hr", "metadata_filter": {"country": "US"}})["metadata_filter"] == {
        "country": "US"
    }
    with pytest.raises(ScopeViolation):
        policy.enforce({"collection": "demo-hr", "metadata_filter": {}})


def test_each_collection_offers_its_own_scope_fields_read_from_its_documents() -> None:
    from reground.web.policy import data_policy

    collections = {
        "hr": [{"country": "DE", "region": "EU"}, {"country": "all", "region": "all"},
               {"country": "US", "region": "NA"}, {"country": "UK", "region": "EU"}],
        "manuals": [{"product": "cli", "topic": "install"}, {"product": "cli,api", "topic": "auth"},
                    {"product": "api", "topic": "install"}],
    }  # fmt: skip
    policy = data_policy(collections, None)
    assert {name: dict(scope.fields) for name, scope in policy.collections.items()} == {
        "hr": {"country": ("DE", "UK", "US")},  # the region follows from the country
        "manuals": {"product": ("api", "cli")},  # no HR field names where the documents have none
    }
    assert policy.allows({"collection": "manuals", "metadata_filter": {"product": "cli"}, "escalation": "x"})
    assert not policy.allows({"collection": "manuals", "metadata_filter": {"product": "cli", "country": "DE"}})
    assert not policy.allows({"collection": "hr", "metadata_filter": {}})
