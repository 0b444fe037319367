"""A collection's home in the engine: its connection pool, tables and indexes, and the collection row (version,
counts) every read and write goes by.

Per collection `rg<id>_chunks` (text, metadata, scope tokens, vector, packed sentence vectors), `_documents` (hash,
chunk count), `_terms` and `_postings` (the inverted index BM25 reads), `_values` (which metadata values documents
hold); one `reground_collections` row per collection. `EngineCollection` is the base the store's writes
(`engine.writes`) and searches (`engine.search`, `engine.lexical`) build on.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from reground.tools.stores.engine.process import EngineError, engine_uri, safe_uri
from reground.tools.stores.search_index import IndexSettings
from reground.tools.stores.vector_store import (
    CollectionNotFoundError,
    InvalidCollectionNameError,
    collection_name_problem,
    collection_not_found,
)
from reground.tools.stores.vectors import matching_embedder
from reground.tools.text.loaders import MiB
from reground.tools.tuning.stores import ENGINE
from reground.tools.types import Chunk

POOL_WAIT_S = (
    ENGINE.pool_wait_s
)  # a turn waits this long for a connection (all busy, or the engine down) before failing
STATS_TTL_S = ENGINE.stats_ttl_s  # how stale a reader's view of the collection's version may be
TABLES = ("chunks", "documents", "terms", "postings", "values")
CHUNK_COLUMNS = "chunk_id, doc_id, title, section, url, position, text, metadata"


def quote(name: str) -> str:
    """A table or index name as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def chunk_from_row(row: Sequence[Any]) -> Chunk:
    """A chunk from a row that starts with CHUNK_COLUMNS."""
    return Chunk(
        chunk_id=row[0],
        doc_id=row[1],
        title=row[2],
        section=row[3],
        url=row[4],
        position=int(row[5]),
        text=row[6],
        metadata=dict(row[7] or {}),
    )


def vector_array(value: Any) -> np.ndarray:
    """A pgvector value as float32 (the adapter hands back `Vector` objects)."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if callable(to_numpy) else value, dtype=np.float32)


def vector_text(vector: np.ndarray) -> str:
    """pgvector's text form, one formatting call per vector (COPY of millions of rows)."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + ("%.7g," * len(values))[:-1] % tuple(values) + "]"


