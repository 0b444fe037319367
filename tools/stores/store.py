"""The Chroma vector store (embedded or server) behind `tools.stores.vector_store.VectorStore`.

It stores chunks, vectors and a manifest; searching is `tools.stores.search_index.SearchIndex`'s job (`store.index`,
which the read methods below delegate to, so `PassageStore.open(...).dense_search(...)` keeps working).

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
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from reground.tools.adapters.embeddings import (
    DEFAULT_SPEC,
    MINILM_SPEC,
    Embedder,
    chroma_embedding_function,
    embed_passages_with_spans,
    load_embedder,
)
from reground.tools.adapters.paths import data_dir as default_data_dir
from reground.tools.stores.locking import (
    WaitNotice,
    collection_lock,
    lock_path,
    release,
    store_init_lock,
    try_collection_lock,
)
from reground.tools.stores.search_index import (  # noqa: F401 - re-exported: the store's public names before the split
    FILTER_OPERATORS,
    MATCH_ANY,
    IndexSettings,
    SearchIndex,
    Where,
    matches,
    normalize_where,
)
from reground.tools.stores.vector_store import (  # noqa: F401 - re-exported
    CollectionNotFoundError,
    EmbeddedDocument,
    EmptyCollectionError,
    InvalidCollectionNameError,
    MetadataFilterError,
    Snapshot,
    StoreError,
    UnknownMetadataFieldError,
    collection_name_problem,
    entered_again,
    pack_sentence_vectors,
    sentence_vectors_bytes,
    sentence_vectors_text,
)
from reground.tools.text.sentences import sentence_spans
from reground.tools.tuning.stores import STORE_IO
from reground.tools.types import Chunk

META_PREFIX = "m_"
MANIFEST_SUFFIX = ".reground-manifest"
VERSION_ID = "__version__"


SENTENCE_VECTORS_KEY = "sentence_vectors"  # chunk metadata: its sentences' vectors (`pack_sentence_vectors`)


def chunk_vectors(embedder: Embedder, chunks: Sequence[Chunk]) -> tuple[np.ndarray, list[bytes | None]]:
    """The chunks' vectors and, packed per chunk, their sentences' vectors (the sentences evidence ranks, split by
    `text.sentences.sentence_spans`): kept at ingest so a turn does not embed passage sentences again."""
    if not chunks:
        return np.zeros((0, embedder.dimension), dtype=np.float32), []
    texts = [c["text"] for c in chunks]
    spans = [[(start, end) for start, end, _ in sentence_spans(text)] for text in texts]
    vectors, sentences = embed_passages_with_spans(embedder, texts, spans)
    return vectors, [pack_sentence_vectors(rows) if len(rows) else None for rows in sentences]


class EmbeddingMismatchError(StoreError):
    """A collection opened with another embedding model than the one its vectors come from."""


def _paged(collection: Any, include: list[str], field: Any) -> Iterator[tuple[str, Any]]:
    """(id, field value) of every row, read STORE_IO.snapshot_page rows at a time: one read of a whole 200,000-chunk
    collection fails in Chroma ("too many SQL variables")."""
    offset = 0
    while True:
        page = collection.get(include=include, limit=STORE_IO.snapshot_page, offset=offset)
        yield from zip(page["ids"], field(page) or [], strict=False)
        if len(page["ids"]) < STORE_IO.snapshot_page:
            return
        offset += STORE_IO.snapshot_page


def _chroma_error(exc: BaseException) -> bool:
    """A Chroma error raised by a read the server could not finish (e.g. rows deleted under it), not a transport
    failure."""
    try:
        from chromadb.errors import ChromaError
    except ImportError:  # pragma: no cover - chromadb is a dependency
        return False
    return isinstance(exc, ChromaError)


def generation_for(doc_id: str, content_hash: str) -> str:
    """Deterministic per document content: two writers of the same content write the same rows."""
    return hashlib.sha256(f"{doc_id}\0{content_hash}".encode()).hexdigest()[:12]  # fact: the generation id format


def _client(data_dir: Path, chroma_url: str) -> Any:
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    if chroma_url:
        parsed = urlparse(chroma_url if "://" in chroma_url else f"http://{chroma_url}")
        return chromadb.HttpClient(
            host=parsed.hostname or "127.0.0.1",
            port=parsed.port or 8000,  # fact: Chroma's default port
            ssl=parsed.scheme == "https",
            settings=settings,
        )
    return chromadb.PersistentClient(path=str(data_dir / "chroma"), settings=settings)


class PassageStore:
    """A Chroma collection of chunks (a `VectorStore`), with its search index as `index`."""

    def __init__(
        self,
        collection: str,
        client: Any,
        embedder: Embedder,
        data_dir: Path,
        chroma_url: str,
        index: IndexSettings | None = None,
    ) -> None:
        self.collection = collection
        self.embedder = embedder
        self.data_dir = data_dir
        self.chroma_url = chroma_url
        self._bind(client)
        self.index = SearchIndex(self, index)
        self._writer = threading.local()  # how deep this thread is in `writing()` (the lock is re-entrant)
        self._disk_mark = self._disk_state()
        self.last_repair: dict[str, Any] = {}
        self._unreported: list[str] = []  # documents repair dropped that no ingest summary has named yet
        self._version_seen: tuple[tuple[tuple[int, int], ...], str] | None = None  # (disk state, version read)
        self.cache_version = True  # False: ask Chroma on every search (what `bench overhead` compares against)

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
        index: IndexSettings | None = None,
    ) -> PassageStore:
        """Open (or, with `create`, create) a collection; repairs it if no writer is busy with it.

        With `create` (what writers pass) this waits for another writer's lock, telling `on_wait`. `index`: how
        its search index runs dense search (exact in memory, Chroma's HNSW, or by size; `IndexSettings`).
        """
        problem = collection_name_problem(collection)
        if problem:
            raise InvalidCollectionNameError(problem)
        root = default_data_dir(data_dir)
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
                embedder = embedder or load_embedder(DEFAULT_SPEC)
                client.get_or_create_collection(
                    collection,
                    embedding_function=chroma_embedding_function(embedder.name),
                    metadata={"hnsw:space": "cosine", "embedding": embedder.name},
                )
            else:
                embedder = cls._matching_embedder(client, collection, embedder)
            store = cls(collection, client, embedder, root, chroma_url, index)
            if locked:
                store.repair()
        return store

    @staticmethod
    def _matching_embedder(client: Any, collection: str, embedder: Embedder | None) -> Embedder:
        """The embedder of an existing collection: the one it was written with (recorded in its metadata) when
        none is given; a given one of another model is refused, since its vectors would not be comparable."""
        recorded = str((client.get_collection(collection).metadata or {}).get("embedding", "") or "")
        if embedder is None:
            return load_embedder(recorded or MINILM_SPEC)  # collections without a record predate the choice
        if recorded and recorded != embedder.name:
            raise EmbeddingMismatchError(
                f"collection {collection!r} was embedded with {recorded!r}, not {embedder.name!r}: set the "
                f"embedding model to {recorded!r} (Context.embedding_model, --embedding) or ingest into a new "
                "collection"
            )
        return embedder

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
                manifest = client.get_collection(collection + MANIFEST_SUFFIX)
                records = list(_paged(manifest, ["metadatas"], lambda page: page["metadatas"]))
            except Exception:  # a collection without a manifest (not written by reground): nothing live
                records = []
            counts = {doc_id: int((meta or {}).get("chunks", 0)) for doc_id, meta in records if doc_id != VERSION_ID}
            row: dict[str, Any] = {"collection": collection, "documents": len(counts), "chunks": sum(counts.values())}
            if name is not None:
                row["document_chunks"] = [{"doc_id": d, "chunks": counts[d]} for d in sorted(counts)]
                fields: set[str] = set()
                rows = _paged(client.get_collection(collection), ["metadatas"], lambda page: page["metadatas"])
                for _row, meta in rows:
                    fields.update(json.loads(str((meta or {}).get("metadata_json", "{}"))))
                row["metadata_fields"] = sorted(fields)
            out.append(row)
        return out

    # --- the manifest ----------------------------------------------------------------------

    def _manifest_records(self) -> dict[str, dict[str, Any]]:
        return {i: dict(m or {}) for i, m in _paged(self._manifest, ["metadatas"], lambda page: page["metadatas"])}

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
        with entered_again(self._writer) as held_already:
            if held_already:
                yield
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
        write) are deleted; on a Chroma server only once they are older than STORE_IO.server_leftover_grace_s,
        since another machine's writer may be about to flip to them. Call with the write lock held.
        """
        records = {d: m for d, m in self._manifest_records().items() if d != VERSION_ID}
        counts: dict[tuple[str, str], int] = {}
        rows: list[tuple[str, str, str, float]] = []
        for chunk_id, meta in _paged(self._chunks, ["metadatas"], lambda page: page["metadatas"]):
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
        oldest = time.time() - STORE_IO.server_leftover_grace_s if self.chroma_url else float("inf")
        stale = [row[0] for row in rows if live.get(row[1]) != row[2] and row[3] <= oldest]
        for start in range(0, len(stale), STORE_IO.write_batch):
            self._chunks.delete(ids=stale[start : start + STORE_IO.write_batch])
        if dropped:
            self._bump_version()
        self.last_repair = {"dropped": dropped, "leftovers_deleted": len(stale)}
        self._unreported.extend(dropped)
        return self.last_repair

    def take_repaired(self) -> list[str]:
        """The documents repairs dropped from the manifest since the last call (for an ingest's summary)."""
        out, self._unreported = sorted(set(self._unreported)), []
        return out

    # --- writing ---------------------------------------------------------------------------

    def replace_document(self, doc_id: str, content_hash: str, chunks: list[Chunk]) -> None:
        """Write the new generation, read it back, flip the manifest, delete the old generation, verify.

        The generation follows the content, so a retry (or a second writer of the same content) rewrites
        the same rows. If another writer (on a Chroma server) deleted this generation before or after the
        flip, it is written again, up to STORE_IO.write_attempts times.
        """
        with self.writing():
            self.write_embedded(EmbeddedDocument(doc_id, content_hash, chunks, *chunk_vectors(self.embedder, chunks)))

    def write_embedded(self, document: EmbeddedDocument) -> None:
        """`replace_document` with the chunks already embedded: same write protocol, under the write lock."""
        doc_id, content_hash, chunks, vectors, sentences = document
        generation = generation_for(doc_id, content_hash)
        with self.writing():
            for _attempt in range(STORE_IO.write_attempts):
                self._write_generation(chunks, generation, vectors, sentences)
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
            f"{STORE_IO.write_attempts} attempts (another writer kept replacing it); run the ingest again"
        )

    def _write_generation(
        self, chunks: list[Chunk], generation: str, vectors: Any, sentences: Sequence[bytes | None] = ()
    ) -> None:
        if not chunks:
            return
        written_at = time.time()
        metadatas = [self._chunk_metadata(c, generation, written_at) for c in chunks]
        for meta, packed in zip(metadatas, sentences, strict=False):
            if packed:
                meta[SENTENCE_VECTORS_KEY] = sentence_vectors_text(packed)
        ids = [f"{c['chunk_id']}:{generation}" for c in chunks]
        for start in range(0, len(ids), STORE_IO.write_batch):
            end = start + STORE_IO.write_batch
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

    def _read_live(self, *, vectors: bool = True) -> tuple[dict[str, tuple[str, int]], list[dict[str, Any]]]:
        """The manifest's live generation and chunk count per document, and every stored chunk row, read in pages
        (bounded peak memory)."""
        live = {
            d: (str(m.get("generation", "")), int(m.get("chunks", 0) or 0))
            for d, m in self._manifest_records().items()
            if d != VERSION_ID
        }
        include = ["metadatas", "documents", *(["embeddings"] if vectors else [])]
        pages: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = self._chunks.get(include=include, limit=STORE_IO.snapshot_page, offset=offset)
            pages.append(page)
            if len(page["ids"]) < STORE_IO.snapshot_page:
                return live, pages
            offset += STORE_IO.snapshot_page

    def version(self) -> str:
        """The manifest's version record: bumped by every write, so readers know to reload.

        Every search asks for it; reading it is a Chroma query (1-10 ms, 11% of a turn's graph overhead). The
        embedded store remembers it with the (mtime, size) of its database files, which any writing process
        changes, and reads it again only when they changed (a stat, microseconds). A server is always asked.
        """
        if self.chroma_url or not self.cache_version:
            return self._version()
        state = self._disk_state()
        cached = self._version_seen
        if state and cached is not None and cached[0] == state:
            return cached[1]
        version = self._version()
        self._version_seen = (state, version)
        return version

    def load_snapshot(self, *, vectors: bool = True) -> Snapshot:
        """Every live chunk (the manifest's generation of each document) with its vector (`vectors=False`: an
        empty matrix, for an index that searches vectors in Chroma's own HNSW index) and its row id.

        Chroma has no read transaction, so a writer replacing documents meanwhile can move the rows under the
        pages being read (Chroma then fails with "Error finding id") or leave a document's old generation named
        by the manifest but already deleted. A read is kept only when it is whole (every document the manifest
        names has all the chunks of that generation: each document is read at one version, old or new); otherwise
        it is read again, up to STORE_IO.snapshot_attempts times with a short back-off (a writer flips one document in
        milliseconds). The snapshot carries the version read before it, so a write that landed during the read
        makes the next search reload. A shortfall that persists at one version is damage, not a writer (the next
        writer's repair drops those records): that read is kept.
        """
        failure: Exception | None = None
        steady: Snapshot | None = None
        for attempt in range(STORE_IO.snapshot_attempts):
            if attempt:
                time.sleep(min(STORE_IO.snapshot_backoff_s * 2 ** (attempt - 1), 1.0))
            try:
                version = self._version()
                live, pages = self._read_live(vectors=vectors)
                snapshot, whole = self._snapshot(version, live, pages, vectors=vectors)
                if whole:
                    return snapshot
                moved = self._version() != version
                steady = None if moved or (steady is not None and steady.version != version) else snapshot
                failure = None
            except Exception as exc:
                if self.chroma_url and not _chroma_error(exc):
                    raise  # a server that is down or refuses: not a moving snapshot
                failure = exc
                if not self.chroma_url:
                    # Another process (e.g. `reground ingest` next to a running server) rewrote the embedded
                    # store: a fresh client sees its writes.
                    self._reconnect()
        if steady is not None and failure is None:
            return steady
        reason = f" (last: {type(failure).__name__}: {failure})" if failure else ""
        raise StoreError(
            f"collection {self.collection!r} changed during each of {STORE_IO.snapshot_attempts} reads (a writer is "
            "replacing "
            f"documents){reason}; ask again when the ingest is done"
        ) from failure

    def _snapshot(
        self, version: str, live: Mapping[str, tuple[str, int]], pages: Sequence[Mapping[str, Any]], *, vectors: bool
    ) -> tuple[Snapshot, bool]:
        """The live rows of the pages as a snapshot, and whether it is whole: False when a live document lacks some
        of its chunks (a writer deleted its generation between the manifest read and the chunk read)."""
        chunks: list[Chunk] = []
        rows: list[Any] = []
        row_ids: list[str] = []
        found: dict[str, int] = {}
        for page in pages:
            embeddings = page.get("embeddings")
            for n, (row_id, meta, text) in enumerate(
                zip(page["ids"], page["metadatas"] or [], page["documents"] or [], strict=False)
            ):
                meta = meta or {}
                doc_id = str(meta.get("doc_id"))
                if live.get(doc_id, ("", 0))[0] != str(meta.get("generation")):
                    continue
                found[doc_id] = found.get(doc_id, 0) + 1
                chunks.append(
                    Chunk(
                        chunk_id=str(meta["chunk_id"]),
                        doc_id=doc_id,
                        title=str(meta.get("title", "")),
                        section=str(meta.get("section", "")),
                        url=str(meta.get("url", "")),
                        position=int(meta.get("position", 0)),
                        text=str(text),
                        metadata=json.loads(str(meta.get("metadata_json", "{}"))),
                    )
                )
                row_ids.append(str(row_id))
                if vectors and embeddings is not None:
                    rows.append(embeddings[n])
        whole = all(found.get(doc_id, 0) == count for doc_id, (_generation, count) in live.items())
        matrix = (
            np.asarray(rows, dtype=np.float32).reshape(len(chunks), -1)
            if rows
            else np.zeros((0, self.embedder.dimension), dtype=np.float32)  # empty, or vectors not loaded
        )
        return Snapshot(version, chunks, matrix, row_ids=row_ids), whole

    def sentence_vectors_of(self, row_ids: Sequence[str]) -> list[bytes | None]:
        """The packed sentence vectors of stored rows (read on demand: a turn needs those of a few passages, and
        keeping every chunk's in memory would cost more than its vectors)."""
        if not row_ids:
            return []
        got = self._chunks.get(ids=list(row_ids), include=["metadatas"])
        found = {
            row_id: (meta or {}).get(SENTENCE_VECTORS_KEY)
            for row_id, meta in zip(got["ids"], got["metadatas"] or [], strict=False)
        }
        return [
            sentence_vectors_bytes(packed) if isinstance(packed := found.get(r), str) and packed else None
            for r in row_ids
        ]

    def vectors_of(self, row_ids: Sequence[str]) -> np.ndarray:
        """Stored vectors of rows, in order (what an index without vectors in memory reads for a few chunks)."""
        if not row_ids:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        got = self._chunks.get(ids=list(row_ids), include=["embeddings"])
        by_id = dict(zip(got["ids"], got["embeddings"] if got["embeddings"] is not None else [], strict=False))
        missing = [r for r in row_ids if r not in by_id]
        if missing:
            shown = missing[: STORE_IO.ids_named]
            raise StoreError(f"collection {self.collection!r}: rows {shown} are gone; retry the search")
        return np.asarray([by_id[r] for r in row_ids], dtype=np.float32)

    def ann_search(self, query: np.ndarray, n: int) -> list[tuple[str, float]]:
        """Chroma's own HNSW index: the `n` nearest stored rows as (row id, cosine similarity), approximate.
        Rows of a generation the manifest does not name yet (a writer mid-flip) may be among them: callers keep
        only the rows of their snapshot."""
        got = self._chunks.query(
            query_embeddings=[np.asarray(query, dtype=np.float32).tolist()], n_results=n, include=["distances"]
        )
        return [(str(i), 1.0 - float(d)) for i, d in zip(got["ids"][0], got["distances"][0], strict=True)]

    # --- reads: the search index's (kept here so a store opened by name can be searched directly) ---

    def count(self) -> int:
        return self.index.count()

    def metadata_fields(self) -> list[str]:
        return self.index.metadata_fields()

    def check_filter(self, where: Where | None) -> dict[str, list[str]]:
        return self.index.check_filter(where)

    def all_chunks(self, where: Where | None = None) -> list[Chunk]:
        return self.index.all_chunks(where)

    def scope_miss(self, where: Where) -> str | None:
        return self.index.scope_miss(where)

    def chunks_for_documents(self, doc_ids: Sequence[str], where: Where | None = None) -> list[Chunk]:
        return self.index.chunks_for_documents(doc_ids, where)

    def embeddings_for(self, chunk_ids: Sequence[str]) -> np.ndarray:
        return self.index.embeddings_for(chunk_ids)

    def sentence_vectors(self, passages: Sequence[Mapping[str, Any]]) -> list[np.ndarray | None]:
        return self.index.sentence_vectors(passages)

    def dense_search(
        self, query_embedding: np.ndarray, k: int, where: Where | None = None
    ) -> list[tuple[Chunk, float]]:
        return self.index.dense_search(query_embedding, k, where)

    def lexical_search(self, query: str, k: int, where: Where | None = None) -> list[tuple[Chunk, float]]:
        return self.index.lexical_search(query, k, where)
