"""The Chroma vector store (embedded or server) behind `tools.stores.vector_store.VectorStore`.

`PassageStore` composes its parts in tools/stores/chroma/: the collection with its manifest, write lock and repair
(`collection`: how a crash or two concurrent writers leave every document fully old or fully new), its writes
(`writes`) and its reads (`reads`). Searching is `tools.stores.search_index.SearchIndex`'s job (`store.index`, which
the read methods below delegate to, so `PassageStore.open(...).dense_search(...)` keeps working).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from reground.tools.adapters.embeddings import DEFAULT_SPEC, Embedder, chroma_embedding_function, load_embedder
from reground.tools.adapters.paths import data_dir as default_data_dir
from reground.tools.stores.chroma.collection import MANIFEST_SUFFIX, VERSION_ID, chroma_client, paged
from reground.tools.stores.chroma.reads import ChromaReads
from reground.tools.stores.chroma.writes import (  # noqa: F401 - re-exported: the names ingest and the evals read
    META_PREFIX,
    SENTENCE_VECTORS_KEY,
    ChromaWrites,
    generation_for,
)
from reground.tools.stores.locking import (
    WaitNotice,
    collection_lock,
    lock_path,
    release,
    store_init_lock,
    try_collection_lock,
)
from reground.tools.stores.search_index import (  # noqa: F401 - re-exported: the store's public names before the split
    BOOKKEEPING_FIELDS,
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
    collection_not_found,
    entered_again,
    pack_sentence_vectors,
    sentence_vectors_bytes,
    sentence_vectors_text,
)
from reground.tools.stores.vectors import (  # noqa: F401 - re-exported
    EmbeddingMismatchError,
    chunk_vectors,
    matching_embedder,
)
from reground.tools.types import Chunk


class PassageStore(ChromaReads, ChromaWrites):
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
        super().__init__(collection, client, embedder, data_dir, chroma_url)
        self.index = SearchIndex(self, index)

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
                    known = sorted(n for n in names if not n.endswith(MANIFEST_SUFFIX))
                    create_it = f"reground ingest PATH --collection {collection}"
                    raise collection_not_found(collection, chroma_url or str(root), known, create_it)
                embedder = embedder or load_embedder(DEFAULT_SPEC)
                client.get_or_create_collection(
                    collection,
                    embedding_function=chroma_embedding_function(embedder.name),
                    metadata={"hnsw:space": "cosine", "embedding": embedder.name},
                )
            else:
                recorded = str((client.get_collection(collection).metadata or {}).get("embedding", "") or "")
                embedder = matching_embedder(collection, recorded, embedder)
            store = cls(collection, client, embedder, root, chroma_url, index)
            if locked:
                store.repair()
        return store

    @staticmethod
    def _open_client(root: Path, chroma_url: str) -> Any:
        try:
            if chroma_url:
                return chroma_client(root, chroma_url)
            # Processes creating the embedded store's database at once would race on its migrations.
            with store_init_lock(root):
                return chroma_client(root, chroma_url)
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
                raise collection_not_found(name, chroma_url or str(root), names)
        out: list[dict[str, Any]] = []
        for collection in [name] if name is not None else names:
            try:
                manifest = client.get_collection(collection + MANIFEST_SUFFIX)
                records = list(paged(manifest, ["metadatas"], lambda page: page["metadatas"]))
            except Exception:  # a collection without a manifest (not written by reground): nothing live
                records = []
            counts = {doc_id: int((meta or {}).get("chunks", 0)) for doc_id, meta in records if doc_id != VERSION_ID}
            row: dict[str, Any] = {"collection": collection, "documents": len(counts), "chunks": sum(counts.values())}
            if name is not None:
                row["document_chunks"] = [{"doc_id": d, "chunks": counts[d]} for d in sorted(counts)]
                fields: set[str] = set()
                rows = paged(client.get_collection(collection), ["metadatas"], lambda page: page["metadatas"])
                for _row, meta in rows:
                    fields.update(json.loads(str((meta or {}).get("metadata_json", "{}"))))
                row["metadata_fields"] = sorted(fields - BOOKKEEPING_FIELDS)
            out.append(row)
        return out

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
