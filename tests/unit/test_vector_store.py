"""The storage interface: ingest and retrieval work through `VectorStore` alone, and specs pick the store.

`MemoryStore` below is the whole of a second backend (about 40 lines, no Chroma): if ingest or retrieval
reached past the interface into Chroma, these tests would fail with an AttributeError.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from reground.tools.errors import InputError
from reground.tools.retrieval.search import HybridRetriever, RetrievalQuery
from reground.tools.stores.factory import open_store, search_index
from reground.tools.stores.ingest import ingest_documents
from reground.tools.stores.search_index import SearchIndex
from reground.tools.stores.vector_store import (
    CollectionNotFoundError,
    EmptyCollectionError,
    Snapshot,
    StoreSpecError,
    VectorStore,
    parse_store_spec,
    register_store,
    store_spec,
)
from reground.tools.text.lexical import words
from reground.tools.text.loaders import Document
from reground.tools.tuning.stores import INGEST
from reground.tools.tuning.turn import BUDGETS
from reground.tools.types import Chunk


class HashEmbedder:
    """Bag of hashed words, L2-normalised: texts sharing words are close (no model, deterministic)."""

    name = "hash-64"
    dimension = 64

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in words(text):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


class MemoryStore:
    """A complete VectorStore in a dict: documents → (hash, chunks, vectors)."""

    def __init__(self, collection: str, embedder: HashEmbedder | None = None) -> None:
        self.collection = collection
        self._embedder = embedder or HashEmbedder()
        self.docs: dict[str, tuple[str, list[Chunk], np.ndarray]] = {}
        self.writes = 0
        self._lock = threading.RLock()

    @property
    def embedder(self) -> Any:
        return self._embedder

    @contextlib.contextmanager
    def writing(self, *, on_wait: Any = None) -> Iterator[None]:
        with self._lock:
            yield

    def take_repaired(self) -> list[str]:
        return []

    def document_hashes(self) -> dict[str, str]:
        return {doc_id: record[0] for doc_id, record in self.docs.items()}

    def replace_document(self, doc_id: str, content_hash: str, chunks: list[Chunk]) -> None:
        self.docs[doc_id] = (content_hash, list(chunks), self._embedder.embed([c["text"] for c in chunks]))
        self.writes += 1

    def delete_document(self, doc_id: str) -> int:
        record = self.docs.pop(doc_id, None)
        self.writes += 1
        return len(record[1]) if record else 0

    def version(self) -> str:
        return str(self.writes)

    def load_snapshot(self) -> Snapshot:
        chunks = [c for _, doc_chunks, _ in self.docs.values() for c in doc_chunks]
        vectors = [v for _, _, doc_vectors in self.docs.values() for v in doc_vectors]
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(chunks), self._embedder.dimension)
        return Snapshot(self.version(), chunks, matrix)


DOCS = [
    Document("leave", "Annual leave", "Employees get 30 days of annual leave per year.", metadata={"country": "DE"}),
    Document("travel", "Travel costs", "Train tickets are reimbursed in second class.", metadata={"country": "DE"}),
    Document("leave-us", "Vacation", "Staff in the US get 15 days of vacation per year.", metadata={"country": "US"}),
]


def test_a_store_of_its_own_satisfies_the_interface() -> None:
    assert isinstance(MemoryStore("docs"), VectorStore)
    assert not isinstance(object(), VectorStore)


def test_ingest_and_retrieval_through_the_interface_alone() -> None:
    store = MemoryStore("docs")
    summary = ingest_documents(DOCS, store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert (summary.documents, summary.replaced, summary.unchanged) == (3, 0, 0)
    assert summary.chunks_added == len(store.load_snapshot().chunks) >= 3

    retriever = HybridRetriever(search_index(store))
    query = RetrievalQuery(question="How many days of annual leave?", history_query="How many days of annual leave?")
    passages = retriever.search(query, where=None, doc_k=3, paragraph_k=3)
    assert passages[0]["doc_id"] == "leave"
    scoped = retriever.search(query, where={"country": "US"}, doc_k=3, paragraph_k=3)
    assert {p["doc_id"] for p in scoped} == {"leave-us"}


def test_unchanged_documents_are_skipped_and_changes_are_seen_by_the_index() -> None:
    store = MemoryStore("docs")
    ingest_documents(DOCS, store, progress=False, max_tokens=INGEST.chunk_tokens)
    index = SearchIndex(store)
    assert {c["doc_id"] for c in index.all_chunks()} == {"leave", "travel", "leave-us"}
    writes = store.writes

    again = ingest_documents(DOCS, store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert (again.unchanged, store.writes) == (3, writes), "unchanged documents are not rewritten"

    changed = [Document("travel", "Travel costs", "Flights are reimbursed in economy.", metadata={"country": "DE"})]
    summary = ingest_documents(changed, store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert summary.replaced == 1
    hits = index.lexical_search("flights economy", k=3)
    assert [c["doc_id"] for c, _ in hits] == ["travel"], "the index reloads after the store's version changed"
    assert store.delete_document("travel") == 1
    assert "travel" not in {c["doc_id"] for c in index.all_chunks()}


def test_specs_name_chroma_and_registered_stores() -> None:
    assert parse_store_spec("chroma") == ("chroma", "")
    assert parse_store_spec("chroma:/data/store") == ("chroma", "/data/store")
    assert parse_store_spec("chroma-http://10.0.0.5:8000") == ("chroma-http", "http://10.0.0.5:8000")
    assert parse_store_spec("chroma-https://db.example.com") == ("chroma-https", "https://db.example.com")
    assert store_spec("/d", "") == "chroma:/d"
    assert store_spec(None, "127.0.0.1:8000") == "chroma-http://127.0.0.1:8000"
    assert store_spec(None, "") == "chroma"
    with pytest.raises(StoreSpecError, match="chroma-http://host:port") as caught:
        parse_store_spec("pinecone:index")
    assert isinstance(caught.value, InputError) and caught.value.exit_code == 2

    opened: list[tuple[str, str, bool]] = []

    def memory(rest: str, collection: str, *, embedder: Any, create: bool, on_wait: Any) -> VectorStore:
        opened.append((rest, collection, create))
        return MemoryStore(collection)

    register_store("memory-test", memory)
    store = open_store("memory-test:anything", "docs", create=True)
    assert isinstance(store, MemoryStore) and opened == [("anything", "docs", True)]


def test_chroma_spec_opens_the_persisted_store(hr_store_dir: str) -> None:
    store = open_store(f"chroma:{hr_store_dir}", "test-hr")
    assert isinstance(store, VectorStore)
    snapshot = store.load_snapshot()
    assert snapshot.vectors.shape == (len(snapshot.chunks), store.embedder.dimension) and snapshot.chunks
    assert len(snapshot.ids) == len(set(snapshot.ids)) == len(snapshot.texts) == len(snapshot.metadatas)
    index = search_index(store)
    assert index.count() == len(snapshot.chunks)
    assert set(store.document_hashes()) == {c["doc_id"] for c in snapshot.chunks}


def test_the_context_store_spec_picks_the_store(hr_store_dir: str, tmp_path: Any) -> None:
    from reground.nodes.context import Context
    from reground.tools.services import Services

    spec_context = Context(collection="test-hr", store=f"chroma:{hr_store_dir}", data_dir=str(tmp_path))
    assert Services().passage_store(spec_context).count() > 0, "the spec wins over data_dir (which is empty)"
    with pytest.raises(CollectionNotFoundError):
        Services().passage_store(Context(collection="test-hr", data_dir=str(tmp_path)))


def test_a_callers_vector_store_is_searched_through_a_search_index() -> None:
    from reground.nodes.context import Context
    from reground.tools.services import Services

    store = MemoryStore("docs")
    with pytest.raises(EmptyCollectionError):
        Services(store=store).passage_store(Context(collection="docs"))
    ingest_documents(DOCS, store, progress=False, max_tokens=INGEST.chunk_tokens)
    services = Services(store=store)
    searchable = services.passage_store(Context(collection="docs"))
    assert isinstance(searchable, SearchIndex) and searchable is services.passage_store(Context(collection="docs"))
    query = RetrievalQuery(question="train tickets", history_query="train tickets")
    assert (
        services.retriever(Context(collection="docs")).search(
            query, where=None, doc_k=BUDGETS.doc_candidates, paragraph_k=BUDGETS.paragraph_candidates
        )[0]["doc_id"]
        == "travel"
    )


def test_reground_ingest_writes_into_the_store_its_spec_names(hr_corpus: Any, tmp_path: Any) -> None:
    from reground.cli import main

    target = tmp_path / "by-spec"
    args = ["ingest", str(hr_corpus), "--collection", "spec-docs", "--data-dir", str(tmp_path / "unused")]
    assert main([*args, "--store", f"chroma:{target}", "--quiet"]) == 0
    store = open_store(f"chroma:{target}", "spec-docs")
    assert store.document_hashes() and search_index(store).count() > 0
    with pytest.raises(CollectionNotFoundError):
        open_store(f"chroma:{tmp_path / 'unused'}", "spec-docs")
    assert main([*args[:4], "--store", "nosuch:x", "--quiet"]) == 2, "a bad spec is an input error"
