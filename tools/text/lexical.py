"""The one tokeniser, stopword list and BM25 of the project (retrieval, keywords, evidence, evals).

Every lexical comparison (the chunk and whole-document BM25 indexes, the paragraph score's lexical term, the
LLM-free keyword extractor, evidence sentences, the span metric) tokenises with `lexical_tokens`, so a word
is the same word everywhere. BM25 is bm25s's Lucene variant (k1 1.5, b 0.75), the only implementation here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from reground.tools.tuning.retrieval import BM25_PARAMS

# Letters and digits (any script), lower-cased: "Café's 2024 PTO" → café, s, 2024, pto.
_TOKEN = re.compile(r"[^\W_]+")

# English function words, chat filler ("please", "thanks") and what the tokeniser leaves of negated contractions
# ("don't" → don, t): never useful as search terms.
# (A superset of bm25s's English list, which the whole-document index used to use.)
STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further get got
    had has have having he hello her here hers herself hi him himself his how i if in into is it its
    itself just know let like lot make many may me might more most much must my myself need no nor not
    now of off ok okay on once one only or other our ours ourselves out over own please really same
    shall she should so some still such sure tell than thank thanks that the their theirs them
    themselves then there these they this those through to too under until up very want was we well
    were what when where which while who whom why will with would yes you your yours yourself
    yourselves
    aren couldn didn doesn don hadn hasn haven isn mustn needn shouldn wasn weren won wouldn
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def words(text: str) -> list[str]:
    """Every lower-cased letter/digit run of text, stopwords included (for n-gram style comparisons)."""
    return _TOKEN.findall(text.lower())


def lexical_tokens(text: str) -> list[str]:
    """Lower-cased letter/digit runs without stopwords: what BM25 indexes and matches."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


# The name retrieval and the evals used for the same thing.
content_terms = lexical_tokens


class BM25:
    """BM25 (bm25s, Lucene scoring) over pre-tokenised documents; `scores` gives one score per document.

    A query term given twice counts twice (pass `dict.fromkeys(terms)` for a set semantics); terms no document
    has are ignored.
    """

    def __init__(
        self, corpus: Sequence[Sequence[str]], *, k1: float = BM25_PARAMS.k1, b: float = BM25_PARAMS.b
    ) -> None:
        import bm25s

        self.size = len(corpus)
        self._index: Any = None
        if any(corpus):
            self._index = bm25s.BM25(k1=k1, b=b)
            self._index.index([list(doc) for doc in corpus], show_progress=False)
            self._vocab: dict[str, int] = self._index.vocab_dict

    def knows(self, term: str) -> bool:
        """Whether some document of the corpus holds the term."""
        return self._index is not None and term in self._vocab

    def scores(self, query_terms: Sequence[str]) -> np.ndarray:
        """float32 scores, one per corpus document (zeros when no query term is indexed)."""
        known = [t for t in query_terms if self._index is not None and t in self._vocab]
        if not known:
            return np.zeros(self.size, dtype=np.float32)
        ids = [self._vocab[t] for t in known]
        return np.asarray(self._index.get_scores_from_ids(ids), dtype=np.float32)

    @classmethod
    def from_texts(cls, texts: Sequence[str]) -> BM25:
        return cls([lexical_tokens(t) for t in texts])


def idf_overlap(documents: Sequence[set[str]], terms: Sequence[str]) -> np.ndarray:
    """BM25 with k1 = 0 (a term counts once, however often it occurs) over small sets of documents, without an
    index: each document scores the Lucene IDF ln(1 + (N - df + 0.5) / (df + 0.5)) of every term it holds, the
    scores `BM25(corpus, k1=0.0).scores(terms)` gives (a term given twice counts twice)."""
    scores = np.zeros(len(documents), dtype=np.float32)
    for term in terms:
        rows = [i for i, vocabulary in enumerate(documents) if term in vocabulary]
        if rows:
            scores[rows] += math.log(1 + (len(documents) - len(rows) + 0.5) / (len(rows) + 0.5))  # fact: BM25's idf
    return scores
