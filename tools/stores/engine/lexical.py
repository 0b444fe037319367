"""BM25 in the engine: chunk-level lexical search and whole-document scores, from an inverted index.

bm25s' Lucene variant (`ENGINE.bm25_k1` and `bm25_b`, the tokeniser of `tools.text.lexical`), computed in SQL
from an inverted index (term, chunk, tf, chunk length) and term statistics kept up to date by every write
(`engine.writes`). Each query term reads its postings in impact order, at most `LEXICAL_POSTINGS` of them (all of
them when a term is rarer than that, so small collections are scored exactly); the best candidates are rescored
exactly.
Whole-document BM25 (the retrieval's `document_lexical` signals): document frequencies and lengths live in the
engine; a leader's term counts come from reading its chunks (`document_term_index`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from reground.tools.stores.engine.schema import CHUNK_COLUMNS, chunk_from_row
from reground.tools.stores.engine.search import DOC_CACHE, EngineSearch
from reground.tools.stores.scope import scope_clause
from reground.tools.stores.search_index import Where
from reground.tools.text.lexical import content_terms, lexical_tokens
from reground.tools.tuning.stores import ENGINE
from reground.tools.types import Chunk

K1, B = ENGINE.bm25_k1, ENGINE.bm25_b
# Postings read per query term, best impact first. A term in fewer chunks is read whole (exact BM25); measured
# (evals/results/scale) at 200,000 chunks against exact scoring: see docs/deployment.md.
LEXICAL_POSTINGS = ENGINE.lexical_postings
RESCORE_FACTOR = ENGINE.rescore_factor  # candidates rescored exactly per wanted hit
CHUNK_COLUMNS_C = ", ".join(f"c.{c.strip()}" for c in CHUNK_COLUMNS.split(","))


def bm25_weight(tf: float, length: float, avg_length: float) -> float:
    """bm25s' Lucene term-frequency component (without idf)."""
    return tf / (tf + K1 * (1 - B + B * length / max(avg_length, 1e-9)))


def idf(df: int, n: int) -> float:
    """bm25s' Lucene idf."""
    half = 0.5  # fact: Lucene's idf smoothing constant
    return math.log(1 + (n - df + half) / (df + half))


def chunk_terms(chunk: Mapping[str, Any]) -> list[str]:
    """The tokens chunk-level BM25 indexes: title, section and text, as `SearchIndex` does."""
    return lexical_tokens(f"{chunk['title']} {chunk['section']} {chunk['text']}")


