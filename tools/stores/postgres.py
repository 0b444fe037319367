"""A store whose search runs in PostgreSQL: pgvector kNN, BM25 over an inverted index, the scope in SQL.

The embedded store (`tools.stores.store.PassageStore` + `tools.stores.search_index.SearchIndex`) loads every
chunk of a collection into each process that searches it. This one keeps the collection in a PostgreSQL server
and asks it for top-k candidates only, so an app process holds no snapshot and any number of processes (and
machines) share one engine. It is both a `VectorStore` (what ingest writes through) and a `SearchStore` (what
`tools.retrieval.search.HybridRetriever` reads), so `open_store` hands it to retrieval as it is.

Specs (`Context(store=...)`, `--store`):
- `postgresql://user:password@host:5432/dbname` (or `postgres://...`): any PostgreSQL >= 13 with the `vector`
  extension (pgvector >= 0.5) available: a managed service, a cluster, the LangGraph server's own Postgres;
- `pgserver:<dir>`: the PostgreSQL 16 + pgvector server the `engine` extra installs (`pip install
  'reground[engine]'`), started in <dir> on first use and left running for every process that opens the same
  spec (stop it with `reground.tools.stores.postgres.stop_local_engine(dir)`).

What runs where:
- dense: `ORDER BY embedding <=> query LIMIT k` over an HNSW index (exact scan below
  `IndexSettings.ann_min_chunks` live chunks, or with `IndexSettings(dense="exact")`);
- lexical: BM25 (bm25s' Lucene variant, k1 1.5, b 0.75, the tokeniser of `tools.text.lexical`) computed in SQL
  from an inverted index (term, chunk, tf, chunk length) and term statistics kept up to date by every write. Each
  query term reads its postings in impact order, at most `LEXICAL_POSTINGS` of them (all of them when a term is
  rarer than that, so small collections are scored exactly); the best candidates are rescored exactly;
- scope: every chunk carries `scope_tokens` (`field=value` for each value, each comma-separated part and 'all'),
  a GIN-indexed array; a `where` becomes `scope_tokens && ARRAY[...]` per field, the same fail-closed rule as
  `search_index.matches`. A search whose HNSW candidates the scope thins out below k is rerun exactly in scope;
- whole-document BM25 (the retrieval's `document_lexical` signals): document frequencies and lengths live in the
  engine; a leader's term counts come from reading its chunks (`document_term_index`).

Writes: a document is replaced in one transaction (chunks, postings, term and field statistics, the
collection's version), so readers see it fully old or fully new; writers of one collection are serialised by a
PostgreSQL advisory lock (`writing()`), which holds across machines, unlike the embedded store's file lock.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from reground.tools.stores.search_index import (
    MATCH_ANY,
    IndexSettings,
    Where,
    absent_values,
    normalize_where,
    scope_miss_message,
)
from reground.tools.stores.vector_store import (
    CollectionNotFoundError,
    EmbeddedDocument,
    InvalidCollectionNameError,
    Snapshot,
    StoreError,
    UnknownMetadataFieldError,
    collection_name_problem,
    entered_again,
    unpack_sentence_vectors,
)
from reground.tools.text.lexical import content_terms, lexical_tokens
from reground.tools.tuning.stores import ENGINE, STORE_IO
from reground.tools.types import Chunk

K1, B = ENGINE.bm25_k1, ENGINE.bm25_b
# Postings read per query term, best impact first. A term in fewer chunks is read whole (exact BM25); measured
# (evals/results/scale) at 200,000 chunks against exact scoring: see docs/deployment.md.
LEXICAL_POSTINGS = ENGINE.lexical_postings
RESCORE_FACTOR = ENGINE.rescore_factor  # candidates rescored exactly per wanted hit
POOL_WAIT_S = (
    ENGINE.pool_wait_s
)  # a turn waits this long for a connection (all busy, or the engine down) before failing
STATS_TTL_S = ENGINE.stats_ttl_s  # how stale a reader's view of the collection's version may be
DOC_CACHE = ENGINE.doc_cache  # documents whose chunks stay in a process's memory once read (per store version)
SMALLINT_MAX = 32767  # fact: PostgreSQL's smallint (term frequencies and chunk lengths are capped to it)
MB = 2**20  # fact: bytes in a MiB
ENGINE_EXTRA = "pip install 'reground[engine]'"


class EngineError(StoreError):
    """The engine cannot be reached or refused a request; the message names it and what to do."""


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _token(key: str, value: str | None = None) -> str:
    """One scope token: JSON, so no field name or value can forge another's (`a=b: c` vs `a: b=c`)."""
    return json.dumps([key] if value is None else [key, value])


