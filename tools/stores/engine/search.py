"""What a turn asks the engine: dense kNN inside the scope, a document's chunks, stored vectors, the scope check
and notice; and the whole-collection reads exports use (search never calls them).

- dense: `ORDER BY embedding <=> query LIMIT k` over an HNSW index (exact scan below `IndexSettings.ann_min_chunks`
  live chunks, or with `IndexSettings(dense="exact")`); a search whose HNSW candidates the scope thins out below k
  is rerun exactly in scope;
- scope: every chunk carries `scope_tokens` (tools/stores/scope.py), a GIN-indexed array; a `where` becomes
  `scope_tokens && ARRAY[...]` per field, the same fail-closed rule as `search_index.matches`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from reground.tools.stores.engine.schema import CHUNK_COLUMNS, EngineCollection, chunk_from_row, vector_array
from reground.tools.stores.scope import checked_scope, scope_clause
from reground.tools.stores.search_index import Where, absent_values, matches, normalize_where, scope_miss_message
from reground.tools.stores.vector_store import Snapshot, StoreError, unpack_sentence_vectors
from reground.tools.tuning.stores import ENGINE, STORE_IO
from reground.tools.types import Chunk

DOC_CACHE = ENGINE.doc_cache  # documents whose chunks stay in a process's memory once read (per store version)


class EngineSearch(EngineCollection):
    """Dense search, scoped reads and the scope check of a collection in the engine (a SearchStore, with
    `engine.lexical`)."""

    _memo: dict[tuple[int, str], list[str]]  # the metadata fields of the version read last (set up by the base)

    # --- reading: whole-collection reads (export and tools; search never calls them) -------------

    def load_snapshot(self, *, vectors: bool = True) -> Snapshot:
        """Every live chunk (and vector): for exports and the embedded index; retrieval on this store never loads it."""
        version = self.version()
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {CHUNK_COLUMNS}, row_id, {'embedding' if vectors else 'NULL'} FROM {self.t['chunks']} "
                "ORDER BY doc_id, position"
            ).fetchall()
        chunks = [chunk_from_row(r) for r in rows]
        dimension = int(self.embedder.dimension)
        matrix = (
            np.asarray([vector_array(r[-1]) for r in rows], dtype=np.float32).reshape(-1, dimension)
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
                f"SELECT {CHUNK_COLUMNS} FROM {self.t['chunks']} WHERE {clause} ORDER BY doc_id, position", params
            ).fetchall()
        return [chunk_from_row(r) for r in rows]

    # --- reading: what a turn asks ----------------------------------------------------------

    def count(self) -> int:
        return int(self._stats()["chunks"])

    def metadata_fields(self) -> list[str]:
        key = (int(self._stats()["version"]), "fields")
        if key not in self._memo:
            with self._conn() as conn:
                fields = [r[0] for r in conn.execute(f"SELECT DISTINCT field FROM {self.t['values']} ORDER BY 1")]
            kept = {k: v for k, v in self._memo.items() if k[0] == key[0]}
            kept[key] = fields
            self._memo = kept
        return list(self._memo[key])

    def check_filter(self, where: Where | None) -> dict[str, list[str]]:
        """The normalised scope, or MetadataFilterError / UnknownMetadataFieldError (as the embedded index)."""
        if not normalize_where(where):
            return {}
        return checked_scope(where, self.collection, self.metadata_fields(), empty=not self.count())

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
            f"SELECT {CHUNK_COLUMNS}, 1 - (embedding <=> %s) AS score FROM {self.t['chunks']} "
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
        return [(chunk_from_row(r), float(r[-1])) for r in rows]

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
                    f"SELECT {CHUNK_COLUMNS} FROM {self.t['chunks']} WHERE doc_id = ANY(%s) ORDER BY doc_id, position",
                    (missing,),
                ).fetchall()
            read: dict[str, list[Chunk]] = {d: [] for d in missing}
            for r in rows:
                chunk = chunk_from_row(r)
                read[chunk["doc_id"]].append(chunk)
            with self._lock:
                for d, chunks in read.items():
                    self._docs[(version, d)] = chunks
                while len(self._docs) > DOC_CACHE:
                    self._docs.popitem(last=False)
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
        return np.stack([vector_array(found[c]) for c in chunk_ids])

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
