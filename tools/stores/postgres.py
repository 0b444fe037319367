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
  spec (`reground engine status|stop --store pgserver:<dir>`; in Python `stop_local_engine(dir)`).

Its parts, in tools/stores/engine/: `process` (the bundled server and the URI a spec names), `schema` (the pool,
tables, indexes and the collection row), `writes` (a document replaced in one transaction, the advisory write
lock), `search` (dense kNN, scoped reads, the scope check) and `lexical` (BM25 in SQL, whole-document scores).
"""

from __future__ import annotations

from typing import Any

from reground.tools.stores.engine.lexical import EngineDocumentIndex, EngineLexical
from reground.tools.stores.engine.process import (
    ENGINE_EXTRA,
    EngineError,
    engine_uri,
    local_engine_uri,
    stop_local_engine,
)
from reground.tools.stores.engine.schema import describe_engine
from reground.tools.stores.engine.writes import EngineWrites
from reground.tools.stores.locking import WaitNotice
from reground.tools.stores.search_index import IndexSettings

__all__ = [
    "EngineDocumentIndex",
    "EngineError",
    "PostgresStore",
    "describe_engine",
    "engine_uri",
    "local_engine_uri",
    "open_engine_store",
    "stop_local_engine",
]


class PostgresStore(EngineLexical, EngineWrites):
    """A collection in PostgreSQL: written by ingest, searched in the engine (a VectorStore and a SearchStore)."""


def open_engine_store(
    spec: str,
    collection: str,
    *,
    embedder: Any = None,
    create: bool = False,
    on_wait: WaitNotice | None = None,
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