def scope_tokens(metadata: Mapping[str, Any]) -> list[str]:
    """What a chunk's metadata lets through, as `search_index.matches` decides it: a token for the value and for
    each comma-separated part of it ('DE,AT' is both), and a wildcard token when the value is exactly 'all'. A scope
    {field: [values]} is then `scope_tokens && [field's value tokens..., field's wildcard]` per field."""
    out: set[str] = set()
    for key, value in metadata.items():
        text = str(value)
        out.add(_token(key, text))
        out.update(_token(key, part) for part in text.split(","))
        if text == MATCH_ANY:
            out.add(_token(key))
    return sorted(out)


def scope_clause(scope: Mapping[str, Sequence[str]], column: str = "scope_tokens") -> tuple[str, list[Any]]:
    """SQL (AND of one array overlap per field) and its parameters for a normalised scope; ('TRUE', []) for none."""
    if not scope:
        return "TRUE", []
    parts, params = [], []
    for key, values in sorted(scope.items()):
        parts.append(f"{column} && %s::text[]")
        params.append([*(_token(key, v) for v in values), _token(key)])
    return " AND ".join(parts), params


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


# --- the engine the `engine` extra installs ------------------------------------------------


def local_engine_uri(data_dir: str | Path) -> str:
    """Start (or find running) the bundled PostgreSQL + pgvector server in data_dir; its connection URI.

    The server outlives this process (other processes opening the same spec share it)."""
    try:
        import pgserver
    except ImportError as exc:
        raise EngineError(f"the bundled engine is not installed: {ENGINE_EXTRA}") from exc
    path = Path(data_dir or "").expanduser()
    if not str(data_dir).strip():
        from reground.tools.adapters.paths import data_dir as default_data_dir

        path = default_data_dir(None) / "engine"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        from pgserver.postgres_server import PostgresServer

        # pgserver keeps one handle per directory per process, and trusts a postmaster.pid whose process exists: a
        # server that died (killed, crashed) but was not reaped yet is a zombie with that pid. Its handle and pid file
        # are dropped, so this call starts the server again (it recovers from its write-ahead log).
        if (path / "postmaster.pid").is_file() and not _postmaster_alive(path):
            PostgresServer._instances.pop(path.resolve(), None)
            (path / "postmaster.pid").unlink(missing_ok=True)
            for lock in path.glob(".s.PGSQL.*.lock"):  # the socket's lock names the dead pid too
                lock.unlink(missing_ok=True)
                Path(str(lock).removesuffix(".lock")).unlink(missing_ok=True)
        server = pgserver.get_server(path.resolve(), cleanup_mode=None)
        return str(server.get_uri())
    except Exception as exc:
        raise EngineError(f"cannot start the bundled engine in {path}: {exc}") from exc


def _postmaster_alive(path: Path) -> bool:
    """Whether the postmaster named in data_dir's postmaster.pid runs (a zombie does not)."""
    import psutil

    try:
        pid = int((path / "postmaster.pid").read_text().splitlines()[0])
        proc = psutil.Process(pid)
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except (OSError, ValueError, IndexError, psutil.Error):
        return False


def stop_local_engine(data_dir: str | Path) -> bool:
    """Stop the bundled server of data_dir (fast shutdown); False if none was running."""
    import os
    import subprocess

    from pgserver import _commands

    pg_ctl: Any = _commands.__dict__["pg_ctl"]  # made at import, one function per bundled binary

    path = Path(data_dir).expanduser().resolve()
    if not (path / "postmaster.pid").is_file():
        return False
    user = "pgserver" if os.geteuid() == 0 else None  # as root, pgserver runs the server as this user
    try:
        pg_ctl(["-m", "fast", "-w", "stop"], pgdata=path, user=user, timeout=ENGINE.stop_timeout_s)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return False
    return True