def document_terms(chunks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The tokens whole-document BM25 indexes: the title once, then every chunk's text (DocumentTermIndex)."""
    if not chunks:
        return []
    ordered = sorted(chunks, key=lambda c: c["position"])
    terms = content_terms(str(ordered[0]["title"]))
    for chunk in ordered:
        terms.extend(content_terms(str(chunk["text"])))
    return terms


class EngineLexical(EngineSearch):
    """Chunk BM25 and whole-document BM25 of a collection in the engine."""

    def _term_stats(self, conn: Any, version: int, terms: Sequence[str]) -> dict[str, tuple[int, int, int]]:
        """term -> (id, chunk_df, doc_df) for the terms the collection holds (cached per version)."""
        with self._lock:
            missing = [t for t in dict.fromkeys(terms) if (version, t) not in self._terms]
        if missing:
            found = {
                r[0]: (int(r[1]), int(r[2]), int(r[3]))
                for r in conn.execute(
                    f"SELECT term, id, chunk_df, doc_df FROM {self.t['terms']} WHERE term = ANY(%s)", (missing,)
                )
            }
            with self._lock:
                for t in missing:
                    self._terms[(version, t)] = (
                        found.get(t) if found.get(t, (0, 0, 0))[1] > 0 or found.get(t, (0, 0, 0))[2] > 0 else None
                    )
                while len(self._terms) > ENGINE.term_cache:
                    self._terms.popitem(last=False)
        with self._lock:
            out = {}
            for t in dict.fromkeys(terms):
                value = self._terms.get((version, t))
                if value is not None:
                    out[t] = value
            return out

    def lexical_search(self, query: str, k: int, where: Where | None = None) -> list[tuple[Chunk, float]]:
        """BM25 over title + section + text of the chunks in scope, computed in the engine from the inverted index
        (each term's best `LEXICAL_POSTINGS` postings by impact; exact for rarer terms), best candidates rescored."""
        scope = self.check_filter(where)
        tokens = lexical_tokens(query)
        if not tokens or k <= 0:
            return []
        stats = self._stats()
        n, avg = int(stats["chunks"]), int(stats["chunk_tokens"]) / max(int(stats["chunks"]), 1)
        clause, params = scope_clause(scope, "c.scope_tokens")
        with self._conn() as conn:
            known = self._term_stats(conn, int(stats["version"]), tokens)
            multiplicity = Counter(t for t in tokens if t in known)
            if not multiplicity:
                return []
            terms = list(multiplicity)
            weights = {t: multiplicity[t] * idf(known[t][1], n) for t in terms}
            depth, longest = LEXICAL_POSTINGS, max(known[t][1] for t in terms)
            window = 0
            while True:
                # Every posting of every term read: the engine's scores are exact; else rescore the best few.
                wanted = k if depth >= longest else k * RESCORE_FACTOR
                # The best `window` candidates are ranked before the chunks are joined (joining every candidate
                # to its row cost a lookup each); a scope filters after the join, so it widens the window.
                window = max(window, wanted * (ENGINE.scoped_window if scope else 1))
                rows = conn.execute(
                    f"""WITH q(term_id, w) AS (SELECT * FROM unnest(%s::int[], %s::float8[])),
                        cand AS (
                            SELECT p.row_id, sum(q.w * p.tf / (p.tf + %s * (1 - %s + %s * p.len / %s))) AS score
                            FROM q CROSS JOIN LATERAL (
                                SELECT row_id, tf, len FROM {self.t["postings"]} p
                                WHERE p.term_id = q.term_id ORDER BY impact DESC LIMIT %s) p
                            GROUP BY p.row_id ORDER BY score DESC LIMIT %s)
                        SELECT {CHUNK_COLUMNS_C}, c.tokens, cand.score
                        FROM cand JOIN {self.t["chunks"]} c USING (row_id)
                        WHERE {clause} ORDER BY cand.score DESC LIMIT %s""",
                    (
                        [known[t][0] for t in terms],
                        [weights[t] for t in terms],
                        K1,
                        B,
                        B,
                        avg,
                        depth,
                        window,
                        *params,
                        wanted,
                    ),
                ).fetchall()
                if len(rows) >= wanted or not scope:
                    break
                if window < depth * len(terms):
                    window *= ENGINE.widen  # the scope dropped most of the best candidates: rank more of them
                elif depth < longest:
                    depth *= ENGINE.widen  # every candidate read was ranked: read deeper postings
                else:
                    break
        if depth >= longest:
            return [(chunk_from_row(r), float(np.float32(r[-1]))) for r in rows[:k] if r[-1] > 0]
        # Exact BM25 of the candidates (a candidate outside a term's first postings has that term's part too).
        scored = []
        for r in rows:
            chunk = chunk_from_row(r)
            counts = Counter(chunk_terms(chunk))
            length = int(r[-2])
            score = sum(weights[t] * bm25_weight(counts[t], length, avg) for t in terms if counts.get(t))
            scored.append((chunk, float(np.float32(score))))
        scored.sort(key=lambda hit: -hit[1])
        return [hit for hit in scored[:k] if hit[1] > 0]

    def document_term_index(self, where: Where | None = None) -> EngineDocumentIndex:
        """Whole-document BM25 (`tools.retrieval.ranking.DocumentTermIndex`'s scores) from the engine's document
        statistics; a leader's term counts come from its chunks (`chunks_for_documents`, cached)."""
        return EngineDocumentIndex(self, where)


class EngineDocumentIndex:
    """Whole-document BM25 scores of named documents, with the collection's document frequencies and lengths.

    The embedded stack computes them over the documents in scope; here they are the whole collection's (the same
    for an unscoped search; a scope changes the idf only slightly, never which documents can score)."""

    def __init__(self, store: EngineLexical, where: Where | None) -> None:
        self.store = store
        self.where = where
        stats = store._stats()
        self.version = int(stats["version"])
        self.n = int(stats["documents"])
        self.avg = int(stats["document_tokens"]) / max(self.n, 1)

    def knows(self, term: str) -> bool:
        """Whether some document of the collection holds the term."""
        with self.store._conn() as conn:
            found = self.store._term_stats(conn, self.version, [term]).get(term)
        return found is not None and found[2] > 0

    def scores(self, query: str, doc_ids: Sequence[str]) -> dict[str, float]:
        """{doc_id: BM25 score} of the named documents (0 for one outside the scope or the collection)."""
        terms = list(dict.fromkeys(content_terms(query)))
        with self.store._conn() as conn:
            known = self.store._term_stats(conn, self.version, terms)
        terms = [t for t in terms if t in known and known[t][2] > 0]
        chunks = self.store.chunks_for_documents(doc_ids, where=self.where)
        by_doc: dict[str, list[Chunk]] = {}
        for chunk in chunks:
            by_doc.setdefault(chunk["doc_id"], []).append(chunk)
        out: dict[str, float] = {}
        for doc_id in doc_ids:
            held = by_doc.get(doc_id)
            if not held or not terms:
                out[doc_id] = 0.0
                continue
            counts, length = self._counts(doc_id, held)
            score = sum(
                idf(known[t][2], self.n) * bm25_weight(counts[t], length, self.avg) for t in terms if counts.get(t)
            )
            out[doc_id] = float(np.float32(score))
        return out

    def _counts(self, doc_id: str, held: Sequence[Chunk]) -> tuple[Counter[str], int]:
        """A document's term counts and length (cached per store version and chunk set: a turn scores the same
        leaders for two signals, and the next turn of a conversation mostly the same ones again)."""
        key = (self.version, doc_id, tuple(c["chunk_id"] for c in held))
        cache = self.store._doc_terms
        with self.store._lock:
            found = cache.get(key)
            if found is not None:
                cache.move_to_end(key)
                return found
        tokens = document_terms(held)
        value = (Counter(tokens), len(tokens))
        with self.store._lock:
            cache[key] = value
            while len(cache) > DOC_CACHE:
                cache.popitem(last=False)
        return value
