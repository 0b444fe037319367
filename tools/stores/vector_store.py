"""What reground needs from a vector store, and `open_store(spec, collection)` to pick one by a spec string.

A store keeps a collection's chunks with their vectors and one content hash per document; it writes a
document's chunks, deletes a document, lists the hashes and hands over a snapshot of every live chunk.
Searching is not its job: `tools.stores.search_index.SearchIndex` searches any store's snapshot in memory, and ingest
(`tools.stores.ingest`) writes through this interface only. So another vector database is one class with these
methods plus a `register_store` line; nothing in ingest, retrieval or the graph changes.

Specs, like chat model specs:
- `chroma` or `chroma:` — the embedded Chroma store in reground's data dir ($REGROUND_DATA_DIR);
- `chroma:<dir>` — the embedded Chroma store in <dir>;
- `chroma-http://host:port` (or `chroma-https://...`) — a Chroma server (`chroma run`).
"""

from __future__ import annotations

import base64
import contextlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
from reground.tools.errors import DataError, InputError
from reground.tools.tuning.stores import STORE_IO
from reground.tools.types import Chunk

if TYPE_CHECKING:
    from reground.tools.adapters.embeddings import Embedder
    from reground.tools.stores.locking import WaitNotice


class StoreError(DataError):
    """A store problem; the message names the collection and what to do."""


def chunks_not_held(collection: str, doc_ids: Sequence[str]) -> StoreError:
    """`update_metadata` given chunks a document does not hold (it changed since they were read): nothing written."""
    return StoreError(
        f"collection {collection!r}: documents {list(doc_ids)[: STORE_IO.ids_named]} do not hold the chunks given; "
        "nothing was updated, run the ingest again"
    )


class CollectionNotFoundError(StoreError):
    """The collection does not exist; the message lists the ones that do."""


def collection_not_found(
    collection: str, where: str, known: Sequence[str], create: str = ""
) -> CollectionNotFoundError:
    """The error for a collection `where` does not hold: the ones it does, and (given) the command that creates it."""
    message = f"collection {collection!r} does not exist in {where} (known: {', '.join(known) or 'none'})"
    return CollectionNotFoundError(f"{message}; create it with `{create}`" if create else message)


class EmptyCollectionError(StoreError):
    """The collection exists but holds no chunks."""


class UnknownMetadataFieldError(StoreError):
    """A metadata filter names a field no document of the collection has; the message lists the known ones."""


class InvalidCollectionNameError(InputError):
    """A collection name Chroma (or a path) would not accept, e.g. `../../etc`."""


class MetadataFilterError(InputError):
    """A metadata filter of the wrong shape or with an unsupported operator."""


class StoreSpecError(InputError):
    """A store spec that does not parse; the message lists the accepted forms."""


def collection_name_problem(collection: str) -> str | None:
    """Why a collection name is invalid (Chroma's rules, with room for the manifest suffix), or None."""
    shape = r"[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]"
    fits = 3 <= len(collection) <= 200  # fact: Chroma's name length rule
    if fits and re.fullmatch(shape, collection) and ".." not in collection:
        return None
    return (
        f"invalid collection name {collection!r}: 3-200 characters, letters, digits, '.', '_' or '-', "
        "starting and ending with a letter or digit, no '..'"
    )


@contextlib.contextmanager
def entered_again(writer: threading.local) -> Iterator[bool]:
    """A re-entrant write lock's inner entry: True when this thread holds the lock already (its depth is counted
    while inside), False when the caller must take it (and set `writer.depth` to 1 while it holds it)."""
    depth = getattr(writer, "depth", 0)
    if not depth:
        yield False
        return
    writer.depth = depth + 1
    try:
        yield True
    finally:
        writer.depth -= 1


class EmbeddedDocument(NamedTuple):
    """A document's chunks with their vectors already computed: what a pipelined ingest (or a bulk load) hands a
    store's `write_embedded` while the next document is being embedded."""

    doc_id: str
    content_hash: str
    chunks: list[Chunk]
    vectors: np.ndarray
    # Each chunk's packed sentence vectors (`chunk_vectors`), or None.
    sentences: Sequence[bytes | None]


@dataclass(frozen=True)
class Snapshot:
    """Every live chunk of a collection at one version, with its vector (row i of `vectors` is chunk i)."""

    version: str
    chunks: list[Chunk]
    vectors: np.ndarray  # float32, shape (len(chunks), dimension)
    # Per chunk, its sentences' vectors packed by `pack_sentence_vectors` (None: not kept); empty: none kept here
    # (a store with `sentence_vectors_of(row_ids)` hands them over on demand instead).
    sentence_vectors: list[bytes | None] = field(default_factory=list)
    # Per chunk, the store's own id of its row (what `sentence_vectors_of`, `vectors_of`, `ann_search` speak).
    row_ids: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [c["chunk_id"] for c in self.chunks]

    @property
    def texts(self) -> list[str]:
        return [c["text"] for c in self.chunks]

    @property
    def metadatas(self) -> list[dict[str, Any]]:
        return [c["metadata"] for c in self.chunks]