class EngineCollection:
    """One collection in PostgreSQL: the pool, the schema, the collection row (cached for STATS_TTL_S)."""

    concurrent_reads = True  # searches wait on the engine: retrieval may issue a turn's searches at once

    def __init__(
        self,
        uri: str,
        collection: str,
        *,
        embedder: Any = None,
        create: bool = False,
        index: IndexSettings | None = None,
        pool_size: int = ENGINE.pool_size,
    ) -> None:
        problem = collection_name_problem(collection)
        if problem:
            raise InvalidCollectionNameError(problem)
        from psycopg_pool import ConnectionPool

        self.uri = uri
        self.collection = collection
        self.settings = index or IndexSettings()
        self._pool = ConnectionPool(
            uri,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=ENGINE.connect_timeout_s)
        except Exception as exc:
            self._pool.close()
            raise EngineError(f"cannot connect to the engine at {safe_uri(uri)}: {exc}; is it running?") from exc
        self._writer = threading.local()
        # Per store version, what reads keep once read (engine.search, engine.lexical), guarded by one lock.
        self._lock = threading.Lock()
        self._docs: OrderedDict[tuple[int, str], list[Chunk]] = OrderedDict()
        self._terms: OrderedDict[tuple[int, str], tuple[int, int, int] | None] = OrderedDict()
        self._memo: dict[tuple[int, str], list[str]] = {}  # per store version: its metadata fields
        self._stats_cache: tuple[float, dict[str, Any]] | None = None
        self._doc_terms: OrderedDict[tuple[int, str, tuple[str, ...]], tuple[Counter[str], int]] = OrderedDict()
        self._setup()
        row = self._collection_row()
        if row is None:
            if not create:
                where = f"the engine at {safe_uri(uri)}"
                create_it = f"reground ingest PATH --collection {collection} --store <this spec>"
                raise collection_not_found(collection, where, self.list_collections(), create_it)
            self._embedder = matching_embedder(collection, "", embedder)
            self._create(self._embedder)
            row = self._collection_row()
            assert row is not None
        else:
            self._embedder = matching_embedder(collection, str(row["embedding"]), embedder)
        self.cid = int(row["id"])
        self.t = {name: quote(f"rg{self.cid}_{name}") for name in TABLES}

    # --- connections and schema -------------------------------------------------------------

    @staticmethod
    def _configure(conn: Any) -> None:
        import psycopg
        from pgvector.psycopg import register_vector

        try:
            register_vector(conn)
        except psycopg.ProgrammingError:  # a new database: the extension is not created yet
            with contextlib.suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject):
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)

    @contextlib.contextmanager
    def _conn(self) -> Iterator[Any]:
        """A pooled connection; a dead engine is one EngineError naming it.

        Connections are not checked on every checkout (that is one more round trip per query, of ~40 a turn): after
        a failure, the pool checks its idle connections (`ConnectionPool.check`) and replaces the broken ones, so the
        call after an engine restart gets a working connection."""
        import psycopg

        try:
            with self._pool.connection(timeout=POOL_WAIT_S) as conn:
                yield conn
        except psycopg.OperationalError as exc:
            with contextlib.suppress(Exception):
                self._pool.check()
            raise EngineError(f"the engine at {safe_uri(self.uri)} failed: {exc}".strip()) from exc
        except Exception as exc:
            from psycopg_pool import PoolTimeout

            if isinstance(exc, PoolTimeout):
                raise EngineError(f"the engine at {safe_uri(self.uri)} is unreachable: {exc}") from exc
            raise

    def close(self) -> None:
        self._pool.close()

    def _setup(self) -> None:
        # Two processes creating the schema at once would race: one transaction-level lock around it.
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('reground:schema'))")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(
                """CREATE TABLE IF NOT EXISTS reground_collections (
                    id serial UNIQUE, name text PRIMARY KEY, embedding text NOT NULL, dimension int NOT NULL,
                    version bigint NOT NULL DEFAULT 0, chunks bigint NOT NULL DEFAULT 0,
                    chunk_tokens bigint NOT NULL DEFAULT 0, documents bigint NOT NULL DEFAULT 0,
                    document_tokens bigint NOT NULL DEFAULT 0)"""
            )

    def _collection_row(self) -> dict[str, Any] | None:
        with self._conn() as conn:
            cur = conn.execute(
                "SELECT id, embedding, dimension, version, chunks, chunk_tokens, documents, document_tokens "
                "FROM reground_collections WHERE name = %s",
                (self.collection,),
            )
            row = cur.fetchone()
            if row is None:
                return None
            return dict(zip([d.name for d in cur.description], row, strict=True))

    def drop(self) -> None:
        """Delete the collection and its tables from the engine (what `reground` never does by itself)."""
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('reground:schema'))")
            for table in self.t.values():
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute("DELETE FROM reground_collections WHERE id = %s", (self.cid,))
        self._stats_cache = None

    def _index_sql(self) -> dict[str, str]:
        """The two indexes a bulk load drops and rebuilds: the ANN index and the postings' impact index."""
        return {
            f"rg{self.cid}_ann": f"CREATE INDEX IF NOT EXISTS rg{self.cid}_ann ON {self.t['chunks']} "
            "USING hnsw (embedding vector_cosine_ops)",
            f"rg{self.cid}_impact": f"CREATE INDEX IF NOT EXISTS rg{self.cid}_impact ON {self.t['postings']} "
            "(term_id, impact DESC, row_id) INCLUDE (tf, len)",
        }

    def drop_indexes(self) -> None:
        """Before a bulk load (`write_documents` of many documents): inserting into an HNSW graph and a btree
        row by row is slower than building them once afterwards (`build_indexes`). Searches still work, slowly."""
        with self._conn() as conn:
            for name in self._index_sql():
                conn.execute(f"DROP INDEX IF EXISTS {quote(name)}")

    def build_indexes(self, maintenance_work_mem: str = "2GB") -> float:
        """(Re)build the ANN and impact indexes and refresh the planner's statistics; the seconds it took."""
        started = time.perf_counter()
        with self._conn() as conn:
            conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
            for sql in self._index_sql().values():
                conn.execute(sql)
            for table in self.t.values():
                conn.execute(f"VACUUM ANALYZE {table}")
        return time.perf_counter() - started

    def indexes_built(self) -> bool:
        with self._conn() as conn:
            found = {
                r[0]
                for r in conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE indexname = ANY(%s)", (list(self._index_sql()),)
                )
            }
        return found == set(self._index_sql())

    def disk(self) -> dict[str, float]:
        """The collection's size in the engine (tables, TOAST and indexes), in MB."""
        with self._conn() as conn:
            total = conn.execute(
                "SELECT sum(pg_total_relation_size(c)) FROM unnest(%s::regclass[]) AS c",
                ([t.strip('"') for t in self.t.values()],),
            ).fetchone()[0]
        return {"disk_mb": round(float(total or 0) / MiB, 1)}

    def list_collections(self) -> list[str]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM reground_collections ORDER BY name").fetchall()]

    def _create(self, embedder: Any) -> None:
        dimension = int(embedder.dimension)
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('reground:schema'))")
            row = conn.execute(
                "INSERT INTO reground_collections (name, embedding, dimension) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO NOTHING RETURNING id",
                (self.collection, embedder.name, dimension),
            ).fetchone()
            if row is None:
                return  # another process created it first
            p = f"rg{int(row[0])}_"
            chunks, docs, terms, postings, values = (quote(p + n) for n in TABLES)
            conn.execute(
                f"""CREATE TABLE {chunks} (
                    row_id serial PRIMARY KEY, chunk_id text NOT NULL UNIQUE, doc_id text NOT NULL,
                    position int NOT NULL, title text NOT NULL, section text NOT NULL, url text NOT NULL,
                    text text NOT NULL, metadata jsonb NOT NULL, scope_tokens text[] NOT NULL,
                    tokens int NOT NULL, embedding vector({dimension}) NOT NULL, sentences bytea)"""
            )
            # Vectors inline in the row (pgvector's default, EXTERNAL, moves a MiniLM vector out to TOAST, and an exact
            # scan then reads every one of them from there); text and sentence vectors go out instead.
            conn.execute(f"ALTER TABLE {chunks} ALTER COLUMN embedding SET STORAGE PLAIN")
            conn.execute(f"CREATE INDEX ON {chunks} (doc_id, position)")
            conn.execute(f"CREATE INDEX ON {chunks} USING gin (scope_tokens)")
            conn.execute(f"CREATE INDEX rg{int(row[0])}_ann ON {chunks} USING hnsw (embedding vector_cosine_ops)")
            conn.execute(
                f"""CREATE TABLE {docs} (doc_id text PRIMARY KEY, content_hash text NOT NULL, chunks int NOT NULL,
                    tokens int NOT NULL, metadata jsonb NOT NULL)"""
            )
            conn.execute(
                f"""CREATE TABLE {terms} (term text PRIMARY KEY, id serial UNIQUE, chunk_df int NOT NULL DEFAULT 0,
                    doc_df int NOT NULL DEFAULT 0)"""
            )
            # One row per (term, chunk); read in impact order (the BM25 tf component at the time of writing).
            conn.execute(
                f"""CREATE TABLE {postings} (term_id int NOT NULL, row_id int NOT NULL, tf smallint NOT NULL,
                    len smallint NOT NULL, impact real NOT NULL)"""
            )
            conn.execute(
                f"CREATE INDEX rg{int(row[0])}_impact ON {postings} (term_id, impact DESC, row_id) INCLUDE (tf, len)"
            )
            conn.execute(
                f"""CREATE TABLE {values} (field text NOT NULL, value text NOT NULL, docs int NOT NULL,
                    PRIMARY KEY (field, value))"""
            )

    # --- identity, hashes and the collection row ----------------------------------------------

    @property
    def embedder(self) -> Any:
        return self._embedder

    def document_hashes(self) -> dict[str, str]:
        with self._conn() as conn:
            return dict(conn.execute(f"SELECT doc_id, content_hash FROM {self.t['documents']}").fetchall())

    def document_chunk_counts(self) -> dict[str, int]:
        with self._conn() as conn:
            return dict(conn.execute(f"SELECT doc_id, chunks FROM {self.t['documents']} ORDER BY doc_id").fetchall())

    def version(self) -> str:
        return str(self._stats()["version"])

    def _stats(self) -> dict[str, Any]:
        """The collection's row (version, counts), read at most every STATS_TTL_S: a turn asks it a dozen times,
        and a write elsewhere is seen within that time (this process's own writes at once)."""
        now = time.monotonic()
        cached = self._stats_cache
        if cached is not None and now - cached[0] < STATS_TTL_S:
            return cached[1]
        row = self._collection_row()
        if row is None:
            raise CollectionNotFoundError(f"collection {self.collection!r} was dropped from the engine")
        self._stats_cache = (now, row)
        return row


