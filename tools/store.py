"""The persistent passage store: Chroma (embedded or server) + a BM25 index of the same chunks.

It is the one place where a user's metadata scope is enforced: every read takes `where`, and the
same predicate (`matches`) is applied to dense, lexical and direct reads, so no stage can leak. A
scope naming a field no document has is an error (`UnknownMetadataFieldError`), not an empty result.

Crash safety: a per-collection manifest (a second Chroma collection, one record per document)
names each document's live generation. New chunks are written under a new generation, then the
manifest record flips (a single upsert), then old chunks are deleted. Readers only see chunks of
the live generation, so a crash at any point leaves every document fully old or fully new.

Writers: one at a time per collection (`writing()`: a file lock beside the store, across processes
and threads). Holding it, a writer first repairs the collection: a manifest record whose chunks are
not all there is dropped (the next ingest re-adds the document) and chunks no record names are
deleted. Only the lock holder deletes leftovers, so a reader or a second writer never removes chunks
another writer has written but not flipped yet (how two concurrent ingests used to lose a document).
A generation is derived from the document's content, so writing the same document twice writes the
same rows, and every write is read back before and after the flip (what a Chroma server shared by
several machines, which a local lock cannot serialise, relies on).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from reground.tools.embeddings import MINILM_SPEC, Embedder, chroma_embedding_function, load_embedder
from reground.tools.errors import DataError, InputError
from reground.tools.lexical import lexical_tokens
from reground.tools.locking import (
    WaitNotice,
    collection_lock,
    lock_path,
    release,
    store_init_lock,
    try_collection_lock,
)
from reground.tools.paths import data_dir as default_data_dir
from reground.tools.types import Chunk

META_PREFIX = "m_"
MATCH_ANY = "all"
MANIFEST_SUFFIX = ".reground-manifest"
VERSION_ID = "__version__"
FILTER_OPERATORS = ("$eq", "$in")
# On a Chroma server, chunks of a generation no manifest record names may belong to a writer on another
# machine that has not flipped yet: only leftovers older than this are collected there.
SERVER_LEFTOVER_GRACE_S = 15 * 60.0
WRITE_ATTEMPTS = 3


class StoreError(DataError):
    """A store problem; the message names the collection and what to do."""


class CollectionNotFoundError(StoreError):
    """The collection does not exist; the message lists the ones that do."""


class EmptyCollectionError(StoreError):
    """The collection exists but holds no chunks."""


class UnknownMetadataFieldError(StoreError):
    """A metadata filter names a field no document of the collection has; the message lists the known ones."""


class InvalidCollectionNameError(InputError):
    """A collection name Chroma (or a path) would not accept, e.g. `../../etc`."""


class MetadataFilterError(InputError):
    """A metadata filter of the wrong shape or with an unsupported operator."""


Where = dict[str, Any]


def collection_name_problem(collection: str) -> str | None:
    """Why a collection name is invalid (Chroma's rules, with room for the manifest suffix), or None."""
    shape = r"[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]"
    if 3 <= len(collection) <= 200 and re.fullmatch(shape, collection) and ".." not in collection:
        return None
    return (
        f"invalid collection name {collection!r}: 3-200 characters, letters, digits, '.', '_' or '-', "
        "starting and ending with a letter or digit, no '..'"
    )


_FILTER_HELP = "use {'field': value}, {'field': [v1, v2]}, {'field': {'$eq': value}} or {'field': {'$in': [v1, v2]}}"


def _filter_values(key: str, value: Any) -> list[Any]:
    """The allowed values of one filter entry; raises MetadataFilterError on anything else."""
    if isinstance(value, dict):
        if len(value) != 1:
            raise MetadataFilterError(
                f"metadata filter {key!r} must have exactly one operator, got {value!r}; {_FILTER_HELP}"
            )
        ((op, operand),) = value.items()
        if op not in FILTER_OPERATORS:
            raise MetadataFilterError(
                f"unsupported metadata filter operator {op!r} on {key!r} (supported: {', '.join(FILTER_OPERATORS)}); "
                f"{_FILTER_HELP}"
            )
        if op == "$in" and not isinstance(operand, list):
            raise MetadataFilterError(f"metadata filter {key!r}: '$in' needs a list of values, got {operand!r}")
        return operand if isinstance(operand, list) else [operand]
    return value if isinstance(value, list) else [value]


def normalize_where(where: Where | None) -> dict[str, list[str]]:
    """{field: value | [values] | {'$eq': v} | {'$in': [...]}} → {field: [str values]}; rejects the rest."""
    if not where:
        return {}
    if not isinstance(where, dict):
        raise MetadataFilterError(f"metadata filter must be an object like {{'country': 'DE'}}, got {where!r}")
    out: dict[str, list[str]] = {}
    for key, value in where.items():
        if not isinstance(key, str) or not key.strip():
            raise MetadataFilterError(f"metadata filter keys must be field names, got {key!r}; {_FILTER_HELP}")
        if key.startswith("$"):
            raise MetadataFilterError(
                f"unsupported metadata filter operator {key!r} at the top level (fields are AND-ed); {_FILTER_HELP}"
            )
        values = _filter_values(key, value)
        if not values or not all(isinstance(v, (str, int, float, bool)) for v in values):
            raise MetadataFilterError(
                f"metadata filter {key!r} needs a string/number/boolean or a non-empty list of them, got {value!r}"
            )
        out[key] = [str(v) for v in values]
    return out


def matches(metadata: dict[str, Any], where: dict[str, list[str]]) -> bool:
    """Fail closed: every filtered field must be present and equal one of the values, or be 'all'."""
    for key, allowed in where.items():
        if key not in metadata:
            return False
        value = str(metadata[key])
        if value != MATCH_ANY and value not in allowed and not (set(value.split(",")) & set(allowed)):
            return False
    return True


def generation_for(doc_id: str, content_hash: str) -> str:
    """Deterministic per document content: two writers of the same content write the same rows."""
    return hashlib.sha256(f"{doc_id}\0{content_hash}".encode()).hexdigest()[:12]


def _client(data_dir: Path, chroma_url: str) -> Any:
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    if chroma_url:
        parsed = urlparse(chroma_url if "://" in chroma_url else f"http://{chroma_url}")
        return chromadb.HttpClient(
            host=parsed.hostname or "127.0.0.1",
            port=parsed.port or 8000,
            ssl=parsed.scheme == "https",
            settings=settings,
        )
    return chromadb.PersistentClient(path=str(data_dir / "chroma"), settings=settings)


class _Snapshot:
    """Live chunks of one version of a collection, held in memory for millisecond reads."""

    def __init__(self, version: str, chunks: list[Chunk], vectors: np.ndarray) -> None:
        self.version = version
        self.chunks = chunks
        self.vectors = vectors
        self.index = {c["chunk_id"]: i for i, c in enumerate(chunks)}
        self.by_doc: dict[str, list[int]] = {}
        for i, c in enumerate(chunks):
            self.by_doc.setdefault(c["doc_id"], []).append(i)
        self.fields: frozenset[str] = frozenset(key for c in chunks for key in c["metadata"])
        self._bm25: Any = None
        self._allowed: dict[tuple[tuple[str, tuple[str, ...]], ...], np.ndarray] = {}
        self._lock = threading.Lock()

    def allowed(self, scope: dict[str, list[str]]) -> np.ndarray | None:
        """Which chunks the scope lets through (None: no scope, all of them); computed once per scope,
        since every search of a turn (dense and lexical, each query) asks for the same one."""
        if not scope:
            return None
        key = tuple(sorted((name, tuple(values)) for name, values in scope.items()))
        with self._lock:
            mask = self._allowed.get(key)
        if mask is None:
            mask = np.fromiter((matches(c["metadata"], scope) for c in self.chunks), dtype=bool, count=len(self.chunks))
            with self._lock:
                self._allowed[key] = mask
        return mask

    def bm25(self) -> Any:
        with self._lock:
            if self._bm25 is None and self.chunks:
                import bm25s

                corpus = [lexical_tokens(f"{c['title']} {c['section']} {c['text']}") for c in self.chunks]
                retriever = bm25s.BM25()
                retriever.index(corpus, show_progress=False)
                self._bm25 = retriever
            return self._bm25


class PassageStore:
    """A collection of chunks with dense and lexical search, filtered by the user's scope."""

    def __init__(self, collection: str, client: Any, embedder: Embedder, data_dir: Path, chroma_url: str) -> None:
        self.collection = collection
        self.embedder = embedder
        self.data_dir = data_dir
        self.chroma_url = chroma_url
        self._bind(client)
        self._snapshot: _Snapshot | None = None
        self._lock = threading.Lock()
        self._writer = threading.local()  # how deep this thread is in `writing()` (the lock is re-entrant)
        self._disk_mark = self._disk_state()
        self.last_repair: dict[str, Any] = {}
        self._unreported: list[str] = []  # documents repair dropped that no ingest summary has named yet

    # --- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        collection: str,
        *,
        data_dir: str | Path | None = None,
        embedder: Embedder | None = None,
        chroma_url: str = "",
        create: bool = False,
        on_wait: WaitNotice | None = None,
    ) -> PassageStore:
        """Open (or, with `create`, create) a collection; repairs it if no writer is busy with it.

        With `create` (what writers pass) this waits for another writer's lock, telling `on_wait`.
        """
        problem = collection_name_problem(collection)
        if problem:
            raise InvalidCollectionNameError(problem)
        root = default_data_dir(data_dir)
        embedder = embedder or load_embedder(MINILM_SPEC)
        path = lock_path(root, collection, chroma_url)
        # A reader opening next to a running ingest must not collect that ingest's not-yet-flipped chunks:
        # the repair on open runs only if the write lock is free. A writer (`create`) waits for it, so
        # concurrent first ingests do not race to create the collection.
        with contextlib.ExitStack() as held:
            if create:
                held.enter_context(collection_lock(path, collection, on_wait=on_wait))
                locked = True
            else:
                handle = try_collection_lock(path)
                locked = handle is not None
                if handle is not None:
                    held.callback(release, handle)
            client = cls._open_client(root, chroma_url)
            names = {c if isinstance(c, str) else c.name for c in client.list_collections()}
            if collection not in names:
                if not create:
                    where = chroma_url or str(root)
                    known = sorted(n for n in names if not n.endswith(MANIFEST_SUFFIX))
                    raise CollectionNotFoundError(
                        f"collection {collection!r} does not exist in {where} (known: {', '.join(known) or 'none'}); "
                        f"create it with `reground ingest PATH --collection {collection}`"
                    )
                client.get_or_create_collection(
                    collection,
                    embedding_function=chroma_embedding_function(embedder.name),
                    metadata={"hnsw:space": "cosine", "embedding": embedder.name},
                )
            store = cls(collection, client, embedder, root, chroma_url)
            if locked:
                store.repair()
        return store

    @staticmethod
    def _open_client(root: Path, chroma_url: str) -> Any:
        try:
            if chroma_url:
                return _client(root, chroma_url)
            # Processes creating the embedded store's database at once would race on its migrations.
            with store_init_lock(root):
                return _client(root, chroma_url)
        except Exception as exc:
            where = chroma_url or str(root / "chroma")
            raise StoreError(f"cannot open the Chroma store at {where}: {exc}; check the path or server") from exc

    @staticmethod
    def list_collections(data_dir: str | Path | None = None, chroma_url: str = "") -> list[str]:
        client = PassageStore._open_client(default_data_dir(data_dir), chroma_url)
        names = [c if isinstance(c, str) else c.name for c in client.list_collections()]
        return sorted(n for n in names if not n.endswith(MANIFEST_SUFFIX))

    @staticmethod
    def describe(
        name: str | None = None, *, data_dir: str | Path | None = None, chroma_url: str = ""
    ) -> list[dict[str, Any]]:
        """Read-only: each collection's document and chunk counts, or (with `name`) one collection's
        documents with their chunk counts and its metadata fields. Loads no embedding model."""
        root = default_data_dir(data_dir)
        client = PassageStore._open_client(root, chroma_url)
        names = sorted(
            n
            for n in (c if isinstance(c, str) else c.name for c in client.list_collections())
            if not n.endswith(MANIFEST_SUFFIX)
        )
        if name is not None:
            problem = collection_name_problem(name)
            if problem:
                raise InvalidCollectionNameError(problem)
            if name not in names:
                raise CollectionNotFoundError(
                    f"collection {name!r} does not exist in {chroma_url or root} (known: {', '.join(names) or 'none'})"
                )
        out: list[dict[str, Any]] = []
        for collection in [name] if name is not None else names:
            try:
                got = client.get_collection(collection + MANIFEST_SUFFIX).get(include=["metadatas"])
            except Exception:  # a collection without a manifest (not written by reground): nothing live
                got = {"ids": [], "metadatas": []}
            counts = {
                doc_id: int((meta or {}).get("chunks", 0))
                for doc_id, meta in zip(got["ids"], got["metadatas"] or [], strict=False)
                if doc_id != VERSION_ID
            }
            row: dict[str, Any] = {"collection": collection, "documents": len(counts), "chunks": sum(counts.values())}
            if name is not None:
                row["document_chunks"] = [{"doc_id": d, "chunks": counts[d]} for d in sorted(counts)]
                chunks = client.get_collection(collection).get(include=["metadatas"])
                fields: set[str] = set()
                for meta in chunks["metadatas"] or []:
                    fields.update(json.loads(str((meta or {}).get("metadata_json", "{}"))))
                row["metadata_fields"] = sorted(fields)
            out.append(row)
        return out

    # --- the manifest ----------------------------------------------------------------------

    def _manifest_records(self) -> dict[str, dict[str, Any]]:
        got = self._manifest.get(include=["metadatas"])
        return {i: dict(m or {}) for i, m in zip(got["ids"], got["metadatas"] or [], strict=False)}

    def _version(self) -> str:
        got = self._manifest.get(ids=[VERSION_ID], include=["metadatas"])
        metas = got.get("metadatas") or []
        return str(metas[0].get("version", "")) if metas and metas[0] else ""

    def _bump_version(self) -> None:
        self._manifest.upsert(
            ids=[VERSION_ID], documents=["version"], metadatas=[{"version": uuid.uuid4().hex}], embeddings=[[0.0]]
        )

    def document_hashes(self) -> dict[str, str]:
        return {
            doc_id: str(meta.get("hash", ""))
            for doc_id, meta in self._manifest_records().items()
            if doc_id != VERSION_ID
        }

    def document_chunk_counts(self) -> dict[str, int]:
        """doc_id -> number of live chunks, as the manifest records them (cheap: no chunk is read)."""
        return {
            doc_id: int(meta.get("chunks", 0))
            for doc_id, meta in sorted(self._manifest_records().items())
            if doc_id != VERSION_ID
        }

    # --- the write lock and repair -----------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return lock_path(self.data_dir, self.collection, self.chroma_url)

    @contextlib.contextmanager
    def writing(self, *, on_wait: WaitNotice | None = None, timeout_s: float | None = None) -> Iterator[None]:
        """Hold the collection's write lock (re-entrant per thread); the collection is repaired on entry.

        Another writer holding it makes this wait, after telling `on_wait` (default: stderr) whom for.
        """
        depth = getattr(self._writer, "depth", 0)
        if depth:
            self._writer.depth = depth + 1
            try:
                yield
            finally:
                self._writer.depth -= 1
            return
        with collection_lock(self.lock_path, self.collection, on_wait=on_wait, timeout_s=timeout_s):
            self._writer.depth = 1
            try:
                if not self.chroma_url and self._disk_state() != self._disk_mark:
                    # Another process wrote since this client last did: its cached view may be stale.
                    self._reconnect()
                self.repair()
                yield
            finally:
                self._writer.depth = 0
                self._disk_mark = self._disk_state()

    def _disk_state(self) -> tuple[tuple[int, int], ...]:
        """(mtime, size) of the embedded store's files: changes when any process writes to it."""
        if self.chroma_url:
            return ()
        out = []
        for name in ("chroma.sqlite3", "chroma.sqlite3-wal"):
            with contextlib.suppress(OSError):
                stat = (self.data_dir / "chroma" / name).stat()
                out.append((stat.st_mtime_ns, stat.st_size))
        return tuple(out)

    def repair(self) -> dict[str, Any]:
        """Make the manifest claim only what the store holds, and delete chunks no record names.

        A record whose live generation does not have exactly the chunks it counts is dropped, so the
        next ingest re-adds that document (its hash is gone). Leftover chunks (a crashed or superseded
        write) are deleted; on a Chroma server only once they are older than SERVER_LEFTOVER_GRACE_S,
        since another machine's writer may be about to flip to them. Call with the write lock held.
        """
        records = {d: m for d, m in self._manifest_records().items() if d != VERSION_ID}
        got = self._chunks.get(include=["metadatas"])
        counts: dict[tuple[str, str], int] = {}
        rows: list[tuple[str, str, str, float]] = []
        for chunk_id, meta in zip(got["ids"], got["metadatas"] or [], strict=False):
            meta = meta or {}
            key = (str(meta.get("doc_id")), str(meta.get("generation")))
            counts[key] = counts.get(key, 0) + 1
            rows.append((chunk_id, key[0], key[1], float(meta.get("written_at", 0.0) or 0.0)))
        dropped = sorted(
            doc_id
            for doc_id, meta in records.items()
            if counts.get((doc_id, str(meta.get("generation", "")))) != int(meta.get("chunks", -1))
        )
        if dropped:
            self._manifest.delete(ids=dropped)
        live = {d: str(m.get("generation", "")) for d, m in records.items() if d not in dropped}
        oldest = time.time() - SERVER_LEFTOVER_GRACE_S if self.chroma_url else float("inf")
        stale = [row[0] for row in rows if live.get(row[1]) != row[2] and row[3] <= oldest]
        for start in range(0, len(stale), 500):
            self._chunks.delete(ids=stale[start : start + 500])
        if dropped:
            self._bump_version()
        self.last_repair = {"dropped": dropped, "leftovers_deleted": len(stale)}
        self._unreported.extend(dropped)
        return self.last_repair

    def take_repaired(self) -> list[str]:
        """The documents repairs dropped from the manifest since the last call (for an ingest's summary)."""
        out, self._unreported = sorted(set(self._unreported)), []
        return out

    def collect_garbage(self) -> int:
        """Delete chunks of generations the manifest does not name (left by a crash); takes the write lock."""
        with self.writing():
            return int(self.last_repair.get("leftovers_deleted", 0))

    # --- writing ---------------------------------------------------------------------------

    def replace_document(self, doc_id: str, content_hash: str, chunks: list[Chunk]) -> None:
        """Write the new generation, read it back, flip the manifest, delete the old generation, verify.

        The generation follows the content, so a retry (or a second writer of the same content) rewrites
        the same rows. If another writer (on a Chroma server) deleted this generation before or after the
        flip, it is written again, up to WRITE_ATTEMPTS times.
        """
        generation = generation_for(doc_id, content_hash)
        with self.writing():
            vectors = self.embedder.embed([c["text"] for c in chunks]) if chunks else None
            for _attempt in range(WRITE_ATTEMPTS):
                self._write_generation(chunks, generation, vectors)
                self._manifest.upsert(
                    ids=[doc_id],
                    documents=[doc_id],
                    metadatas=[{"hash": content_hash, "generation": generation, "chunks": len(chunks)}],
                    embeddings=[[0.0]],
                )
                self._delete_generations(doc_id, keep=generation)
                self._bump_version()
                if self._verified(doc_id, generation, len(chunks)):
                    return
        raise StoreError(
            f"collection {self.collection!r}: document {doc_id!r} could not be written completely after "
            f"{WRITE_ATTEMPTS} attempts (another writer kept replacing it); run the ingest again"
        )

    def _write_generation(self, chunks: list[Chunk], generation: str, vectors: Any) -> None:
        if not chunks:
            return
        written_at = time.time()
        metadatas = [self._chunk_metadata(c, generation, written_at) for c in chunks]
        ids = [f"{c['chunk_id']}:{generation}" for c in chunks]
        for start in range(0, len(ids), 500):
            end = start + 500
            self._chunks.add(
                ids=ids[start:end],
                documents=[c["text"] for c in chunks[start:end]],
                metadatas=metadatas[start:end],
                embeddings=vectors[start:end].tolist(),
            )
        found = set(self._chunks.get(ids=ids, include=[])["ids"])
        if len(found) != len(ids):
            raise StoreError(
                f"collection {self.collection!r}: Chroma kept {len(found)} of {len(ids)} chunks of "
                f"{chunks[0]['doc_id']!r}; nothing was flipped, run the ingest again"
            )

    def _verified(self, doc_id: str, generation: str, expected: int) -> bool:
        """After the flip: the manifest names this generation with all its chunks, or another writer's."""
        got = self._manifest.get(ids=[doc_id], include=["metadatas"])
        metas = got.get("metadatas") or []
        named = str((metas[0] or {}).get("generation", "")) if metas else ""
        if named and named != generation:
            return True  # superseded by a later writer of this document: its write is whole or it retries
        held = self._chunks.get(where={"$and": [{"doc_id": doc_id}, {"generation": generation}]}, include=[])
        return bool(named) and len(held["ids"]) == expected

    def delete_document(self, doc_id: str) -> int:
        with self.writing():
            existing = self._chunks.get(where={"doc_id": doc_id}, include=[])
            # The manifest record goes first: a crash before the chunks are deleted leaves chunks no record
            # names (unseen, collected by the next writer), never a record (and hash) naming deleted chunks.
            self._manifest.delete(ids=[doc_id])
            if existing["ids"]:
                self._chunks.delete(ids=existing["ids"])
            self._bump_version()
            return len(existing["ids"])

    def _delete_generations(self, doc_id: str, *, keep: str) -> None:
        stale = self._chunks.get(where={"$and": [{"doc_id": doc_id}, {"generation": {"$ne": keep}}]}, include=[])
        if stale["ids"]:
            self._chunks.delete(ids=stale["ids"])

    @staticmethod
    def _chunk_metadata(chunk: Chunk, generation: str, written_at: float = 0.0) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "doc_id": chunk["doc_id"],
            "chunk_id": chunk["chunk_id"],
            "title": chunk["title"],
            "section": chunk["section"],
            "url": chunk["url"],
            "position": chunk["position"],
            "generation": generation,
            "written_at": written_at,
            "metadata_json": json.dumps(chunk["metadata"], sort_keys=True),
        }
        for key, value in chunk["metadata"].items():
            meta[META_PREFIX + key] = value if isinstance(value, (int, float, bool)) else str(value)
        return meta

    # --- reading ---------------------------------------------------------------------------

    def _bind(self, client: Any) -> None:
        """The client and the two collections every read and write goes through."""
        self._client = client
        self._chunks = client.get_collection(
            self.collection, embedding_function=chroma_embedding_function(self.embedder.name)
        )
        self._manifest = client.get_or_create_collection(self.collection + MANIFEST_SUFFIX)

    def _reconnect(self) -> None:
        """A fresh embedded client: the cached one does not follow another process's writes."""
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient.clear_system_cache()
        self._bind(_client(self.data_dir, self.chroma_url))

    def _read_live(self) -> tuple[dict[str, str], dict[str, Any]]:
        """The manifest's live generations and every stored chunk row."""
        live = {d: str(m.get("generation", "")) for d, m in self._manifest_records().items() if d != VERSION_ID}
        return live, self._chunks.get(include=["metadatas", "documents", "embeddings"])

    def _load(self) -> _Snapshot:
        """The in-memory snapshot of live chunks, reloaded when another writer changed the collection."""
        version = self._version()
        with self._lock:
            if self._snapshot is not None and self._snapshot.version == version:
                return self._snapshot
            try:
                live, got = self._read_live()
            except Exception:
                if self.chroma_url or self._snapshot is None:
                    raise
                # Another process (e.g. `reground ingest` next to a running server) rewrote the embedded store.
                self._reconnect()
                version = self._version()
                live, got = self._read_live()
            chunks: list[Chunk] = []
            rows: list[Any] = []
            for meta, text, vector in zip(
                got["metadatas"] or [],
                got["documents"] or [],
                got["embeddings"] if got["embeddings"] is not None else [],
                strict=False,
            ):
                meta = meta or {}
                if live.get(str(meta.get("doc_id"))) != str(meta.get("generation")):
                    continue
                chunks.append(
                    Chunk(
                        chunk_id=str(meta["chunk_id"]),
                        doc_id=str(meta["doc_id"]),
                        title=str(meta.get("title", "")),
                        section=str(meta.get("section", "")),
                        url=str(meta.get("url", "")),
                        position=int(meta.get("position", 0)),
                        text=str(text),
                        metadata=json.loads(str(meta.get("metadata_json", "{}"))),
                    )
                )
                rows.append(vector)
            order = sorted(range(len(chunks)), key=lambda i: (chunks[i]["doc_id"], chunks[i]["position"]))
            chunks = [chunks[i] for i in order]
            vectors = (
                np.asarray([rows[i] for i in order], dtype=np.float32).reshape(len(chunks), -1)
                if chunks
                else np.zeros((0, self.embedder.dimension), dtype=np.float32)  # an empty (or emptied) collection
            )
            self._snapshot = _Snapshot(version, chunks, vectors)
            return self._snapshot

    def count(self) -> int:
        return len(self._load().chunks)

    def metadata_fields(self) -> list[str]:
        """The metadata fields some document of the collection has: what a `where` may name."""
        return sorted(self._load().fields)

    def check_filter(self, where: Where | None) -> dict[str, list[str]]:
        """The normalised scope, or MetadataFilterError (shape, operator) / UnknownMetadataFieldError.

        Cheap (no model, no search): call it before a run so a bad filter fails before any LLM call.
        """
        return self._scope(self._load(), where)

    def _scope(self, snapshot: _Snapshot, where: Where | None) -> dict[str, list[str]]:
        scope = normalize_where(where)
        unknown = sorted(set(scope) - snapshot.fields)
        if unknown and snapshot.chunks:
            known = ", ".join(sorted(snapshot.fields)) or "none"
            raise UnknownMetadataFieldError(
                f"metadata filter names {', '.join(map(repr, unknown))}, which no document in collection "
                f"{self.collection!r} has (known fields: {known}); fix the filter or ingest documents with that field"
            )
        return scope

    def all_chunks(self, where: Where | None = None) -> list[Chunk]:
        snapshot = self._load()
        scope = self._scope(snapshot, where)
        return [c for c in snapshot.chunks if matches(c["metadata"], scope)]

    def chunks_for_documents(self, doc_ids: Sequence[str], where: Where | None = None) -> list[Chunk]:
        snapshot = self._load()
        scope = self._scope(snapshot, where)
        out: list[Chunk] = []
        for doc_id in dict.fromkeys(doc_ids):
            out.extend(
                c for i in snapshot.by_doc.get(doc_id, []) if matches((c := snapshot.chunks[i])["metadata"], scope)
            )
        return out

    def embeddings_for(self, chunk_ids: Sequence[str]) -> np.ndarray:
        snapshot = self._load()
        missing = [c for c in chunk_ids if c not in snapshot.index]
        if missing:
            raise StoreError(f"unknown chunk ids in collection {self.collection!r}: {missing[:3]}")
        if not chunk_ids:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return snapshot.vectors[[snapshot.index[c] for c in chunk_ids]]

    def dense_search(
        self, query_embedding: np.ndarray, k: int, where: Where | None = None
    ) -> list[tuple[Chunk, float]]:
        """Exact cosine similarity over the snapshot's (normalised) vectors, masked by the scope.

        The snapshot already holds every live vector, so a matrix product is both exact and faster than a
        round trip through Chroma's approximate index (0.2 ms vs 30 ms for 2,000 chunks on 2 cores).
        """
        snapshot = self._load()
        scope = self._scope(snapshot, where)
        if not snapshot.chunks or k <= 0:
            return []
        query = np.asarray(query_embedding, dtype=np.float32).reshape(-1)
        scores = snapshot.vectors @ query / max(float(np.linalg.norm(query)), 1e-12)
        allowed = snapshot.allowed(scope)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        k = min(k, int(np.isfinite(scores).sum()))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(snapshot.chunks[i], float(scores[i])) for i in top]

    def lexical_search(self, query: str, k: int, where: Where | None = None) -> list[tuple[Chunk, float]]:
        """BM25 over title + section + text of every live chunk, masked by the scope."""
        snapshot = self._load()
        scope = self._scope(snapshot, where)
        tokens = lexical_tokens(query)
        bm25 = snapshot.bm25()
        if not tokens or bm25 is None or k <= 0:
            return []
        scores = np.asarray(bm25.get_scores(tokens), dtype=np.float32)
        allowed = snapshot.allowed(scope)
        if allowed is not None:
            scores = np.where(allowed, scores, -1.0)
        top = np.argsort(-scores)[:k]
        return [(snapshot.chunks[i], float(scores[i])) for i in top if scores[i] > 0]
