"""The one tokeniser, stopword list and BM25 (tools/text/lexical.py) and the places that must use them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bm25s.stopwords import STOPWORDS_EN
from reground.tools.retrieval.keywords import lexical_keywords
from reground.tools.retrieval.search import DocumentTermIndex
from reground.tools.text.lexical import BM25, STOPWORDS, content_terms, idf_overlap, lexical_tokens, words
from reground.tools.types import Chunk


def test_one_tokeniser_lowercases_letters_and_digits_in_any_script() -> None:
    assert words("Café's 2024 PTO, e-bike_lease!") == ["café", "s", "2024", "pto", "e", "bike", "lease"]
    assert lexical_tokens("How do I request the PTO for 2024?") == ["request", "pto", "2024"]
    assert content_terms is lexical_tokens, "retrieval and the evals' span metric use the same tokeniser"


def test_one_stopword_list_covers_the_bm25s_list_and_chat_filler() -> None:
    assert set(STOPWORDS_EN) <= STOPWORDS
    assert {"please", "thanks", "hello"} <= STOPWORDS and "leave" not in STOPWORDS


def test_keywords_use_the_shared_tokeniser() -> None:
    assert lexical_keywords("Can I lease an e-bike? The e-bike lease costs 30 EUR") == ["lease", "bike", "costs", "eur"]
    assert lexical_keywords("I don't know why I didn't get the driver's license") == ["driver", "license"]


def _lucene(tf: int, df: int, n: int, length: int, avg: float, k1: float = 1.5, b: float = 0.75) -> float:
    """Lucene's BM25 as bm25s computes it: without the constant (k1 + 1) factor, which no ranking sees."""
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * length / avg))


def test_bm25_is_lucenes_formula() -> None:
    corpus = [["leave", "days", "leave"], ["travel", "train"], ["leave", "travel", "bike", "lease"]]
    scores = BM25(corpus).scores(["leave", "unknown"])
    avg = sum(map(len, corpus)) / 3
    expected = [_lucene(2, 2, 3, 3, avg), 0.0, _lucene(1, 2, 3, 4, avg)]
    assert scores == pytest.approx(expected, rel=1e-5)
    assert BM25(corpus).scores(["leave", "leave"]) == pytest.approx(2 * np.asarray(expected), rel=1e-5)
    assert BM25([[], []]).scores(["x"]).tolist() == [0.0, 0.0]


def _chunk(doc_id: str, position: int, text: str, title: str = "") -> Chunk:
    return Chunk(
        chunk_id=f"{doc_id}-{position}",
        doc_id=doc_id,
        title=title or doc_id,
        section="",
        url="",
        position=position,
        text=text,
        metadata={},
    )


def test_the_whole_document_index_scores_all_chunks_of_a_document_as_one() -> None:
    chunks = [
        _chunk("bikes", 0, "Lease an e-bike through payroll."),
        _chunk("bikes", 1, "The lease ends after three years.", title="ignored: only the first title counts"),
        _chunk("leave", 0, "Annual leave is 30 days."),
    ]
    index = DocumentTermIndex.from_chunks(chunks)
    scores = index.scores("bike lease lease", ["bikes", "leave", "missing"])
    bikes = content_terms("bikes Lease an e-bike through payroll. The lease ends after three years.")
    leave = content_terms("leave Annual leave is 30 days.")
    avg = (len(bikes) + len(leave)) / 2
    # query terms count once; "lease" occurs twice in the document, "bike" once; neither occurs in "leave"
    expected = _lucene(2, 1, 2, len(bikes), avg) + _lucene(1, 1, 2, len(bikes), avg)
    assert scores["bikes"] == pytest.approx(expected, rel=1e-5)
    assert scores["leave"] == 0.0 and scores["missing"] == 0.0


def test_idf_overlap_scores_as_bm25_without_term_frequency() -> None:
    texts = [
        "annual leave annual leave days per year",
        "parental leave and parental pay",
        "travel booking for a business trip",
        "sick leave needs a doctor's certificate",
    ]
    terms = ["leave", "annual", "trip", "unknown", "leave"]
    expected = BM25([words(t) for t in texts], k1=0.0).scores(terms)
    got = idf_overlap([set(words(t)) for t in texts], terms)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert got[0] > got[1] > 0 and got[2] > 0
