"""The ingestion graph (served as `ingest`): inline documents and server-side paths."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from reground.graph.builder import build_graph, run_config
from reground.graph.builder import graph as reground_graph
from reground.graph.ingest_graph import IngestContext, IngestInputError
from reground.graph.ingest_graph import graph as ingest_graph
from reground.nodes.context import Context, ContextError
from reground.tools.tuning.stores import INGEST

from reground.testing.fake_chat import ScriptedChatModel

DOCS = [
    {
        "doc_id": "parental-leave-acme",
        "title": "Parental leave",
        "url": "https://hr.acme.example/parental",
        "company": "acme",
        "text": "# Parental leave\n\nEach parent gets sixteen weeks of fully paid parental leave. "
        "Apply through "
        "the Quokka portal at least eight weeks before the leave starts.",
    },
    {
        "doc_id": "bike-scheme-acme",
        "title": "Bike leasing",
        "company": "acme",
        "text": "# Bike leasing\n\nLease an e-bike through payroll; the company insures it.",
    },
]


def ingest(docs: list[dict[str, Any]] | None = None, **context: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"documents": docs if docs is not None else DOCS}
    if "paths" in context:
        payload["paths"] = context.pop("paths")
    out = ingest_graph.invoke(payload, context=IngestContext(**context))
    return dict(out["summary"])


@pytest.mark.parametrize("compiled", [reground_graph, ingest_graph], ids=["reground", "ingest"])
def test_every_context_field_has_a_description(compiled: Any) -> None:
    """What the server publishes as the context schema (Studio's configuration form)."""
    properties = compiled.get_context_jsonschema()["properties"]
    missing = [name for name, spec in properties.items() if not spec.get("description")]
    assert properties and not missing, missing


def test_inline_documents_land_with_their_metadata(tmp_path: Path) -> None:
    summary = ingest(collection="ingest-inline", data_dir=str(tmp_path), max_tokens=INGEST.chunk_tokens)
    assert summary["collection"] == "ingest-inline"
    from reground.tools.stores.store import PassageStore

    chunks = PassageStore.open("ingest-inline", data_dir=tmp_path).all_chunks()
    assert {c["doc_id"] for c in chunks} == {"parental-leave-acme", "bike-scheme-acme"}
    assert all(c["metadata"].get("company") == "acme" for c in chunks)
    parental = [c for c in chunks if c["doc_id"] == "parental-leave-acme"]
    assert parental[0]["url"] == "https://hr.acme.example/parental" and "Quokka" in " ".join(
        c["text"] for c in parental
    )
    acme_only = PassageStore.open("ingest-inline", data_dir=tmp_path).all_chunks({"company": "globex"})
    assert acme_only == []


def test_reingesting_the_same_documents_does_not_duplicate_chunks(tmp_path: Path) -> None:
    from reground.tools.stores.store import PassageStore

    ingest(collection="ingest-twice", data_dir=str(tmp_path), max_tokens=INGEST.chunk_tokens)
    first = PassageStore.open("ingest-twice", data_dir=tmp_path).count()
    ingest(collection="ingest-twice", data_dir=str(tmp_path), max_tokens=INGEST.chunk_tokens)
    assert PassageStore.open("ingest-twice", data_dir=tmp_path).count() == first


def test_server_side_paths_and_inline_documents_together(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "canteen.md").write_text("# Canteen\n\nThe canteen serves lunch from 11:30 to 14:00.\n", encoding="utf-8")
    ingest(
        DOCS[:1],
        collection="ingest-mixed",
        data_dir=str(tmp_path / "store"),
        paths=[str(folder)],
        max_tokens=INGEST.chunk_tokens,
    )
    from reground.tools.stores.store import PassageStore

    texts = " ".join(c["text"] for c in PassageStore.open("ingest-mixed", data_dir=tmp_path / "store").all_chunks())
    assert "11:30" in texts and "Quokka" in texts


def test_ingested_documents_are_answered_from(tmp_path: Path) -> None:
    ingest(collection="ingest-ask", data_dir=str(tmp_path), max_tokens=INGEST.chunk_tokens)
    model = ScriptedChatModel()
    context = Context(
        collection="ingest-ask",
        data_dir=str(tmp_path),
        groundedness={"use_llm_groundedness_judge": False},
    )
    out = build_graph(chat_model=model).invoke(
        {
            "messages": [
                {
                    "role": "user",
                    "content": "How many weeks of parental leave does each parent get?",
                }
            ]
        },
        config=run_config(context),
        context=context,
    )
    assert out["result"]["passages"][0]["doc_id"] == "parental-leave-acme"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({}, "nothing to ingest"),
        (
            {"documents": [{"doc_id": "a", "text": "  "}]},
            "document 'a' (documents[0]) needs a non-empty 'text'",
        ),
        ({"documents": [{"text": "hello"}]}, "documents[0] needs a non-empty string 'doc_id'"),
        (
            {"documents": [{"doc_id": "a", "text": "x"}, {"doc_id": "a", "text": "y"}]},
            "'a' appears twice",
        ),
        ({"documents": ["just text"]}, "documents[0] must be an object"),
        (
            {"documents": [{"doc_id": "a", "text": "x", "company": {"name": "acme"}}]},
            "document 'a': metadata field 'company' must be a string",
        ),
        (
            {"paths": ["/nonexistent/handbook.md"]},
            "'/nonexistent/handbook.md' does not exist on the server",
        ),
    ],
)
def test_bad_requests_fail_before_writing_and_name_the_problem(
    tmp_path: Path, payload: dict[str, Any], message: str
) -> None:
    with pytest.raises(IngestInputError, match=re.escape(message)):
        ingest_graph.invoke(payload, context=IngestContext(collection="ingest-bad", data_dir=str(tmp_path)))
    assert not any(tmp_path.iterdir()), "nothing may be written for a bad request"


