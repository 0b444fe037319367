"""The search engine backend against a real engine: PostgreSQL 16 + pgvector from the `engine` extra (pgserver).

The engine starts from what the project installs (`pgserver:<dir>` spec), the demo HR documents are ingested
through `ingest`, a whole graph turn asks through `Context(store=...)`, the user's scope holds in every search
stage, and the engine is killed (SIGKILL to its postmaster) and started again: committed documents survive and the
store opened before the crash answers again. The `engine` extra is part of `make test`'s install, so a missing
package fails here rather than skipping.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context
from reground.tools.tuning.retrieval import RetrievalSettings
from reground.tools.tuning.stores import INGEST
from reground.tools.tuning.turn import BUDGETS

from reground.testing.fake_chat import ScriptedChatModel

pytestmark = pytest.mark.integration

COLLECTION = "engine-hr"


@pytest.fixture(scope="module")
def engine_dir() -> Iterator[Path]:
    """A directory of its own (not pytest's tmp dirs, which a concurrent pytest run may rotate away under the
    running server); the server is stopped, by its PID if `pg_ctl stop` fails, and the directory removed."""
    from reground.tools.stores.postgres import stop_local_engine

    root = Path(tempfile.mkdtemp(prefix="reground-engine-test-"))
    path = root / "pg"
    try:
        yield path
    finally:
        if not stop_local_engine(path) and (path / "postmaster.pid").is_file():
            with contextlib.suppress(ProcessLookupError):
                os.kill(_postmaster_pid(path), signal.SIGTERM)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def spec(engine_dir: Path) -> str:
    return f"pgserver:{engine_dir}"


@pytest.fixture(scope="module")
def engine_store(spec: str, hr_corpus: Path) -> Any:
    """The HR documents ingested into the engine through the factory and `ingest`, as the CLI does."""
    from reground.tools.stores.factory import open_store
    from reground.tools.stores.ingest import ingest

    store = open_store(spec, COLLECTION, create=True)
    summary = ingest([hr_corpus], store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert not summary.errors
    assert summary.documents == 4 and summary.chunks_added == store.count() > 4
    return store


def _postmaster_pid(engine_dir: Path) -> int:
    return int((engine_dir / "postmaster.pid").read_text().splitlines()[0])


def _engine_processes(engine_dir: Path) -> list[int]:
    import psutil

    found = []
    for proc in psutil.process_iter(attrs=["name", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if proc.info["name"] == "postgres" and str(engine_dir) in cmdline:
            found.append(proc.pid)
    return found


def test_the_engine_package_is_installed() -> None:
    """`make test` installs the engine extra: missing, this fails (it is not a skip)."""
    import pgserver  # noqa: F401
    import psycopg_pool  # noqa: F401
    from pgvector.psycopg import register_vector  # noqa: F401


def test_ingest_is_idempotent_and_replaces_an_edited_document(
    engine_store: Any, hr_corpus: Path, tmp_path: Path
) -> None:
    from reground.tools.stores.ingest import ingest

    before = engine_store.count()
    again = ingest([hr_corpus], engine_store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert again.unchanged == 4 and again.chunks_added == 0 and engine_store.count() == before
    docs = [json.loads(line) for line in hr_corpus.read_text().splitlines()]
    edited = tmp_path / "edited.jsonl"
    travel = next(d for d in docs if d["doc_id"] == "travel-all")
    edited.write_text(json.dumps({**travel, "text": "# Booking\n\nBook every trip through the zeppelin desk."}) + "\n")
    summary = ingest([edited], engine_store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert summary.replaced == 1
    texts = " ".join(c["text"] for c in engine_store.chunks_for_documents(["travel-all"]))
    assert "zeppelin" in texts and "economy" not in texts
    hits = engine_store.lexical_search("zeppelin desk", 5)
    assert hits and hits[0][0]["doc_id"] == "travel-all"
    assert engine_store.lexical_search("economy", 50) == []  # the old text's terms left the index
    restored = ingest([hr_corpus], engine_store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert restored.replaced == 1 and engine_store.count() == before


def test_stale_screening_marks_are_refreshed_in_the_engine_without_embedding(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents ingested under other injection rules, ingested again unchanged: their chunks' flags, marks, scope
    tokens and field statistics are updated in place (the same rows, no embedding); a second ingest writes nothing."""
    from reground.tools.signals import injection, injection_screen
    from reground.tools.stores.factory import open_store
    from reground.tools.stores.ingest import ingest_documents

    from tests.unit.test_ingest_rescreen import DOCS, CountingEmbedder, _assert_current, _older_rules

    embedder = CountingEmbedder()
    store = open_store(spec, "engine-rescreen", embedder=embedder, create=True)
    settings = Path(tempfile.mkdtemp(prefix="reground-rescreen-"))
    try:
        monkeypatch.setattr(injection_screen, "rules_fingerprint", lambda: "the rules of an older reground")
        monkeypatch.setattr(injection, "_passage_flags", _older_rules)
        assert not ingest_documents(
            DOCS, store, progress=False, settings_root=settings, max_tokens=INGEST.chunk_tokens
        ).errors
        monkeypatch.undo()
        stale = store.chunks_for_documents(["expenses", "leave"])  # cached per store version
        assert "injection_flags" in {c["doc_id"]: c["metadata"] for c in stale}["leave"]
        hashes, version = store.document_hashes(), store.version()
        with store._conn() as conn:
            rows = conn.execute(f"SELECT row_id, chunk_id FROM {store.t['chunks']} ORDER BY row_id").fetchall()
        embedder.texts.clear()

        summary = ingest_documents(DOCS, store, progress=False, settings_root=settings, max_tokens=INGEST.chunk_tokens)

        assert (summary.rescreened, summary.unchanged, summary.chunks_added, embedder.texts) == (2, 2, 0, [])
        assert store.document_hashes() == hashes and store.version() != version
        _assert_current(store.chunks_for_documents(["expenses", "leave"], where={"country": "DE"}))
        _assert_current(store.all_chunks())
        with store._conn() as conn:
            assert conn.execute(f"SELECT row_id, chunk_id FROM {store.t['chunks']} ORDER BY row_id").fetchall() == rows
            flagged = conn.execute(
                f"SELECT doc_id FROM {store.t['chunks']} WHERE scope_tokens::text LIKE '%injection_flags%'"
            ).fetchall()
            values = conn.execute(
                f"SELECT value, docs FROM {store.t['values']} WHERE field = 'injection_flags'"
            ).fetchall()
        assert flagged == [("expenses",)] and len(values) == 1 and values[0][0].endswith(f"{DOCS[0].text[-40:]}']")
        version = store.version()
        again = ingest_documents(DOCS, store, progress=False, settings_root=settings, max_tokens=INGEST.chunk_tokens)
        assert (again.rescreened, again.unchanged, store.version()) == (0, 2, version)
    finally:
        store.drop()
        shutil.rmtree(settings, ignore_errors=True)


