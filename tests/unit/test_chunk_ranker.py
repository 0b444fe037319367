"""The chunk ranker: what it reads of a paragraph, when it ranks, and that its weights and trainer do what they say."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from reground.evals.train.chunk_ranker import Pool, kept_shares
from reground.evals.train.unit_ranker import fit
from reground.tools.retrieval.chunk_ranker import (
    CHUNK_FEATURES,
    CHUNK_RANKER_SHA256,
    ChunkRanker,
    ParagraphSignals,
    applies,
    chunk_feature_rows,
    shipped_chunk_ranker,
)
from reground.tools.retrieval.search import HybridRetriever, RetrievalQuery, RetrievalSettings
from reground.tools.types import Chunk

from tests.unit.test_retrieval import FakeStore, _chunk

FENCE = "`" * 3
CODE_PAGE = [
    _chunk("query-params", 0, "Query parameters are the key-value pairs after the ? in a URL."),
    _chunk("query-params", 1, "Query parameters are declared as function parameters that are not path parameters."),
    _chunk(
        "query-params",
        2,
        f"Make a query parameter optional with a default of None:\n\n{FENCE}python\n"
        f"async def read_item(q: str | None = None):\n    ...\n{FENCE}",
    ),
    _chunk("path-params", 0, "Path parameters are declared with the same syntax as Python format strings."),
]


def one_hot(feature: str) -> ChunkRanker:
    """A ranker that reads one feature alone."""
    weights = np.zeros(len(CHUNK_FEATURES))
    weights[CHUNK_FEATURES.index(feature)] = 1.0
    return ChunkRanker(weights=weights, mean=np.zeros(len(CHUNK_FEATURES)), scale=np.ones(len(CHUNK_FEATURES)))


def test_a_row_reads_code_for_a_procedure_question_words_and_the_gap_to_the_best_cosine() -> None:
    chunks: list[Chunk] = [CODE_PAGE[0], CODE_PAGE[2]]
    signals = ParagraphSignals(
        dense=np.array([0.8, 0.5]),
        dialogue_dense=np.zeros(2),
        paragraph=np.array([2.0, 1.0]),
        document=np.array([1.0, 1.0]),
    )
    rows = chunk_feature_rows("how do I make a query parameter optional?", chunks, signals)
    column = {name: rows[:, i] for i, name in enumerate(CHUNK_FEATURES)}
    assert column["has_code"].tolist() == [0.0, 1.0]
    assert column["procedure_code"].tolist() == [0.0, 1.0]
    assert column["dense_gap"].tolist() == pytest.approx([0.0, -0.3])
    assert column["paragraph"].tolist() == [1.0, 0.0]
    assert column["lexical"][1] > column["lexical"][0], "the code paragraph holds 'optional' too"
    without_procedure = chunk_feature_rows("query parameter optional", chunks, signals)
    assert without_procedure[1, CHUNK_FEATURES.index("procedure_code")] == 0.0


def test_it_ranks_documentation_with_code_and_leaves_prose_alone() -> None:
    assert applies("auto", CODE_PAGE)
    assert not applies("auto", CODE_PAGE[:2])
    assert applies("on", CODE_PAGE[:2])
    assert not applies("off", CODE_PAGE)


def test_the_retriever_keeps_the_paragraphs_the_ranker_scores_highest() -> None:
    query = RetrievalQuery("query parameters", "query parameters", turn_question="how do I make it optional?")
    store = FakeStore(list(CODE_PAGE))
    convrag = HybridRetriever(store, RetrievalSettings(chunk_ranking="off"), chunk_ranker=one_hot("has_code"))
    before = convrag.search(query, where=None, doc_k=2, paragraph_k=1)
    ranked = HybridRetriever(store, RetrievalSettings(chunk_ranking="auto"), chunk_ranker=one_hot("has_code"))
    after = ranked.search(query, where=None, doc_k=2, paragraph_k=1)
    assert before[0]["chunk_id"] != "query-params:2", "the cosine sum prefers the defining sentence"
    assert after[0]["chunk_id"] == "query-params:2"
    prose = FakeStore([c for c in CODE_PAGE if FENCE not in c["text"]])
    unranked = HybridRetriever(prose, RetrievalSettings(chunk_ranking="auto"), chunk_ranker=one_hot("has_code"))
    plain = HybridRetriever(prose, RetrievalSettings(chunk_ranking="off"))
    assert [p["chunk_id"] for p in unranked.search(query, where=None, doc_k=2, paragraph_k=3)] == [
        p["chunk_id"] for p in plain.search(query, where=None, doc_k=2, paragraph_k=3)
    ]


def test_the_ranker_reads_the_turn_s_question_not_a_re_grounding_s_search_text() -> None:
    """A re-grounding searches with other words; the paragraphs are read against what the user asked."""
    store = FakeStore(list(CODE_PAGE))
    retriever = HybridRetriever(store, RetrievalSettings(chunk_ranking="auto"), chunk_ranker=one_hot("dense"))
    query = RetrievalQuery("path parameters format strings", "x", turn_question="query parameter optional default")
    kept = retriever.search(query, where=None, doc_k=2, paragraph_k=1)
    assert kept[0]["doc_id"] == "query-params"
    assert RetrievalQuery("a", "b").asked == "a"


def test_the_shipped_weights_match_their_pin_and_load() -> None:
    raw = (resources.files("reground") / "data" / "units" / "chunk_ranker.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == CHUNK_RANKER_SHA256
    assert shipped_chunk_ranker().weights.shape == (len(CHUNK_FEATURES),)


def test_a_fitted_ranker_keeps_the_holding_paragraph_that_the_baseline_order_drops() -> None:
    """The trainer's fit and measure on hand-built pools: the holding paragraph has code and sits last in the
    baseline order; fitted on some turns, the ranker keeps it among 3 on others."""
    rng = np.random.default_rng(0)

    def pool(case: str) -> Pool:
        rows = rng.normal(size=(10, len(CHUNK_FEATURES))).astype(np.float32)
        rows[:, CHUNK_FEATURES.index("has_code")] = 0.0
        rows[9, CHUNK_FEATURES.index("has_code")] = 1.0
        labels = np.zeros(10, dtype=np.float32)
        labels[9] = 1.0
        return Pool(case, "c", rows, labels, baseline=-np.arange(10, dtype=np.float32))

    train, test = [pool(f"t{i}") for i in range(20)], [pool(f"h{i}") for i in range(10)]
    weights, mean, scale = fit(train)
    learned = kept_shares(test, [((p.rows - mean) / scale) @ weights for p in test])
    baseline = kept_shares(test, [p.baseline for p in test])
    assert baseline["holding_in_3"] == 0.0
    assert learned["holding_in_3"] == 1.0


def test_the_trainer_writes_a_loadable_ranker_and_its_folds_to_a_folder_of_your_own(tmp_path: Path) -> None:
    """`--out DIR` (your own documentation): the weights, one per held-out collection, and a summary beside them."""
    import pickle

    from reground.evals.train.chunk_ranker import train

    rng = np.random.default_rng(1)

    def pool(case: str, collection: str) -> Pool:
        rows = rng.normal(size=(6, len(CHUNK_FEATURES))).astype(np.float32)
        labels = np.zeros(6, dtype=np.float32)
        labels[int(rng.integers(6))] = 1.0
        return Pool(case, collection, rows, labels, baseline=-np.arange(6, dtype=np.float32))

    cache = tmp_path / "pools.pkl"
    cache.write_bytes(pickle.dumps({"llm_free": [pool(f"{c}{i}", c) for c in ("a", "b") for i in range(5)]}))
    out = tmp_path / "models"
    summary = train(tmp_path / "docs.jsonl", tmp_path / "cases.jsonl", data_dir=None, cache=cache, out=out)
    for path in (
        out / "chunk_ranker.json",
        out / "loco" / "a" / "chunk_ranker.json",
        out / "loco" / "b" / "chunk_ranker.json",
    ):
        assert ChunkRanker.from_json(json.loads(path.read_text())).weights.shape == (len(CHUNK_FEATURES),)
    assert set(summary["leave_one_corpus_out"]) == {"a", "b"}