def engine_uri(spec: str) -> str:
    """The connection URI a spec names: a `postgres(ql)://` URI as given, `pgserver:<dir>` started locally."""
    scheme, _, rest = spec.strip().partition(":")
    if scheme == "pgserver":
        return local_engine_uri(rest)
    if scheme in ("postgresql", "postgres"):
        return spec.strip()
    raise EngineError(f"not an engine spec: {spec!r} (use postgresql://... or pgserver:<dir>)")


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
                known = ", ".join(names) or "none"
                raise CollectionNotFoundError(
                    f"collection {name!r} does not exist in the engine at {_safe(uri)} (known: {known})"
                )
            out: list[dict[str, Any]] = []
            for collection, cid, documents, chunks in found:
                if name is not None and collection != name:
                    continue
                row: dict[str, Any] = {"collection": collection, "documents": int(documents), "chunks": int(chunks)}
                if name is not None:
                    docs = conn.execute(f"SELECT doc_id, chunks FROM {_quote(f'rg{cid}_documents')} ORDER BY doc_id")
                    row["document_chunks"] = [{"doc_id": d, "chunks": int(c)} for d, c in docs.fetchall()]
                    fields = conn.execute(f"SELECT DISTINCT field FROM {_quote(f'rg{cid}_values')} ORDER BY 1")
                    row["metadata_fields"] = [r[0] for r in fields.fetchall()]
                out.append(row)
            return out
    except psycopg.OperationalError as exc:
        raise EngineError(f"the engine at {_safe(uri)} failed: {exc}".strip()) from exc


# --- the store -------------------------------------------------------------------------------