def describe_engine(spec: str, name: str | None = None) -> list[dict[str, Any]]:
    """`PassageStore.describe` for an engine: each collection's documents and chunks, or (with `name`) one
    collection's documents with their chunk counts and its metadata fields. Read-only; loads no embedding model."""
    import psycopg

    uri = engine_uri(spec)
    try:
        with psycopg.connect(uri, autocommit=True) as conn:
            exists = conn.execute("SELECT to_regclass('reground_collections') IS NOT NULL").fetchone()
            if not exists or not exists[0]:
                found: list[tuple[str, int, int, int]] = []
            else:
                found = conn.execute(
                    "SELECT name, id, documents, chunks FROM reground_collections ORDER BY name"
                ).fetchall()
            names = [r[0] for r in found]
            if name is not None and name not in names:
                raise collection_not_found(name, f"the engine at {safe_uri(uri)}", names)
            out: list[dict[str, Any]] = []
            for collection, cid, documents, chunks in found:
                if name is not None and collection != name:
                    continue
                row: dict[str, Any] = {"collection": collection, "documents": int(documents), "chunks": int(chunks)}
                if name is not None:
                    docs = conn.execute(f"SELECT doc_id, chunks FROM {quote(f'rg{cid}_documents')} ORDER BY doc_id")
                    row["document_chunks"] = [{"doc_id": d, "chunks": int(c)} for d, c in docs.fetchall()]
                    fields = conn.execute(f"SELECT DISTINCT field FROM {quote(f'rg{cid}_values')} ORDER BY 1")
                    row["metadata_fields"] = [r[0] for r in fields.fetchall()]
                out.append(row)
            return out
    except psycopg.OperationalError as exc:
        raise EngineError(f"the engine at {safe_uri(uri)} failed: {exc}".strip()) from exc
