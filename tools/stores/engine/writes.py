"""Writing a collection in the engine: a document is replaced in one transaction (chunks, postings, term and
field statistics, the collection's version), so readers see it fully old or fully new; writers of one collection
are serialised by a PostgreSQL advisory lock (`writing()`), which holds across machines, unlike the embedded
store's file lock."""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from reground.tools.stores.engine.lexical import bm25_weight, chunk_terms, document_terms
from reground.tools.stores.engine.schema import EngineCollection, vector_text
from reground.tools.stores.locking import WaitNotice, lock_timeout, notify_waiting
from reground.tools.stores.scope import scope_tokens
from reground.tools.stores.search_index import BOOKKEEPING_FIELDS
from reground.tools.stores.vector_store import EmbeddedDocument, StoreError, chunks_not_held, entered_again
from reground.tools.stores.vectors import chunk_vectors
from reground.tools.tuning.stores import ENGINE
from reground.tools.types import Chunk

SMALLINT_MAX = 32767  # fact: PostgreSQL's smallint (term frequencies and chunk lengths are capped to it)


class EngineWrites(EngineCollection):
    """The VectorStore's writes: the write lock, replacing and deleting documents with their statistics."""

    @contextlib.contextmanager
    def writing(self, *, on_wait: WaitNotice | None = None, timeout_s: float | None = None) -> Iterator[None]:
        """Hold the collection's write lock: a PostgreSQL advisory lock (re-entrant per thread), so writers on
        any machine sharing the engine are serialised. Another writer holding it: `on_wait` hears, then we wait."""
        with entered_again(self._writer) as held_already:
            if held_already:
                yield
                return
        key = f"reground:write:{self.collection}"
        with self._conn() as conn:
            got = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]
            if not got:
                holder = conn.execute(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = hashtext(%s)::oid AND granted",
                    (key,),
                ).fetchone()
                who = f"engine backend pid {holder[0] if holder else '?'}"
                notify_waiting(on_wait, self.collection, who)
                started = time.monotonic()
                while not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]:
                    if timeout_s is not None and time.monotonic() - started > timeout_s:
                        raise lock_timeout(self.collection, who, timeout_s)
                    time.sleep(ENGINE.lock_poll_s)
            self._writer.depth = 1
            self._writer.conn = conn
            try:
                yield
            finally:
                self._writer.depth = 0
                self._writer.conn = None
                self._stats_cache = None
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))

    def take_repaired(self) -> list[str]:
        """Nothing to repair: a document is written in one transaction."""
        return []

    # --- writing ---------------------------------------------------------------------------

    def replace_document(self, doc_id: str, content_hash: str, chunks: list[Chunk]) -> None:
        self.write_documents([EmbeddedDocument(doc_id, content_hash, chunks, *chunk_vectors(self.embedder, chunks))])

    def write_embedded(self, document: EmbeddedDocument) -> None:
        """One document embedded already (what the pipelined ingest calls)."""
        self.write_documents([document])

    def write_documents(self, documents: Sequence[EmbeddedDocument]) -> None:
        """Replace many documents (doc_id, hash, chunks, vectors, packed sentence vectors) in one transaction:
        old chunks out, new chunks, postings and statistics in (COPY), the version bumped."""
        if not documents:
            return
        with self.writing(), self._conn() as conn, conn.transaction():
            stats = conn.execute(
                "SELECT chunks, chunk_tokens FROM reground_collections WHERE id = %s FOR UPDATE", (self.cid,)
            ).fetchone()
            self._delete_locked(conn, [d[0] for d in documents])
            stats = conn.execute(
                "SELECT chunks, chunk_tokens FROM reground_collections WHERE id = %s", (self.cid,)
            ).fetchone()
            rows: list[tuple[Chunk, np.ndarray, bytes | None, int, Counter[str]]] = []
            doc_rows: list[tuple[str, str, int, int, str]] = []
            chunk_df: Counter[str] = Counter()
            doc_df: Counter[str] = Counter()
            value_docs: Counter[tuple[str, str]] = Counter()
            new_tokens = 0
            for doc_id, content_hash, chunks, given_vectors, sentences in documents:
                vectors = np.asarray(given_vectors, dtype=np.float32)
                if len(vectors) != len(chunks):
                    raise StoreError(f"document {doc_id!r}: {len(vectors)} vectors for {len(chunks)} chunks")
                per_doc = document_terms(chunks)
                doc_df.update(set(per_doc))
                metadata = dict(chunks[0]["metadata"]) if chunks else {}
                value_docs.update(_field_values(metadata))
                doc_rows.append((doc_id, content_hash, len(chunks), len(per_doc), json.dumps(metadata, sort_keys=True)))
                for i, chunk in enumerate(chunks):
                    terms = chunk_terms(chunk)
                    counts = Counter(terms)
                    chunk_df.update(counts.keys())
                    new_tokens += len(terms)
                    blob = sentences[i] if i < len(sentences) else None
                    rows.append((chunk, vectors[i], blob, len(terms), counts))
            # The length normaliser the impacts are ordered by: the collection's mean after this write.
            total_chunks = int(stats[0]) + len(rows)
            avg = (int(stats[1]) + new_tokens) / max(total_chunks, 1)
            term_ids = self._upsert_terms(conn, chunk_df, doc_df)
            row_ids = self._copy_chunks(conn, rows)
            with conn.cursor().copy(f"COPY {self.t['postings']} (term_id, row_id, tf, len, impact) FROM STDIN") as copy:
                for row_id, (_chunk, _vector, _blob, length, counts) in zip(row_ids, rows, strict=True):
                    short = min(length, SMALLINT_MAX)
                    for term, tf in counts.items():
                        copy.write_row(
                            (term_ids[term], row_id, min(tf, SMALLINT_MAX), short, bm25_weight(tf, length, avg))
                        )
            with conn.cursor().copy(
                f"COPY {self.t['documents']} (doc_id, content_hash, chunks, tokens, metadata) FROM STDIN"
            ) as copy:
                for doc_row in doc_rows:
                    copy.write_row(doc_row)
            self._bump_values(conn, value_docs, 1)
            conn.execute(
                "UPDATE reground_collections SET version = version + 1, chunks = chunks + %s, "
                "chunk_tokens = chunk_tokens + %s, documents = documents + %s, document_tokens = document_tokens + %s "
                "WHERE id = %s",
                (len(rows), new_tokens, len(doc_rows), sum(r[3] for r in doc_rows), self.cid),
            )
        self._stats_cache = None

    def update_metadata(self, documents: Mapping[str, Sequence[Chunk]]) -> None:
        """Give these documents' chunks (matched by chunk_id) this metadata in one transaction: their scope tokens,
        each document's metadata and the field statistics follow, the version is bumped; text, vectors, postings and
        content hashes stay (what re-screening unchanged documents writes, ingest.py)."""
        update = f"UPDATE {self.t['chunks']} SET metadata = %s, scope_tokens = %s WHERE doc_id = %s AND chunk_id = %s"
        with self.writing(), self._conn() as conn, conn.transaction():
            conn.execute("SELECT 1 FROM reground_collections WHERE id = %s FOR UPDATE", (self.cid,))
            held = dict(
                conn.execute(
                    f"SELECT doc_id, metadata FROM {self.t['documents']} WHERE doc_id = ANY(%s)", (list(documents),)
                ).fetchall()
            )
            missing: list[str] = []
            for doc_id, chunks in documents.items():
                ordered = sorted(chunks, key=lambda c: int(c["position"]))
                updated = sum(
                    conn.execute(
                        update,
                        (json.dumps(c["metadata"], sort_keys=True), scope_tokens(c["metadata"]), doc_id, c["chunk_id"]),
                    ).rowcount
                    for c in ordered
                )
                if doc_id not in held or updated != len(ordered):
                    missing.append(doc_id)
                    continue
                metadata = dict(ordered[0]["metadata"]) if ordered else {}  # a document's: its first chunk's
                conn.execute(
                    f"UPDATE {self.t['documents']} SET metadata = %s WHERE doc_id = %s",
                    (json.dumps(metadata, sort_keys=True), doc_id),
                )
                self._bump_values(conn, _field_values(dict(held[doc_id] or {})), -1)
                self._bump_values(conn, _field_values(metadata), 1)
            if missing:
                raise chunks_not_held(self.collection, missing)  # inside the transaction: nothing is updated
            conn.execute("UPDATE reground_collections SET version = version + 1 WHERE id = %s", (self.cid,))
        self._stats_cache = None

    def _upsert_terms(self, conn: Any, chunk_df: Counter[str], doc_df: Counter[str]) -> dict[str, int]:
        terms = sorted(set(chunk_df) | set(doc_df))
        if not terms:
            return {}
        cur = conn.execute(
            f"""INSERT INTO {self.t["terms"]} AS t (term, chunk_df, doc_df)
                SELECT * FROM unnest(%s::text[], %s::int[], %s::int[])
                ON CONFLICT (term) DO UPDATE
                SET chunk_df = t.chunk_df + EXCLUDED.chunk_df, doc_df = t.doc_df + EXCLUDED.doc_df
                RETURNING term, id""",
            (terms, [chunk_df[t] for t in terms], [doc_df[t] for t in terms]),
        )
        return dict(cur.fetchall())

    def _copy_chunks(
        self, conn: Any, rows: Sequence[tuple[Chunk, np.ndarray, bytes | None, int, Counter[str]]]
    ) -> list[int]:
        """COPY the chunks (binary vectors), returning their row ids in order."""
        if not rows:
            return []
        first = conn.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'row_id')) FROM generate_series(1, %s)",
            (f"rg{self.cid}_chunks", len(rows)),
        ).fetchall()
        ids = [int(r[0]) for r in first]
        with conn.cursor().copy(
            f"COPY {self.t['chunks']} (row_id, chunk_id, doc_id, position, title, section, url, text, metadata, "
            "scope_tokens, tokens, embedding, sentences) FROM STDIN"
        ) as copy:
            for row_id, (chunk, vector, blob, length, _counts) in zip(ids, rows, strict=True):
                copy.write_row(
                    (
                        row_id,
                        chunk["chunk_id"],
                        chunk["doc_id"],
                        int(chunk["position"]),
                        chunk["title"],
                        chunk["section"],
                        chunk["url"],
                        chunk["text"],
                        json.dumps(chunk["metadata"], sort_keys=True),
                        scope_tokens(chunk["metadata"]),
                        length,
                        vector_text(vector),
                        blob,
                    )
                )
        return ids

    def _bump_values(self, conn: Any, value_docs: Counter[tuple[str, str]], sign: int) -> None:
        if not value_docs:
            return
        keys = sorted(value_docs)
        conn.execute(
            f"""INSERT INTO {self.t["values"]} AS v (field, value, docs)
                SELECT * FROM unnest(%s::text[], %s::text[], %s::int[])
                ON CONFLICT (field, value) DO UPDATE SET docs = v.docs + EXCLUDED.docs""",
            ([k for k, _ in keys], [v for _, v in keys], [sign * value_docs[k] for k in keys]),
        )
        conn.execute(f"DELETE FROM {self.t['values']} WHERE docs <= 0")

    def delete_document(self, doc_id: str) -> int:
        with self.writing(), self._conn() as conn, conn.transaction():
            conn.execute("SELECT 1 FROM reground_collections WHERE id = %s FOR UPDATE", (self.cid,))
            removed = self._delete_locked(conn, [doc_id])
            if removed:
                conn.execute("UPDATE reground_collections SET version = version + 1 WHERE id = %s", (self.cid,))
        self._stats_cache = None
        return removed

    def _delete_locked(self, conn: Any, doc_ids: Sequence[str]) -> int:
        """Remove documents with their postings and statistics, inside the caller's transaction; chunks removed."""
        old = conn.execute(
            f"SELECT row_id, doc_id, position, title, section, text, tokens FROM {self.t['chunks']} "
            "WHERE doc_id = ANY(%s)",
            (list(doc_ids),),
        ).fetchall()
        docs = conn.execute(
            f"SELECT doc_id, tokens, metadata FROM {self.t['documents']} WHERE doc_id = ANY(%s)", (list(doc_ids),)
        ).fetchall()
        if not old and not docs:
            return 0
        chunk_df: Counter[str] = Counter()
        doc_df: Counter[str] = Counter()
        by_doc: dict[str, list[dict[str, Any]]] = {}
        pairs: list[tuple[str, int]] = []
        for row_id, doc_id, position, title, section, text, _tokens in old:
            chunk = {"title": title, "section": section, "text": text, "position": position}
            by_doc.setdefault(doc_id, []).append(chunk)
            for term in set(chunk_terms(chunk)):
                chunk_df[term] += 1
                pairs.append((term, row_id))
        for chunks in by_doc.values():
            doc_df.update(set(document_terms(chunks)))
        terms = sorted(set(chunk_df) | set(doc_df))
        if terms:
            ids = dict(
                conn.execute(f"SELECT term, id FROM {self.t['terms']} WHERE term = ANY(%s)", (terms,)).fetchall()
            )
            conn.execute(
                f"""DELETE FROM {self.t["postings"]} p USING unnest(%s::int[], %s::int[]) AS d(term_id, row_id)
                    WHERE p.term_id = d.term_id AND p.row_id = d.row_id""",
                ([ids[t] for t, _ in pairs], [r for _, r in pairs]),
            )
            conn.execute(
                f"""UPDATE {self.t["terms"]} t SET chunk_df = t.chunk_df - d.c, doc_df = t.doc_df - d.d
                    FROM unnest(%s::text[], %s::int[], %s::int[]) AS d(term, c, d) WHERE t.term = d.term""",
                (terms, [chunk_df[t] for t in terms], [doc_df[t] for t in terms]),
            )
        conn.execute(f"DELETE FROM {self.t['chunks']} WHERE doc_id = ANY(%s)", (list(doc_ids),))
        conn.execute(f"DELETE FROM {self.t['documents']} WHERE doc_id = ANY(%s)", (list(doc_ids),))
        values: Counter[tuple[str, str]] = Counter()
        for _doc_id, _tokens, metadata in docs:
            for key, value in (metadata or {}).items():
                values[(key, str(value))] += 1
        self._bump_values(conn, values, -1)
        conn.execute(
            "UPDATE reground_collections SET chunks = chunks - %s, chunk_tokens = chunk_tokens - %s, "
            "documents = documents - %s, document_tokens = document_tokens - %s WHERE id = %s",
            (len(old), sum(int(r[6]) for r in old), len(docs), sum(int(r[1]) for r in docs), self.cid),
        )
        return len(old)


def _field_values(metadata: dict[str, Any]) -> Counter[tuple[str, str]]:
    """(field, value) of a document's metadata, as the field statistics (`_values`) count them."""
    return Counter((key, str(value)) for key, value in metadata.items() if key not in BOOKKEEPING_FIELDS)