class PostgresStore:
    """A collection in PostgreSQL: written by ingest, searched in the engine (a VectorStore and a SearchStore)."""

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
            raise EngineError(f"cannot connect to the engine at {_safe(uri)}: {exc}; is it running?") from exc
        self._writer = threading.local()
        self._lock = threading.Lock()
        self._docs: OrderedDict[tuple[int, str], list[Chunk]] = OrderedDict()
        self._terms: OrderedDict[tuple[int, str], tuple[int, int, int] | None] = OrderedDict()
        self._memo: dict[tuple[int, str], Any] = {}
        self._stats_cache: tuple[float, dict[str, Any]] | None = None
        self._doc_terms: OrderedDict[tuple[int, str, tuple[str, ...]], tuple[Counter[str], int]] = OrderedDict()
        self._setup()
        row = self._collection_row()
        if row is None:
            if not create:
                known = ", ".join(self.list_collections()) or "none"
                raise CollectionNotFoundError(
                    f"collection {collection!r} does not exist in the engine at {_safe(uri)} (known: {known}); "
                    f"create it with `reground ingest PATH --collection {collection} --store <this spec>`"
                )
            self._embedder = self._load_embedder(embedder, "")
            self._create(self._embedder)
            row = self._collection_row()
            assert row is not None
        else:
            self._embedder = self._load_embedder(embedder, str(row["embedding"]))
        self.cid = int(row["id"])
        self.t = {
            name: _quote(f"rg{self.cid}_{name}") for name in ("chunks", "documents", "terms", "postings", "values")
        }

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
            raise EngineError(f"the engine at {_safe(self.uri)} failed: {exc}".strip()) from exc
        except Exception as exc:
            from psycopg_pool import PoolTimeout

            if isinstance(exc, PoolTimeout):
                raise EngineError(f"the engine at {_safe(self.uri)} is unreachable: {exc}") from exc
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
                conn.execute(f"DROP INDEX IF EXISTS {_quote(name)}")

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
        return {"disk_mb": round(float(total or 0) / MB, 1)}

    def list_collections(self) -> list[str]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM reground_collections ORDER BY name").fetchall()]

    def _load_embedder(self, embedder: Any, recorded: str) -> Any:
        from reground.tools.adapters.embeddings import DEFAULT_SPEC, load_embedder

        if embedder is None:
            return load_embedder(recorded or DEFAULT_SPEC)
        if recorded and recorded != embedder.name:
            from reground.tools.stores.store import EmbeddingMismatchError

            raise EmbeddingMismatchError(
                f"collection {self.collection!r} was embedded with {recorded!r}, not {embedder.name!r}: set the "
                f"embedding model to {recorded!r} or ingest into a new collection"
            )
        return embedder

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
            chunks, docs, terms, postings, values = (
                _quote(p + n) for n in ("chunks", "documents", "terms", "postings", "values")
            )
            conn.execute(
                f"""CREATE TABLE {chunks} (
                    row_id serial PRIMARY KEY, chunk_id text NOT NULL UNIQUE, doc_id text NOT NULL,
                    position int NOT NULL, title text NOT NULL, section text NOT NULL, url text NOT NULL,
                    text text NOT NULL, metadata jsonb NOT NULL, scope_tokens text[] NOT NULL,
                    tokens int NOT NULL, embedding vector({dimension}) NOT NULL, sentences bytea)"""
            )
            # Vectors inline in the row (pgvector's default, EXTERNAL, moves a 1.5 kB vector out to TOAST: an exact
            # scan of 2,218 chunks read 13,600 buffers and took 9 ms); text and sentence vectors go out instead.
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

    # --- VectorStore: identity, lock, hashes ---------------------------------------------------

    @property
    def embedder(self) -> Any:
        return self._embedder

    @contextlib.contextmanager
    def writing(self, *, on_wait: Any = None, timeout_s: float | None = None) -> Iterator[None]:
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
                pid = holder[0] if holder else "?"
                message = f"waiting for another ingest into {self.collection} (engine backend pid {pid})…"
                (on_wait or _stderr)(message)
                started = time.monotonic()
                while not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]:
                    if timeout_s is not None and time.monotonic() - started > timeout_s:
                        raise TimeoutError(f"another writer held {self.collection!r} for {timeout_s:.0f} s")
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

    # --- writing ---------------------------------------------------------------------------

    def replace_document(self, doc_id: str, content_hash: str, chunks: list[Chunk]) -> None:
        from reground.tools.stores.store import chunk_vectors

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
                for key, value in metadata.items():
                    value_docs[(key, str(value))] += 1
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
                        _vector_text(vector),
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

    # --- reading: whole-collection reads (export and tools; search never calls them) -------------

    def load_snapshot(self, *, vectors: bool = True) -> Snapshot:
        """Every live chunk (and vector): for exports and the embedded index; retrieval on this store never loads it."""
        version = self.version()
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_CHUNK_COLUMNS}, row_id, {'embedding' if vectors else 'NULL'} FROM {self.t['chunks']} "
                "ORDER BY doc_id, position"
            ).fetchall()
        chunks = [_chunk(r) for r in rows]
        dimension = int(self.embedder.dimension)
        matrix = (
            np.asarray([_array(r[-1]) for r in rows], dtype=np.float32).reshape(-1, dimension)
            if vectors
            else np.zeros((0, dimension), dtype=np.float32)
        )
        return Snapshot(version=version, chunks=chunks, vectors=matrix, row_ids=[str(r[-2]) for r in rows])

    def all_chunks(self, where: Where | None = None) -> list[Chunk]:
        """Every chunk in scope (a whole-collection read: for exports and tools, not for search)."""
        scope = self.check_filter(where)
        clause, params = scope_clause(scope)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM {self.t['chunks']} WHERE {clause} ORDER BY doc_id, position", params
            ).fetchall()
        return [_chunk(r) for r in rows]

    # --- reading: what a turn asks ----------------------------------------------------------

    def count(self) -> int:
        return int(self._stats()["chunks"])

    def metadata_fields(self) -> list[str]:
        key = (int(self._stats()["version"]), "fields")
        if key not in self._memo:
            with self._conn() as conn:
                fields = [r[0] for r in conn.execute(f"SELECT DISTINCT field FROM {self.t['values']} ORDER BY 1")]
            self._memo = {k: v for k, v in self._memo.items() if k[0] == key[0]}
            self._memo[key] = fields
        return list(self._memo[key])

    def check_filter(self, where: Where | None) -> dict[str, list[str]]:
        """The normalised scope, or MetadataFilterError / UnknownMetadataFieldError (as the embedded index)."""
        scope = normalize_where(where)
        if not scope:
            return scope
        fields = set(self.metadata_fields())
        unknown = sorted(set(scope) - fields)
        if unknown and self.count():
            known = ", ".join(sorted(fields)) or "none"
            raise UnknownMetadataFieldError(
                f"metadata filter names {', '.join(map(repr, unknown))}, which no document in collection "
                f"{self.collection!r} has (known fields: {known}); fix the filter or ingest documents with that field"
            )
        return scope

    def scope_miss(self, where: Where) -> str | None:
        """`search_index.scope_miss`'s message, from the engine's value statistics (no chunk is read)."""
        scope = self.check_filter(where)
        if not scope:
            return None
        with self._conn() as conn:
            stored: dict[str, set[str]] = {key: set() for key in scope}
            for field, value in conn.execute(
                f"SELECT field, value FROM {self.t['values']} WHERE field = ANY(%s)", (list(scope),)
            ):
                stored[field].update({value, *value.split(",")})
            absent, hints = absent_values(scope, stored)
            if not absent:
                return None
            clause, params = scope_clause(scope)
            covered = conn.execute(
                f"SELECT EXISTS (SELECT 1 FROM {self.t['chunks']} WHERE {clause})", params
            ).fetchone()[0]
        return scope_miss_message(self.collection, absent, hints, bool(covered))

    @property
    def dense_mode(self) -> str:
        mode = self.settings.dense
        if mode == "auto":
            return "hnsw" if self.count() >= self.settings.ann_min_chunks else "exact"
        return mode

    def dense_search(
        self, query_embedding: np.ndarray, k: int, where: Where | None = None
    ) -> list[tuple[Chunk, float]]:
        """Cosine kNN in the engine, inside the scope: HNSW (exact below ann_min_chunks chunks); a scope that leaves
        fewer than k of the HNSW candidates is searched again exactly."""
        scope = self.check_filter(where)
        if k <= 0:
            return []
        query = np.asarray(query_embedding, dtype=np.float32).reshape(-1)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        clause, params = scope_clause(scope)
        sql = (
            f"SELECT {_CHUNK_COLUMNS}, 1 - (embedding <=> %s) AS score FROM {self.t['chunks']} "
            f"WHERE {clause} ORDER BY embedding <=> %s LIMIT %s"
        )
        args = [query, *params, query, k]
        approximate = self.dense_mode == "hnsw"
        with self._conn() as conn, conn.transaction():
            if approximate:
                ef = min(ENGINE.ef_search_max, max(ENGINE.ef_search_min, k * self.settings.ann_oversample))
                conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
            else:
                conn.execute("SET LOCAL enable_indexscan = off")  # a sequential scan: exact
            rows = conn.execute(sql, args).fetchall()
            if approximate and len(rows) < k and scope:
                conn.execute("SET LOCAL enable_indexscan = off")
                rows = conn.execute(sql, args).fetchall()
        return [(_chunk(r), float(r[-1])) for r in rows]

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
                        SELECT {_CHUNK_COLUMNS_C}, c.tokens, cand.score
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
            return [(_chunk(r), float(np.float32(r[-1]))) for r in rows[:k] if r[-1] > 0]
        # Exact BM25 of the candidates (a candidate outside a term's first postings has that term's part too).
        scored = []
        for r in rows:
            chunk = _chunk(r)
            counts = Counter(chunk_terms(chunk))
            length = int(r[-2])
            score = sum(weights[t] * bm25_weight(counts[t], length, avg) for t in terms if counts.get(t))
            scored.append((chunk, float(np.float32(score))))
        scored.sort(key=lambda hit: -hit[1])
        return [hit for hit in scored[:k] if hit[1] > 0]

    def chunks_for_documents(self, doc_ids: Sequence[str], where: Where | None = None) -> list[Chunk]:
        """The documents' chunks in scope, in document then position order (read per document, cached per version)."""
        scope = self.check_filter(where)
        version = int(self._stats()["version"])
        wanted = list(dict.fromkeys(doc_ids))
        with self._lock:
            missing = [d for d in wanted if (version, d) not in self._docs]
        if missing:
            with self._conn() as conn:
                rows = conn.execute(
                    f"SELECT {_CHUNK_COLUMNS} FROM {self.t['chunks']} WHERE doc_id = ANY(%s) ORDER BY doc_id, position",
                    (missing,),
                ).fetchall()
            read: dict[str, list[Chunk]] = {d: [] for d in missing}
            for r in rows:
                chunk = _chunk(r)
                read[chunk["doc_id"]].append(chunk)
            with self._lock:
                for d, chunks in read.items():
                    self._docs[(version, d)] = chunks
                while len(self._docs) > DOC_CACHE:
                    self._docs.popitem(last=False)
        from reground.tools.stores.search_index import matches

        out: list[Chunk] = []
        with self._lock:
            for d in wanted:
                chunks = self._docs.get((version, d), [])
                if (version, d) in self._docs:
                    self._docs.move_to_end((version, d))
                out.extend(c for c in chunks if matches(c["metadata"], scope))
        return out

    def embeddings_for(self, chunk_ids: Sequence[str]) -> np.ndarray:
        if not chunk_ids:
            return np.zeros((0, int(self.embedder.dimension)), dtype=np.float32)
        with self._conn() as conn:
            found = dict(
                conn.execute(
                    f"SELECT chunk_id, embedding FROM {self.t['chunks']} WHERE chunk_id = ANY(%s)", (list(chunk_ids),)
                ).fetchall()
            )
        missing = [c for c in chunk_ids if c not in found]
        if missing:
            raise StoreError(f"unknown chunk ids in collection {self.collection!r}: {missing[: STORE_IO.ids_named]}")
        return np.stack([_array(found[c]) for c in chunk_ids])

    def sentence_vectors(self, passages: Sequence[Mapping[str, Any]]) -> list[np.ndarray | None]:
        """Per passage, its sentences' vectors kept at ingest (None when not kept or its text is not the chunk's)."""
        if not self.settings.stored_sentence_vectors or not passages:
            return [None] * len(passages)
        ids = [str(p.get("chunk_id", "")) for p in passages]
        with self._conn() as conn:
            found = {
                r[0]: (r[1], r[2])
                for r in conn.execute(
                    f"SELECT chunk_id, text, sentences FROM {self.t['chunks']} WHERE chunk_id = ANY(%s)", (ids,)
                )
            }
        dimension = int(self.embedder.dimension)
        out: list[np.ndarray | None] = []
        for chunk_id, passage in zip(ids, passages, strict=True):
            text, blob = found.get(chunk_id, (None, None))
            out.append(
                unpack_sentence_vectors(bytes(blob), dimension) if blob and text == passage.get("text") else None
            )
        return out

    def document_term_index(self, where: Where | None = None) -> EngineDocumentIndex:
        """Whole-document BM25 (`tools.retrieval.search.DocumentTermIndex`'s scores) from the engine's document
        statistics; a leader's term counts come from its chunks (`chunks_for_documents`, cached)."""
        return EngineDocumentIndex(self, where)