def test_bad_context_values_are_rejected_with_the_field_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ContextError, match="'max_tokens'"):
        IngestContext(max_tokens=0)
    with pytest.raises(ContextError, match="'collection'"):
        IngestContext(collection="x")
    monkeypatch.setenv("REGROUND_COLLECTION", "from-env")
    monkeypatch.setenv("REGROUND_MAX_TOKENS", "64")
    context = IngestContext()
    assert (context.collection, context.max_tokens) == ("from-env", 64)
    assert IngestContext(collection="explicit").collection == "explicit"


def test_concurrent_graph_runs_into_one_collection_take_turns_and_lose_nothing(tmp_path: Path) -> None:
    """Runs of the `ingest` graph in threads (as `langgraph dev` runs them) share the collection's write lock."""
    import threading

    from reground.tools.stores.locking import collection_lock, lock_path
    from reground.tools.stores.store import PassageStore

    batches = [
        [
            {"doc_id": f"t{t}-d{i}", "title": f"Doc {t}.{i}", "text": f"# Topic {t}\n\nPolicy {t}.{i} text."}
            for i in range(3)
        ]
        for t in range(4)
    ]
    events: list[list[Any]] = [[] for _ in batches]
    errors: list[BaseException] = []
    context = IngestContext(collection="ingest-threads", data_dir=str(tmp_path))

    def run(index: int) -> None:
        try:
            for mode, chunk in ingest_graph.stream(
                {"documents": batches[index]}, context=context, stream_mode=["custom", "values"]
            ):
                events[index].append((mode, chunk))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    # Hold the lock while the threads start, so every one of them has to wait (and say so).
    with collection_lock(lock_path(tmp_path, "ingest-threads"), "ingest-threads"):
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(batches))]
        for thread in threads:
            thread.start()
        import time

        time.sleep(1.0)
        assert all(thread.is_alive() for thread in threads)
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    summaries = [next(c for m, c in reversed(e) if m == "values")["summary"] for e in events]
    assert [s["documents"] for s in summaries] == [3, 3, 3, 3] and all(s["chunks_added"] == 3 for s in summaries)
    waits = [
        c
        for e in events
        for m, c in e
        if m == "custom" and "waiting for another ingest into ingest-threads" in c["message"]
    ]
    assert len(waits) >= len(batches)
    store = PassageStore.open("ingest-threads", data_dir=tmp_path)
    assert sorted({c["doc_id"] for c in store.all_chunks()}) == sorted(d["doc_id"] for b in batches for d in b)
    assert store.count() == 12
