"""The store through a real Chroma server (`chroma run` + chromadb.HttpClient), not the embedded one.

A Chroma server runs on a free port with its own data path; documents go in through the ingestion
graph with `chroma_url` set, and come back out through the retrieve node and the full graph. The
local data dir is checked to stay free of Chroma files: with a remote Chroma, the BM25 (lexical)
index is not a file at all, it is built in memory from the chunks the store reads over HTTP
(`PassageStore._load` → `_Snapshot.bm25`), so every worker that points at the server gets the same
lexical index without a shared disk.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reground.graph.ingest_graph import IngestContext, build_ingest_graph
from reground.nodes.context import Context
from reground.tools.services import Services
from reground.tools.stores.store import MANIFEST_SUFFIX, VERSION_ID, PassageStore
from servers import ChromaServer, start_chroma

pytestmark = pytest.mark.integration

COLLECTION = "chroma-server-hr"

DOCS: list[dict[str, Any]] = [
    {
        "doc_id": "leave-de",
        "title": "Annual leave (Germany)",
        "country": "DE",
        "text": "# Entitlement\n\nFull-time employees in Germany get 30 days of paid annual leave per calendar "
        "year (Urlaubsanspruch).\n\n# Carry-over\n\nUp to 5 unused days of annual leave carry over; they "
        "expire on 31 March.",
    },
    {
        "doc_id": "leave-us",
        "title": "Paid time off (United States)",
        "country": "US",
        "text": "# Entitlement\n\nFull-time employees in the United States get 20 days of paid time off per "
        "year, accrued monthly.\n\n# Carry-over\n\nUp to 10 unused days roll over to the next year.",
    },
    {
        "doc_id": "expenses-all",
        "title": "Business travel expenses",
        "country": "all",
        "text": "# Receipts\n\nSubmit receipts in the expense portal within 30 days of the trip. Approved "
        "expenses are paid with the next salary.",
    },
    {
        "doc_id": "parental-de",
        "title": "Parental leave (Germany)",
        "country": "DE",
        "text": "# Elternzeit\n\nParents in Germany can take up to three years of parental leave per child. "
        "Tell HR seven weeks before it starts.",
    },
]

LEAVE_DE = "How many days of annual leave do I get in Germany?"


def _http_client(server: ChromaServer) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.HttpClient(host="127.0.0.1", port=server.port, settings=Settings(anonymized_telemetry=False))


def _ingest(server: ChromaServer, data_dir: Path, documents: list[dict[str, Any]]) -> dict[str, Any]:
    """Through the ingestion graph (what `langgraph.json` serves as `ingest`), chroma_url in its context."""
    context = IngestContext(collection=COLLECTION, data_dir=str(data_dir), chroma_url=server.url)
    out = build_ingest_graph().invoke({"documents": documents}, context=context)
    return dict(out["summary"])


def _context(server: ChromaServer, data_dir: Path, **overrides: Any) -> Context:
    return Context(
        collection=COLLECTION,
        data_dir=str(data_dir),
        chroma_url=server.url,
        groundedness={"use_llm_groundedness_judge": False},
        **overrides,
    )


def _retrieve(context: Context, services: Services | None = None) -> list[dict[str, Any]]:
    """The graph's retrieve node on a fresh question (the same call the graph makes)."""
    from langgraph.runtime import Runtime
    from reground.nodes.common import NodeEnv
    from reground.nodes.retrieve import retrieve

    env = NodeEnv(services=services or Services(), runtime=Runtime(context=context, stream_writer=lambda _: None))
    state: Any = {"question": LEAVE_DE, "history": [], "keywords": []}
    return list(retrieve(state, env)["candidates"])