def test_a_graph_turn_through_the_store_spec_answers_inside_the_scope(spec: str, engine_store: Any) -> None:
    """`Context(store=spec)`: the graph's services open the engine store themselves (no store instance given)."""
    model = ScriptedChatModel()
    graph = build_graph(chat_model=model, checkpointer=InMemorySaver())
    ctx = Context(collection=COLLECTION, store=spec, metadata_filter={"country": "DE"})
    config = run_config(ctx, configurable={"thread_id": "engine-1"})
    first = graph.invoke(
        {"messages": [{"role": "user", "content": "How many days of annual leave do I get?"}]},
        config=config,
        context=ctx,
    )
    docs = {p["doc_id"] for p in first["result"]["passages"]}
    assert "annual-leave-de" in docs and "annual-leave-us" not in docs, docs
    other = run_config(ctx, configurable={"thread_id": "engine-2"})
    second = graph.invoke(
        {"messages": [{"role": "user", "content": "How long is sick pay?"}]}, config=other, context=ctx
    )
    result = second["result"]
    assert result["passages"][0]["doc_id"] == "sick-pay-all"
    assert "six weeks" in result["answer"]
    assert all(p["doc_id"] != "annual-leave-us" for p in result["passages"])


def test_every_search_stage_keeps_the_scope(engine_store: Any) -> None:
    us_chunks = {c["chunk_id"] for c in engine_store.chunks_for_documents(["annual-leave-us"])}
    assert us_chunks
    where = {"country": "DE"}
    for query in ("paid time off United States", "days of leave carry over", "roll over unused days"):
        vector = engine_store.embedder.embed([query])[0]
        for hits in (engine_store.dense_search(vector, 50, where), engine_store.lexical_search(query, 50, where)):
            ids = {c["chunk_id"] for c, _ in hits}
            assert ids and not ids & us_chunks, (query, ids & us_chunks)
            assert all(c["metadata"]["country"] in ("DE", "all") for c, _ in hits)
        unscoped = {c["chunk_id"] for c, _ in engine_store.dense_search(vector, 50)}
        assert unscoped & us_chunks  # control: without the scope the US document is found
    assert engine_store.chunks_for_documents(["annual-leave-us"], where=where) == []
    assert engine_store.scope_miss({"country": "de"}) is not None and "'DE'" in engine_store.scope_miss(
        {"country": "de"}
    )
    assert engine_store.scope_miss({"country": ["DE", "US"]}) is None
    from reground.tools.stores.vector_store import UnknownMetadataFieldError

    with pytest.raises(UnknownMetadataFieldError):
        engine_store.dense_search(engine_store.embedder.embed(["x"])[0], 5, {"tenant": "acme"})