class EngineDocumentIndex:
    """Whole-document BM25 scores of named documents, with the collection's document frequencies and lengths.

    The embedded stack computes them over the documents in scope; here they are the whole collection's (the same
    for an unscoped search; a scope changes the idf only slightly, never which documents can score)."""

    def __init__(self, store: PostgresStore, where: Where | None) -> None:
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


_CHUNK_COLUMNS = "chunk_id, doc_id, title, section, url, position, text, metadata"
_CHUNK_COLUMNS_C = ", ".join(f"c.{c.strip()}" for c in _CHUNK_COLUMNS.split(","))


def _array(value: Any) -> np.ndarray:
    """A pgvector value as float32 (the adapter hands back `Vector` objects)."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if callable(to_numpy) else value, dtype=np.float32)


def _vector_text(vector: np.ndarray) -> str:
    """pgvector's text form, one formatting call per vector (COPY of millions of rows)."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + ("%.7g," * len(values))[:-1] % tuple(values) + "]"


def _chunk(row: Sequence[Any]) -> Chunk:
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


def _safe(uri: str) -> str:
    """The URI without its password."""
    return re.sub(r"(//[^:/@]+):[^@]*@", r"\1:***@", uri)


def _stderr(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)


def open_engine_store(
    spec: str,
    collection: str,
    *,
    embedder: Any = None,
    create: bool = False,
    on_wait: Any = None,
    index: IndexSettings | None = None,
) -> PostgresStore:
    """`open_store`'s factory for `postgresql://`, `postgres://` and `pgserver:` specs."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
        from pgvector.psycopg import register_vector  # noqa: F401
    except ImportError as exc:
        raise EngineError(f"the engine store needs psycopg, psycopg-pool and pgvector: {ENGINE_EXTRA}") from exc
    return PostgresStore(engine_uri(spec), collection, embedder=embedder, create=create, index=index)
