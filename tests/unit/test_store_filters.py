"""A metadata scope the store cannot honour is an error saying why, never a silent "I could not find this".

Shape and operator problems are the caller's input (`InputError`, exit 2); a field no document has is
about the data (`DataError`, exit 3) and lists the fields that exist. Both are raised by the store,
where the scope is applied, before any model is called.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context
from reground.tools.errors import DataError, InputError
from reground.tools.stores.store import (
    CollectionNotFoundError,
    EmptyCollectionError,
    InvalidCollectionNameError,
    MetadataFilterError,
    PassageStore,
    StoreError,
    UnknownMetadataFieldError,
    normalize_where,
)

from reground.testing.fake_chat import ScriptedChatModel


def test_store_errors_are_data_errors_and_bad_names_input_errors() -> None:
    for error in (StoreError, CollectionNotFoundError, EmptyCollectionError, UnknownMetadataFieldError):
        assert issubclass(error, DataError) and error("x").exit_code == 3
    for error in (InvalidCollectionNameError, MetadataFilterError):
        assert issubclass(error, InputError) and error("x").exit_code == 2


def test_metadata_fields_are_the_ones_documents_carry(hr_store: Any) -> None:
    assert hr_store.metadata_fields() == ["country", "employment_type"]


def test_a_field_no_document_has_is_an_error_listing_the_known_fields(hr_store: Any) -> None:
    vector = hr_store.embedder.embed_query("annual leave")
    searches = {
        "dense": lambda where: hr_store.dense_search(vector, 5, where=where),
        "lexical": lambda where: hr_store.lexical_search("annual leave", 5, where=where),
        "chunks": lambda where: hr_store.chunks_for_documents(["annual-leave-de"], where=where),
        "all": lambda where: hr_store.all_chunks(where),
        "check": hr_store.check_filter,
    }
    for name, search in searches.items():
        with pytest.raises(UnknownMetadataFieldError) as info:
            search({"country": "DE", "region": "Bavaria"})
        message = str(info.value)
        assert "'region'" in message and "country, employment_type" in message and "test-hr" in message, name
        assert "\n" not in message
    # A known field with a value no document has is a legitimate empty scope, not an error.
    assert hr_store.all_chunks({"country": "FR"}) == [
        c for c in hr_store.all_chunks() if c["metadata"]["country"] == "all"
    ]


@pytest.mark.parametrize(
    ("where", "needle"),
    [
        ({"country": {"$gt": "DE"}}, "unsupported metadata filter operator '$gt'"),
        ({"$or": [{"country": "DE"}]}, "unsupported metadata filter operator '$or'"),
        ({"country": {"$in": "DE"}}, "'$in' needs a list"),
        ({"country": {"$eq": "DE", "$in": ["US"]}}, "exactly one operator"),
        ({"country": []}, "non-empty list"),
        ({"country": None}, "needs a string/number/boolean"),
        ({"country": [{"nested": 1}]}, "needs a string/number/boolean"),
        (["country", "DE"], "must be an object"),
        ({"": "DE"}, "keys must be field names"),
    ],
)
def test_bad_filter_shapes_and_operators_are_input_errors(hr_store: Any, where: Any, needle: str) -> None:
    with pytest.raises(MetadataFilterError) as info:
        hr_store.check_filter(where)
    assert needle in str(info.value)


def test_supported_operators_mean_what_the_plain_forms_mean(hr_store: Any) -> None:
    ids = lambda where: sorted(c["chunk_id"] for c in hr_store.all_chunks(where))  # noqa: E731
    assert ids({"country": {"$eq": "DE"}}) == ids({"country": "DE"})
    assert ids({"country": {"$in": ["DE", "US"]}}) == ids({"country": ["DE", "US"]})
    assert normalize_where({"n": {"$in": [1, True]}}) == {"n": ["1", "True"]}


def test_a_run_with_an_unknown_field_fails_before_any_model_call(hr_store: Any, hr_store_dir: str) -> None:
    model = ScriptedChatModel()
    context = Context(collection="test-hr", data_dir=hr_store_dir, metadata_filter={"department": "sales"})
    graph = build_graph(chat_model=model, store=hr_store)
    payload = {"messages": [{"role": "user", "content": "How much annual leave do I get?"}]}
    with pytest.raises(UnknownMetadataFieldError, match="department"):
        graph.invoke(payload, config=run_config(context), context=context)
    assert model.calls == []


def test_a_missing_collection_lists_the_ones_that_exist(hr_store_dir: str) -> None:
    with pytest.raises(CollectionNotFoundError) as info:
        PassageStore.open("no-such-docs", data_dir=hr_store_dir)
    assert "known: test-hr" in str(info.value) and "reground ingest" in str(info.value)
    for name in ("../../etc", "a..b", "x", "-leading"):
        with pytest.raises(InvalidCollectionNameError, match="invalid collection name"):
            PassageStore.open(name, data_dir=hr_store_dir)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REGROUND_DATA_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "reground", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_cli_collections_lists_documents_and_chunk_counts(hr_store_dir: str, hr_store: Any) -> None:
    per_doc: dict[str, int] = {}
    for chunk in hr_store.all_chunks():
        per_doc[chunk["doc_id"]] = per_doc.get(chunk["doc_id"], 0) + 1

    listing = _cli("collections", "--data-dir", hr_store_dir, "--json")
    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout) == [{"collection": "test-hr", "documents": 4, "chunks": sum(per_doc.values())}]

    detail = _cli("collections", "test-hr", "--data-dir", hr_store_dir, "--json")
    assert detail.returncode == 0, detail.stderr
    data = json.loads(detail.stdout)
    assert {d["doc_id"]: d["chunks"] for d in data["document_chunks"]} == per_doc
    assert data["metadata_fields"] == ["country", "employment_type"]

    text = _cli("collections", "test-hr", "--data-dir", hr_store_dir)
    assert f"test-hr: 4 documents, {sum(per_doc.values())} chunks" in text.stdout
    assert "annual-leave-de" in text.stdout

    missing = _cli("collections", "nope-docs", "--data-dir", hr_store_dir)
    assert missing.returncode == 3 and "known: test-hr" in missing.stderr
    bad = _cli("collections", "../../etc", "--data-dir", hr_store_dir)
    assert bad.returncode == 2 and "invalid collection name" in bad.stderr


def test_cli_collections_on_an_empty_data_dir(tmp_path: Path) -> None:
    out = _cli("collections", "--data-dir", str(tmp_path))
    assert out.returncode == 0 and "no collections yet" in out.stdout
    assert json.loads(_cli("collections", "--data-dir", str(tmp_path), "--json").stdout) == []


def test_an_empty_collection_reads_as_empty(tmp_path: Path) -> None:
    """Not a reshape error: the conversation turns a count of 0 into EmptyCollectionError naming the collection."""
    from reground.graph.builder import build_graph as build
    from reground.tools.stores.store import EmptyCollectionError as Empty

    store = PassageStore.open("empty-docs", data_dir=tmp_path, create=True)
    assert (store.count(), store.metadata_fields(), store.all_chunks({"country": "DE"})) == (0, [], [])
    context = Context(collection="empty-docs", data_dir=str(tmp_path))
    payload = {"messages": [{"role": "user", "content": "How much annual leave do I get?"}]}
    with pytest.raises(Empty, match="'empty-docs' is empty"):
        build(chat_model=ScriptedChatModel()).invoke(payload, config=run_config(context), context=context)