def pack_sentence_vectors(vectors: np.ndarray) -> bytes:
    """Vectors as int8, each row scaled so its largest component is 127 (the scale needs no storing: rows are
    re-normalised when unpacked): a quarter of float32, cosine to the original > 0.9995
    (tests/unit/test_tokens_embeddings.py)."""
    rows = np.asarray(vectors, dtype=np.float32)
    scale = 127.0 / np.clip(np.abs(rows).max(axis=1, keepdims=True), 1e-12, None)  # fact: the int8 range
    return np.clip(np.rint(rows * scale), -127, 127).astype(np.int8).tobytes()  # fact: the int8 range


def unpack_sentence_vectors(packed: bytes, dimension: int) -> np.ndarray:
    """The float32 rows `pack_sentence_vectors` packed (re-normalised); ValueError if the size does not fit."""
    if len(packed) % dimension:
        raise ValueError(f"packed sentence vectors of {len(packed)} bytes are not rows of {dimension}")
    rows = np.frombuffer(packed, dtype=np.int8).reshape(-1, dimension).astype(np.float32)
    return rows / np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)


def sentence_vectors_text(packed: bytes) -> str:
    """How packed sentence vectors travel in a store's string metadata."""
    return base64.b64encode(packed).decode("ascii")


def sentence_vectors_bytes(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


@runtime_checkable
class VectorStore(Protocol):
    """The storage side of a collection: what ingest writes through and what the search index reads.

    Two methods are optional, and both built-in stores have them: `write_embedded(EmbeddedDocument)` (a document
    embedded already, for the pipelined ingest) and `update_metadata({doc_id: chunks})` (documents' live chunks,
    matched by chunk_id, given new metadata in place, their text and vectors kept, the version bumped: how ingest
    refreshes stale screening marks). Without the latter, such a document is rewritten."""

    collection: str

    @property
    def embedder(self) -> Embedder:
        """The embedding model the collection's vectors come from (queries must use the same one)."""
        ...

    def writing(self, *, on_wait: WaitNotice | None = None) -> AbstractContextManager[None]:
        """Hold the collection's write lock (re-entrant per thread) for a batch of writes."""
        ...

    def take_repaired(self) -> list[str]:
        """Documents the store dropped since the last call (their chunks were incomplete); [] if none."""
        ...

    def document_hashes(self) -> dict[str, str]:
        """doc_id → content hash of every live document (what ingest compares to skip unchanged ones)."""
        ...

    def replace_document(self, doc_id: str, content_hash: str, chunks: list[Chunk]) -> None:
        """Make `chunks` the document's only live chunks, atomically for readers; embeds them."""
        ...

    def delete_document(self, doc_id: str) -> int:
        """Remove a document; the number of chunks it had (0: it was not there)."""
        ...

    def version(self) -> str:
        """Changes whenever a write changes what `load_snapshot` returns (cheap: read on every search)."""
        ...

    def load_snapshot(self) -> Snapshot:
        """Every live chunk with its vector."""
        ...


StoreFactory = Callable[..., VectorStore]
_SCHEMES: dict[str, StoreFactory] = {}
ACCEPTED = (
    "'chroma', 'chroma:<dir>', 'chroma-http://host:port', 'chroma-https://host:port', "
    "'postgresql://user@host:port/db', 'pgserver:<dir>' or 'langchain:<module>:<factory>+<base spec>'"
)
# The search engine backend (tools/stores/postgres.py): search runs in PostgreSQL, not in each process.
ENGINE_SCHEMES = ("postgresql", "postgres", "pgserver")


def register_store(scheme: str, factory: StoreFactory) -> None:
    """Make `open_store('<scheme>:<rest>', ...)` call `factory(rest, collection, embedder=, create=, on_wait=)`."""
    _SCHEMES[scheme] = factory


def registered_store(scheme: str) -> StoreFactory | None:
    """The factory `register_store` gave for this scheme, if any."""
    return _SCHEMES.get(scheme)


def store_spec(data_dir: str | Path | None = None, chroma_url: str = "") -> str:
    """The spec of the pre-spec settings: a Chroma server URL, else the embedded store in data_dir."""
    if chroma_url:
        url = chroma_url if "://" in chroma_url else f"http://{chroma_url}"
        return f"chroma-{url}"
    return f"chroma:{data_dir}" if data_dir else "chroma"


def parse_store_spec(spec: str) -> tuple[str, str]:
    """(scheme, rest): `chroma-http://h:p` → ('chroma-http', 'http://h:p'), `chroma:/d` → ('chroma', '/d'),
    `postgresql://u@h/db` → ('postgresql', '//u@h/db')."""
    spec = spec.strip()
    if spec.startswith(("chroma-http://", "chroma-https://")):
        url = spec[len("chroma-") :]
        return f"chroma-{url.split('://', 1)[0]}", url
    scheme, _, rest = spec.partition(":")
    if scheme in ("chroma", "langchain") or scheme in ENGINE_SCHEMES or scheme in _SCHEMES:
        return scheme, rest
    known = ", ".join(repr(f"{s}:...") for s in sorted(_SCHEMES))
    raise StoreSpecError(f"unknown store spec {spec!r}: use {ACCEPTED}" + (f" or {known}" if known else ""))
