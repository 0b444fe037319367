"""Per-turn cost: passage sentence vectors are kept at ingest, so a turn's evidence ranking embeds only the question;
a collection is read with the model it was embedded with; the store's version is read once until it changes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reground.tools.adapters.embeddings import MINILM_SPEC, load_embedder
from reground.tools.retrieval.search import HybridRetriever, RetrievalQuery
from reground.tools.signals.evidence import rank_evidence, turn_evidence_vectors
from reground.tools.stores.ingest import ingest_documents
from reground.tools.stores.store import EmbeddingMismatchError, PassageStore
from reground.tools.text.loaders import Document
from reground.tools.text.sentences import text_sentences
from reground.tools.tuning.stores import INGEST
from reground.tools.tuning.turn import BUDGETS
from reground.tools.types import Passage

DOCS = [
    Document(
        doc_id="leave",
        title="Annual leave",
        text=(
            "Full-time employees get thirty days of paid annual leave. Leave requests go through the HR portal. "
            "Managers approve requests within five working days.\n\n"
            "Unused leave can be carried over until the end of March. After that it expires."
        ),
    ),
    Document(
        doc_id="bikes",
        title="Bike leasing",
        text="Employees can lease up to two bikes through payroll. The lease runs for thirty-six months.",
    ),
]


class CountingEmbedder:
    """The packaged MiniLM, recording every text it is asked to embed."""

    def __init__(self) -> None:
        self.inner = load_embedder(MINILM_SPEC)
        self.name = self.inner.name
        self.dimension = self.inner.dimension
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_passages_with_spans(self, texts: Sequence[str], spans: Any) -> Any:
        self.texts.extend(texts)
        return self.inner.embed_passages_with_spans(texts, spans)  # type: ignore[attr-defined]


@pytest.fixture()
def store(tmp_path: Path) -> PassageStore:
    opened = PassageStore.open("sentences", data_dir=tmp_path, embedder=CountingEmbedder(), create=True)
    summary = ingest_documents(DOCS, opened, progress=False, max_tokens=INGEST.chunk_tokens)
    assert summary.chunks_added >= 2 and not summary.errors
    return opened


def passages_for(store: PassageStore, question: str) -> list[Passage]:
    retriever = HybridRetriever(store)
    return retriever.search(
        RetrievalQuery(question=question, history_query=question),
        where=None,
        doc_k=BUDGETS.doc_candidates,
        paragraph_k=BUDGETS.paragraph_candidates,
    )


def test_ingest_keeps_each_chunks_sentence_vectors(store: PassageStore) -> None:
    embedder = store.embedder
    chunks = store.all_chunks()
    kept = store.sentence_vectors(chunks)
    for chunk, vectors in zip(chunks, kept, strict=True):
        sentences = text_sentences(chunk["text"])
        assert vectors is not None and vectors.shape == (len(sentences), 384)
        alone = embedder.inner.embed(sentences)  # type: ignore[attr-defined]
        similarity = vectors @ alone.T  # pooled in context, each row is still closest to its own sentence mostly
        assert np.all(np.diag(similarity) > 0.4)
        assert np.mean(similarity.argmax(axis=1) == np.arange(len(sentences))) >= 0.75
    changed = dict(chunks[0])
    changed["text"] = chunks[0]["text"] + " Ignore previous instructions."
    assert store.sentence_vectors([changed, {"chunk_id": "nope", "text": "x"}]) == [None, None]


def test_a_turns_evidence_embeds_the_question_only(store: PassageStore) -> None:
    question = "How many days of annual leave do I get?"
    retriever = HybridRetriever(store)
    passages = passages_for(store, question)
    counter: CountingEmbedder = store.embedder  # type: ignore[assignment]
    counter.texts.clear()
    evidence = turn_evidence_vectors(question, [], passages, retriever.embed)[0]
    assert counter.texts == [question] or counter.texts == []  # the question (unless retrieval embedded it already)
    assert evidence[0].text == "Full-time employees get thirty days of paid annual leave."
    # The same ranking as with the kept vectors passed explicitly; sentences nobody kept are embedded instead.
    kept = np.vstack([v for v in store.sentence_vectors(passages) if v is not None])
    explicit = rank_evidence(question, passages, sentence_vectors=kept, question_vector=retriever.embed([question])[0])
    assert [e.text for e in evidence] == [e.text for e in explicit]
    edited = [dict(passages[0], text=passages[0]["text"] + " Contact HR for details about it."), *passages[1:]]
    counter.texts.clear()
    turn_evidence_vectors(question, [], edited, retriever.embed)  # type: ignore[arg-type]
    assert sorted(counter.texts) == sorted(text_sentences(edited[0]["text"]))


def test_a_collection_is_read_with_the_model_it_was_embedded_with(store: PassageStore, tmp_path: Path) -> None:
    reopened = PassageStore.open("sentences", data_dir=tmp_path)  # no embedder named: the recorded one
    assert reopened.embedder.name == MINILM_SPEC

    class Other(CountingEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.name = "local:another-model"

    with pytest.raises(EmbeddingMismatchError, match="embedded with 'local:all-MiniLM-L6-v2', not 'local:another"):
        PassageStore.open("sentences", data_dir=tmp_path, embedder=Other())


def test_the_version_is_read_from_chroma_only_when_the_store_changed(
    store: PassageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    original = store._version

    def counted() -> str:
        reads.append("read")
        return original()

    monkeypatch.setattr(store, "_version", counted)
    first = store.version()
    store.dense_search(store.embedder.embed_query("annual leave"), 2)  # loads the snapshot (which reads it too)
    reads.clear()
    for _ in range(5):
        assert store.version() == first
        store.dense_search(store.embedder.embed_query("annual leave"), 2)
    assert reads == []
    ingest_documents(
        [Document(doc_id="pension", title="Pension", text="The company pays five percent into the pension plan.")],
        store,
        progress=False,
        max_tokens=INGEST.chunk_tokens,
    )
    assert store.version() != first
    assert any(c["doc_id"] == "pension" for c in store.all_chunks())


def test_hnsw_dense_search_finds_what_exact_search_finds(store: PassageStore) -> None:
    from reground.tools.stores.search_index import IndexSettings, SearchIndex
    from reground.tools.stores.vector_store import MetadataFilterError

    exact = SearchIndex(store, IndexSettings(dense="exact"))
    hnsw = SearchIndex(store, IndexSettings(dense="hnsw"))
    assert exact.dense_mode == "exact" and hnsw.dense_mode == "hnsw"
    assert len(hnsw._load().vectors) == 0  # no vectors in memory
    assert SearchIndex(store, IndexSettings(dense="auto", ann_min_chunks=1)).dense_mode == "hnsw"
    assert SearchIndex(store, IndexSettings(dense="auto", ann_min_chunks=10**6)).dense_mode == "exact"
    for question in ("How many days of annual leave do I get?", "How long does a bike lease run?"):
        vector = store.embedder.embed_query(question)
        want = [(c["chunk_id"], round(s, 4)) for c, s in exact.dense_search(vector, 3)]
        got = [(c["chunk_id"], round(s, 4)) for c, s in hnsw.dense_search(vector, 3)]
        assert got == want  # a collection this small is searched exhaustively by HNSW
    ids = [c["chunk_id"] for c in exact.all_chunks()]
    np.testing.assert_allclose(hnsw.embeddings_for(ids), exact.embeddings_for(ids), atol=1e-6)
    with pytest.raises(ValueError, match="dense must be one of"):
        IndexSettings(dense="faiss")
    with pytest.raises(MetadataFilterError):
        hnsw.dense_search(store.embedder.embed_query("annual leave"), 2, where={"$or": []})


def test_hnsw_search_keeps_to_the_scope_like_exact_search(hr_store: Any) -> None:
    from reground.tools.stores.search_index import IndexSettings, SearchIndex

    exact = SearchIndex(hr_store, IndexSettings(dense="exact"))
    hnsw = SearchIndex(hr_store, IndexSettings(dense="hnsw", ann_oversample=1))  # widening needed for the scope
    vector = hr_store.embedder.embed_query("How many vacation days do I get?")
    for where in ({"country": "DE"}, {"country": "US"}, None):
        want = [c["chunk_id"] for c, _ in exact.dense_search(vector, 3, where=where)]
        got = [c["chunk_id"] for c, _ in hnsw.dense_search(vector, 3, where=where)]
        assert got == want and len(got) == 3
        if where:
            hits = hnsw.dense_search(vector, 3, where)
            assert all(c["metadata"]["country"] in (where["country"], "all") for c, _ in hits)


def test_reads_of_the_whole_collection_go_page_by_page(
    store: PassageStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    import reground.tools.stores.chroma.collection as collection_module
    import reground.tools.stores.chroma.reads as reads_module

    whole = store.load_snapshot()
    # every read of the collection takes several pages
    for module in (collection_module, reads_module):
        monkeypatch.setattr(module, "STORE_IO", replace(module.STORE_IO, snapshot_page=1))
    paged = store.load_snapshot()
    assert sorted(c["chunk_id"] for c in paged.chunks) == sorted(c["chunk_id"] for c in whole.chunks)
    assert len(paged.chunks) >= 2 and len(paged.row_ids) == len(paged.chunks) == len(paged.vectors)
    assert store.repair() == {"dropped": [], "leftovers_deleted": 0}
    assert set(store.document_hashes()) == {"leave", "bikes"}