def test_a_turn_reads_no_whole_collection(engine_store: Any) -> None:
    """Retrieval asks the engine for candidates and per-document reads, never for the collection."""
    from reground.tools.retrieval.search import HybridRetriever, conversation_query

    calls: list[str] = []
    for name in ("load_snapshot", "all_chunks"):
        original = getattr(engine_store, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            calls.append(_name)
            return _original(*args, **kwargs)

        setattr(engine_store, name, counted)
    try:
        retriever = HybridRetriever(engine_store)
        history = [{"role": "user", "text": "How long is sick pay?"}, {"role": "agent", "text": "Six weeks."}]
        query = conversation_query(
            "And do I need a certificate?",
            history,
            budget_tokens=BUDGETS.history_token_budget,
            phrase_tokens=RetrievalSettings.phrase_history_tokens,
        )
        passages = retriever.search(
            query, where={"country": "DE"}, doc_k=BUDGETS.doc_candidates, paragraph_k=BUDGETS.paragraph_candidates
        )
    finally:
        for name in ("load_snapshot", "all_chunks"):
            delattr(engine_store, name)
    assert passages and passages[0]["doc_id"] == "sick-pay-all"
    assert calls == []


def test_the_engine_killed_and_started_again_keeps_the_collection(
    engine_dir: Path, spec: str, engine_store: Any
) -> None:
    from reground.tools.stores.factory import open_store
    from reground.tools.stores.postgres import EngineError, local_engine_uri

    vector = engine_store.embedder.embed(["sick pay doctor's certificate"])[0]
    before = [c["chunk_id"] for c, _ in engine_store.dense_search(vector, 5)]
    count = engine_store.count()
    os.kill(_postmaster_pid(engine_dir), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while _engine_processes(engine_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _engine_processes(engine_dir), "the engine's backends outlived its postmaster"
    with pytest.raises(EngineError, match="engine"):
        engine_store.dense_search(vector, 5)
    local_engine_uri(engine_dir)  # what any process opening the spec does: starts it (crash recovery)
    assert _engine_processes(engine_dir)
    assert [c["chunk_id"] for c, _ in engine_store.dense_search(vector, 5)] == before  # the old store reconnects
    reopened = open_store(spec, COLLECTION)
    assert reopened.count() == count
    assert reopened.lexical_search("doctor's certificate", 3)[0][0]["doc_id"] == "sick-pay-all"


# --- `langgraph dev` on the engine backend, through the SDK -------------------------------------------------------

SERVER_COLLECTION = "engine-served"
FAST: dict[str, Any] = {
    "chat_model": "local:smollm2-135m",
    "max_answer_tokens": 40,
    "use_llm_groundedness_judge": False,
    "use_self_check": False,
    "max_reground_attempts": 0,
    "use_principle_refinement": False,
    "llm_timeout_s": 60.0,
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, spec: str) -> Iterator[Any]:
    """A local LLM server and `langgraph dev` whose graphs read and write the engine (REGROUND_STORE)."""
    from servers import start_langgraph_dev, start_local_llm

    try:  # as tests/integration/test_langgraph_server.py: the LLM stack, not the engine, may be missing
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"local LLM stack not installed ({exc}); `make test` installs it")
    llm = start_local_llm("smollm2-135m", tmp_path_factory.mktemp("engine-llm"))
    workdir = tmp_path_factory.mktemp("engine-langgraph-dev")
    try:
        env = {"REGROUND_STORE": spec, "REGROUND_LOCAL_LLM_URL": llm.url, "REGROUND_STATE_DIR": str(workdir / "s")}
        dev = start_langgraph_dev(workdir, env)
        dev.llm_url = llm.url  # type: ignore[attr-defined]  # the CLI test below asks the same LLM server
        try:
            yield dev
        finally:
            dev.stop()
    finally:
        llm.stop()


def test_langgraph_dev_ingests_into_and_answers_from_the_engine(served: Any, spec: str, hr_corpus: Path) -> None:
    import httpx
    from langgraph_sdk import get_sync_client
    from reground.tools.stores.factory import open_store

    client = get_sync_client(url=served.url, timeout=httpx.Timeout(300.0, connect=10.0))
    ingest_id = client.assistants.search(graph_id="ingest")[0]["assistant_id"]
    docs = [json.loads(line) for line in hr_corpus.read_text().splitlines()]
    summary = client.runs.wait(None, ingest_id, input={"documents": docs}, context={"collection": SERVER_COLLECTION})
    assert summary["summary"]["collection"] == SERVER_COLLECTION, summary
    # The server process wrote into the engine: this process sees the same collection there.
    written = open_store(spec, SERVER_COLLECTION)
    assert written.count() == summary["summary"]["chunks_added"] > 4
    reground_id = client.assistants.search(graph_id="reground")[0]["assistant_id"]
    thread = client.threads.create()
    output = client.runs.wait(
        thread["thread_id"],
        reground_id,
        input={"messages": [{"role": "user", "content": "How many days of paid time off do I get?"}]},
        context={**FAST, "collection": SERVER_COLLECTION, "metadata_filter": {"country": "US"}},
    )
    result = output["result"]
    docs_seen = {p["doc_id"] for p in result["passages"]}
    assert "annual-leave-us" in docs_seen and "annual-leave-de" not in docs_seen, docs_seen
    chunk_ids = {c["chunk_id"] for c in written.chunks_for_documents(sorted(docs_seen))}
    assert {p["chunk_id"] for p in result["passages"]} <= chunk_ids
    assert "20 days" in result["answer"]


# --- LangChain both ways ------------------------------------------------------------------------------------------


def test_reground_retrieval_as_a_langchain_retriever(engine_store: Any) -> None:
    from langchain_core.retrievers import BaseRetriever
    from reground.tools.retrieval.langchain import RegroundRetriever

    retriever = RegroundRetriever(store=engine_store, k=3, where={"country": "US"})
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("How many days of paid time off do I get?")
    assert docs and docs[0].metadata["doc_id"] == "annual-leave-us"
    assert all(d.metadata["country"] in ("US", "all") for d in docs)
    assert docs[0].id == docs[0].metadata["chunk_id"] and docs[0].page_content in {
        c["text"] for c in engine_store.chunks_for_documents(["annual-leave-us"])
    }
    # A follow-up is searched with its dialogue, as in the graph.
    history = [{"role": "user", "text": "How do I report sick?"}, {"role": "agent", "text": "Tell your manager."}]
    follow = retriever.invoke("And how long am I paid?", history=history)
    assert follow[0].metadata["doc_id"] == "sick-pay-all"


def test_a_langchain_vector_store_plugs_in_for_dense_search(
    engine_store: Any, spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real LangChain store (langchain-chroma over embedded Chroma) serves the dense side, by instance and spec."""
    import sys

    from langchain_chroma import Chroma
    from reground.tools.retrieval.search import HybridRetriever, conversation_query
    from reground.tools.stores.factory import open_store
    from reground.tools.stores.langchain import LangChainDenseStore, LangChainEmbeddings, index_chunks

    chunks = engine_store.all_chunks()
    vectorstore = Chroma(
        collection_name="user-docs",
        embedding_function=LangChainEmbeddings(engine_store.embedder),
        persist_directory=str(tmp_path / "chroma"),
        collection_metadata={"hnsw:space": "cosine"},
    )
    assert index_chunks(vectorstore, chunks) == len(chunks)
    store = LangChainDenseStore(vectorstore, engine_store)
    vector = engine_store.embedder.embed(["roll over unused paid time off"])[0]
    own = [c["chunk_id"] for c, _ in engine_store.dense_search(vector, 5)]
    plugged = store.dense_search(vector, 5)
    assert [c["chunk_id"] for c, _ in plugged] == own  # same vectors: same neighbours, scored by cosine
    scoped = store.dense_search(vector, 10, {"country": "DE"})
    assert scoped and all(c["metadata"]["country"] in ("DE", "all") for c, _ in scoped)
    passages = HybridRetriever(store).search(
        conversation_query(
            "How much annual leave in Germany?",
            [],
            budget_tokens=BUDGETS.history_token_budget,
            phrase_tokens=RetrievalSettings.phrase_history_tokens,
        ),
        where=None,
        doc_k=BUDGETS.doc_candidates,
        paragraph_k=BUDGETS.paragraph_candidates,
    )
    assert passages[0]["doc_id"] == "annual-leave-de"
    # By spec: the user's factory module names the VectorStore, the engine holds the rest.
    module = tmp_path / "user_stores.py"
    module.write_text(
        "from langchain_chroma import Chroma\n"
        f"def docs(collection, embeddings):\n"
        f"    return Chroma(collection_name='user-docs', embedding_function=embeddings, "
        f"persist_directory={str(tmp_path / 'chroma')!r})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("user_stores", None)
    opened = open_store(f"langchain:user_stores:docs+{spec}", COLLECTION)
    assert isinstance(opened, LangChainDenseStore)
    assert [c["chunk_id"] for c, _ in opened.dense_search(vector, 5)] == own
    assert opened.count() == engine_store.count()  # everything but dense search is the engine's


def test_the_cli_asks_the_engine_by_store_spec(served: Any, spec: str, engine_store: Any, tmp_path: Path) -> None:
    """`reground ask --store <spec>`: the CLI's turn reads the engine (another process than the one that ingested)."""
    import subprocess
    import sys

    env = {**os.environ, "REGROUND_LOCAL_LLM_URL": served.llm_url, "REGROUND_STATE_DIR": str(tmp_path / "state")}
    command = [sys.executable, "-m", "reground", "ask", "How long do I get full pay when I am sick?"]
    command += [
        "--store",
        spec,
        "--collection",
        COLLECTION,
        "--model",
        "local:smollm2-135m",
        "--data-dir",
        str(tmp_path),
    ]
    command += ["--filter", '{"country": "DE"}', "--json", "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    docs = [p["doc_id"] for p in result["passages"]]
    assert docs and docs[0] == "sick-pay-all" and "annual-leave-us" not in docs, docs


def test_the_cli_lists_the_engine_collections(spec: str, engine_store: Any) -> None:
    import subprocess
    import sys

    def collections(*extra: str) -> Any:
        command = [sys.executable, "-m", "reground", "collections", *extra, "--store", spec, "--json"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    listed = {row["collection"]: row for row in collections()}
    assert listed[COLLECTION]["documents"] == 4 and listed[COLLECTION]["chunks"] == engine_store.count()
    one = collections(COLLECTION)
    assert {"country", "employment_type"} <= set(one["metadata_fields"])
    assert sum(d["chunks"] for d in one["document_chunks"]) == engine_store.count()
    missing = subprocess.run(
        [sys.executable, "-m", "reground", "collections", "no-such-collection", "--store", spec],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert missing.returncode == 3 and "does not exist" in missing.stderr