def _chroma_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name == "chroma" or p.suffix in {".sqlite3", ".bin"}]


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    root = tmp_path_factory.mktemp("chroma-server")
    server = start_chroma(root / "db", log_path=root / "chroma.log")
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def local_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reground data dir of the client side: must stay free of Chroma files."""
    return tmp_path_factory.mktemp("reground-data")


@pytest.fixture(scope="module")
def ingested(chroma: ChromaServer, local_dir: Path) -> dict[str, Any]:
    summary = _ingest(chroma, local_dir, DOCS)
    assert summary["errors"] == [], summary
    return summary


def test_ingestion_writes_to_the_server_not_a_local_dir(
    chroma: ChromaServer, local_dir: Path, ingested: dict[str, Any]
) -> None:
    assert ingested["documents"] == len(DOCS) and ingested["chunks_added"] >= len(DOCS)
    client = _http_client(chroma)
    names = {c if isinstance(c, str) else c.name for c in client.list_collections()}
    assert {COLLECTION, COLLECTION + MANIFEST_SUFFIX} <= names
    chunks = client.get_collection(COLLECTION)
    assert chunks.count() >= ingested["chunks_added"]
    stored = chunks.get(include=["metadatas"])
    assert {m["doc_id"] for m in stored["metadatas"]} == {d["doc_id"] for d in DOCS}
    manifest = client.get_collection(COLLECTION + MANIFEST_SUFFIX).get(include=["metadatas"])
    per_doc = {i: m for i, m in zip(manifest["ids"], manifest["metadatas"], strict=True) if i != VERSION_ID}
    assert set(per_doc) == {d["doc_id"] for d in DOCS}
    assert sum(int(m["chunks"]) for m in per_doc.values()) == chunks.count()
    # The data is in the server's path; the client's data dir holds no Chroma store at all.
    assert (chroma.path / "chroma.sqlite3").is_file()
    assert _chroma_files(local_dir) == []
    assert PassageStore.list_collections(local_dir, chroma_url=chroma.url) == [COLLECTION]


def test_retrieve_node_ranks_the_targeted_document_first(
    chroma: ChromaServer, local_dir: Path, ingested: dict[str, Any]
) -> None:
    services = Services()
    candidates = _retrieve(_context(chroma, local_dir), services)
    assert candidates and candidates[0]["doc_id"] == "leave-de", [c["doc_id"] for c in candidates]
    assert services.passage_store(_context(chroma, local_dir)).chroma_url == chroma.url


def test_metadata_filter_restricts_results_over_http(
    chroma: ChromaServer, local_dir: Path, ingested: dict[str, Any]
) -> None:
    candidates = _retrieve(_context(chroma, local_dir, metadata_filter={"country": "US"}))
    doc_ids = [c["doc_id"] for c in candidates]
    assert doc_ids and doc_ids[0] == "leave-us", doc_ids
    assert {c["metadata"]["country"] for c in candidates} <= {"US", "all"}
    assert not {"leave-de", "parental-de"} & set(doc_ids)
    # The server-side `where` (dense search) is restricted too, not only the client-side re-check.
    store = PassageStore.open(COLLECTION, data_dir=local_dir, chroma_url=chroma.url)
    vector = store.embedder.embed([LEAVE_DE])[0]
    raw = store._chunks.query(
        query_embeddings=[vector.tolist()],
        n_results=store.count(),
        where={"m_country": {"$in": ["US", "all"]}},
        include=["metadatas"],
    )
    assert {m["m_country"] for m in raw["metadatas"][0]} <= {"US", "all"}
    assert {h[0]["doc_id"] for h in store.dense_search(vector, 10, where={"country": "DE"})} <= {
        "leave-de",
        "parental-de",
        "expenses-all",
    }


def test_hybrid_retrieval_with_a_remote_chroma(chroma: ChromaServer, local_dir: Path, ingested: dict[str, Any]) -> None:
    """Both signals work: dense through the server's HNSW index, BM25 built in memory from the server's chunks."""
    from reground.tools.retrieval.search import RetrievalQuery

    services = Services()
    context = _context(chroma, local_dir)
    retriever = services.retriever(context)
    query = RetrievalQuery(question=LEAVE_DE, history_query=LEAVE_DE)
    signals = retriever.document_scores(query, where=None)
    assert set(signals) == {"dense_topic", "lexical_history"}
    assert max(signals["dense_topic"], key=signals["dense_topic"].get) == "leave-de"
    assert max(signals["lexical_history"], key=signals["lexical_history"].get) == "leave-de"
    # A term only BM25 can match exactly, and only one document contains.
    lexical = retriever.store.lexical_search("Urlaubsanspruch", 5)
    assert [c["doc_id"] for c, _ in lexical] == ["leave-de"]
    assert retriever.store.lexical_search("Urlaubsanspruch", 5, where={"country": "US"}) == []
    # Nothing was written next to the client to serve the lexical index.
    assert _chroma_files(local_dir) == []
    assert not any(p.is_file() for p in local_dir.rglob("*")), sorted(local_dir.rglob("*"))


def test_chroma_url_from_the_environment(
    chroma: ChromaServer, local_dir: Path, ingested: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGROUND_CHROMA_URL", chroma.url)
    monkeypatch.setenv("REGROUND_DATA_DIR", str(local_dir))
    context = Context(
        collection=COLLECTION,
        groundedness={"use_llm_groundedness_judge": False},
    )
    assert context.chroma_url == chroma.url
    assert IngestContext(collection=COLLECTION).chroma_url == chroma.url
    store = Services().passage_store(context)
    assert store.chroma_url == chroma.url
    assert store.count() == _http_client(chroma).get_collection(COLLECTION).count()


def test_full_graph_turn_answers_from_the_server(
    chroma: ChromaServer, local_dir: Path, ingested: dict[str, Any]
) -> None:
    from reground.graph.builder import build_graph, run_config

    from reground.testing.fake_chat import ScriptedChatModel

    context = _context(chroma, local_dir)
    graph = build_graph(chat_model=ScriptedChatModel())  # no store instance: built from context.chroma_url
    message = {"role": "user", "content": LEAVE_DE}
    out = graph.invoke({"messages": [message]}, config=run_config(context), context=context)
    passages = out["result"]["passages"]
    assert passages and passages[0]["doc_id"] == "leave-de", [p["doc_id"] for p in passages]


def test_reingest_is_idempotent_and_updates_are_seen_by_other_clients(
    chroma: ChromaServer, local_dir: Path, ingested: dict[str, Any]
) -> None:
    client = _http_client(chroma)
    before = client.get_collection(COLLECTION).get(include=["metadatas"])
    before_ids = sorted(before["ids"])
    rows = zip(before["ids"], before["metadatas"], strict=True)
    old_expense_ids = {i for i, m in rows if m["doc_id"] == "expenses-all"}
    reader = PassageStore.open(COLLECTION, data_dir=local_dir, chroma_url=chroma.url)
    assert reader.count() == len(before_ids)

    again = _ingest(chroma, local_dir, DOCS)
    assert (again["chunks_added"], again["unchanged"], again["replaced"]) == (0, len(DOCS), 0), again
    assert sorted(client.get_collection(COLLECTION).get(include=[])["ids"]) == before_ids, "no chunk rewritten"

    # One document changes: only it is replaced, its old generation is deleted on the server, and a
    # reader that opened the collection earlier (another worker) sees the new text on its next read.
    changed = [dict(d) for d in DOCS]
    changed[2]["text"] += " Taxi receipts need the route written on them."
    updated = _ingest(chroma, local_dir, changed)
    assert (updated["replaced"], updated["unchanged"]) == (1, len(DOCS) - 1), updated
    after_ids = set(client.get_collection(COLLECTION).get(include=[])["ids"])
    assert not after_ids & old_expense_ids
    assert len(after_ids) == len(before_ids) - len(old_expense_ids) + updated["chunks_added"]
    assert "Taxi receipts" in " ".join(c["text"] for c in reader.chunks_for_documents(["expenses-all"]))
    assert reader.count() == len(after_ids)


def test_data_persists_across_a_server_restart(chroma: ChromaServer, local_dir: Path, ingested: dict[str, Any]) -> None:
    services = Services()
    context = _context(chroma, local_dir)
    long_lived = services.passage_store(context)
    ids_before = sorted(_http_client(chroma).get_collection(COLLECTION).get(include=[])["ids"])
    old_pid = chroma.pid

    chroma.restart()
    assert chroma.pid != old_pid

    assert sorted(_http_client(chroma).get_collection(COLLECTION).get(include=[])["ids"]) == ids_before
    fresh = PassageStore.open(COLLECTION, data_dir=local_dir, chroma_url=chroma.url)
    assert fresh.count() == len(ids_before)
    assert _retrieve(context)[0]["doc_id"] == "leave-de"
    # A client opened before the restart keeps working (it reconnects over HTTP).
    assert long_lived.count() == len(ids_before)
    assert _retrieve(context, services)[0]["doc_id"] == "leave-de"


def test_a_taken_port_is_refused_not_shared(chroma: ChromaServer, tmp_path: Path) -> None:
    """`chroma run` on a taken port keeps running and the heartbeat would come from the other server."""
    with pytest.raises(RuntimeError, match=f"port {chroma.port} is already in use"):
        start_chroma(tmp_path / "db", port=chroma.port, log_path=tmp_path / "chroma.log", timeout_s=20)
    assert not (tmp_path / "db").exists()
    assert _http_client(chroma).heartbeat() > 0, "the running server is untouched"
