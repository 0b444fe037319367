"""Ingest documents into a store: idempotent by content hash, crash-safe per document, with a progress bar.

An ingest holds the collection's write lock from reading the manifest to its last write, so concurrent
ingests (processes, threads, server runs) take turns instead of deciding from a manifest another one is
about to change.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import queue
import sys
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reground.tools.signals.injection import flag_metadata
from reground.tools.stores.locking import WaitNotice
from reground.tools.stores.store import chunk_vectors
from reground.tools.stores.vector_store import EmbeddedDocument, VectorStore
from reground.tools.text.chunking import DEFAULT_MAX_TOKENS, chunk_document
from reground.tools.text.loaders import MAX_FILE_BYTES, Document, LoadError, load_paths
from reground.tools.text.terminal import strip_terminal_controls
from reground.tools.tuning.stores import INGEST
from reground.tools.types import Chunk
from tqdm import tqdm


@dataclass
class IngestSummary:
    """What one ingest did to the collection, for the CLI line and the ingestion graph's result."""

    documents: int = 0  # documents now in the store from this ingest: the unchanged and the (re)written ones
    chunks_added: int = 0
    unchanged: int = 0  # same content hash as stored: not rewritten
    replaced: int = 0  # stored before with other content: rewritten
    deleted: int = 0  # removed by doc_id (`reground ingest --delete`, the ingestion graph's `delete`)
    skipped: int = 0  # a repeated doc_id or no text to index (each also in errors)
    errors: list[LoadError] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)  # manifest records dropped: their chunks were missing
    # doc_id -> control characters and terminal escape sequences removed from it (tools/text/terminal.py)
    controls_stripped: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        text = (
            f"{self.documents} documents ({self.replaced} replaced, {self.unchanged} unchanged), "
            f"{self.chunks_added} chunks added, {self.deleted} deleted, {self.skipped} skipped, "
            f"{len(self.errors)} errors"
        )
        if self.repaired:
            text += f", {len(self.repaired)} documents with missing chunks re-added"
        if self.controls_stripped:
            text += (
                f", {sum(self.controls_stripped.values())} control characters or escape sequences stripped from "
                f"{len(self.controls_stripped)} documents"
            )
        return text

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["errors"] = [str(e) for e in self.errors]
        return data


# Bumped when what a chunk stores changes, so the next ingest rewrites documents written before
# (2: sentence vectors kept per chunk; 3: paragraphs keep their line breaks, packed paragraphs a blank line;
# 4: the same, with format 2's chunk boundaries; 5: the sentence split keeps a list item whole, its marker
# included, and starts a sentence at each item's line, so the kept sentence vectors follow it).
CHUNK_FORMAT = 8  # fact: the stored chunk format's version


def content_hash(doc: Document, max_tokens: int) -> str:
    """Changes when anything a chunk carries changes (text, title, url, metadata, chunk size, stored format)."""
    payload = json.dumps([doc.title, doc.text, doc.url, doc.metadata, max_tokens, CHUNK_FORMAT], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def ingest_documents(
    documents: Sequence[Document],
    store: VectorStore,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    progress: bool = True,
    summary: IngestSummary | None = None,
    on_wait: WaitNotice | None = None,
) -> IngestSummary:
    """Index the documents under the collection's write lock (waiting for another writer if there is one)."""
    summary = summary or IngestSummary()
    documents = [terminal_clean(doc, summary) for doc in documents]
    with store.writing(on_wait=on_wait):
        summary.repaired = sorted(set(summary.repaired) | set(store.take_repaired()))
        return _ingest_locked(documents, store, max_tokens=max_tokens, progress=progress, summary=summary)


def terminal_clean(doc: Document, summary: IngestSummary) -> Document:
    """The document without control characters or escape sequences in any field (they would reach a reader's
    terminal: a cleared screen, a new window title, a disguised link); what was removed is counted per document."""
    removed = 0

    def clean(value: str) -> str:
        nonlocal removed
        text, count = strip_terminal_controls(value)
        removed += count
        return text

    metadata = {key: clean(value) if isinstance(value, str) else value for key, value in doc.metadata.items()}
    cleaned = Document(
        doc_id=clean(doc.doc_id),
        title=clean(doc.title),
        text=clean(doc.text),
        url=clean(doc.url),
        metadata=metadata,
        source=doc.source,
    )
    if removed:
        summary.controls_stripped[cleaned.doc_id] = summary.controls_stripped.get(cleaned.doc_id, 0) + removed
    return cleaned


def _ingest_locked(
    documents: Sequence[Document], store: VectorStore, *, max_tokens: int, progress: bool, summary: IngestSummary
) -> IngestSummary:
    known = store.document_hashes()
    seen: set[str] = set()
    todo: list[tuple[Document, str]] = []
    for doc in documents:
        if doc.doc_id in seen:
            summary.errors.append(
                LoadError(doc.source or doc.doc_id, f"duplicate doc_id {doc.doc_id!r}; kept the first")
            )
            summary.skipped += 1
            continue
        seen.add(doc.doc_id)
        digest = content_hash(doc, max_tokens)
        if known.get(doc.doc_id) == digest:
            summary.unchanged += 1
            summary.documents += 1
            continue
        todo.append((doc, digest))
    write_embedded = getattr(store, "write_embedded", None)
    with tqdm(total=len(todo), desc=f"ingest → {store.collection}", unit="doc", disable=not progress) as bar:
        if callable(write_embedded):
            # Chunking, embedding and writing overlap: two worker threads chunk and embed the next documents
            # (onnxruntime releases the GIL) while this thread writes, under its write lock, the one before.
            stream = pipeline(todo, [_chunker(max_tokens), _embedder(store)], depth=INGEST.pipeline_depth)
            try:
                for (doc, digest), chunks, embedded in stream:
                    if chunks:
                        write_embedded(EmbeddedDocument(doc.doc_id, digest, chunks, *embedded))
                    _count(summary, doc, chunks, replaced=doc.doc_id in known)
                    bar.update()
            finally:
                stream.close()
        else:
            for doc, digest in todo:
                chunks = flagged_chunks(doc, max_tokens)
                if chunks:
                    store.replace_document(doc.doc_id, digest, chunks)
                _count(summary, doc, chunks, replaced=doc.doc_id in known)
                bar.update()
    return summary


def flagged_chunks(doc: Document, max_tokens: int) -> list[Chunk]:
    """The document's chunks, each one's metadata carrying its flagged sentences (kept, never removed: see
    signals/injection.py), so a reader is warned at every read without re-running the rules."""
    chunks = chunk_document(doc, max_tokens=max_tokens)
    for chunk in chunks:
        chunk["metadata"] = flag_metadata(chunk["metadata"], chunk["text"], chunk["url"])
    return chunks


def _count(summary: IngestSummary, doc: Document, chunks: list[Chunk], *, replaced: bool) -> None:
    if not chunks:
        summary.errors.append(LoadError(doc.source or doc.doc_id, "no text to index"))
        summary.skipped += 1
        return
    summary.documents += 1
    summary.chunks_added += len(chunks)
    summary.replaced += int(replaced)


def _chunker(max_tokens: int) -> Callable[[Any], Any]:
    def stage(item: tuple[Document, str]) -> tuple[tuple[Document, str], list[Chunk]]:
        return item, flagged_chunks(item[0], max_tokens)

    return stage


def _embedder(store: VectorStore) -> Callable[[Any], Any]:
    def stage(item: tuple[tuple[Document, str], list[Chunk]]) -> Any:
        key, chunks = item
        return key, chunks, chunk_vectors(store.embedder, chunks) if chunks else None

    return stage


_DONE = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def pipeline(items: Sequence[Any], stages: Sequence[Callable[[Any], Any]], *, depth: int) -> Generator[Any, None, None]:
    """Yield `stages[-1](...stages[0](item))` for each item, in order, each stage in its own thread.

    A stage's exception is raised here; closing the generator early (the consumer failed) stops the workers.
    """
    stop = threading.Event()
    queues: list[queue.Queue[Any]] = [queue.Queue()] + [queue.Queue(maxsize=depth) for _ in stages]
    for item in items:
        queues[0].put(item)
    queues[0].put(_DONE)

    def put(target: queue.Queue[Any], value: Any) -> bool:
        while not stop.is_set():
            try:
                target.put(value, timeout=INGEST.queue_poll_s)
                return True
            except queue.Full:
                continue
        return False

    def work(stage: Callable[[Any], Any], source: queue.Queue[Any], sink: queue.Queue[Any]) -> None:
        while not stop.is_set():
            value = source.get()
            if value is _DONE or isinstance(value, _Failed):
                put(sink, value)
                return
            try:
                result = stage(value)
            except BaseException as error:  # handed to the consumer, which raises it
                put(sink, _Failed(error))
                return
            if not put(sink, result):
                return

    threads = [
        threading.Thread(target=work, args=(stage, queues[i], queues[i + 1]), name=f"ingest-stage-{i}", daemon=True)
        for i, stage in enumerate(stages)
    ]
    for thread in threads:
        thread.start()
    try:
        while True:
            value = queues[-1].get()
            if value is _DONE:
                return
            if isinstance(value, _Failed):
                raise value.error
            yield value
    finally:
        stop.set()
        for source in queues[:-1]:  # unblock workers waiting on an empty source
            with contextlib.suppress(queue.Full):
                source.put_nowait(_DONE)
        for thread in threads:
            thread.join(timeout=INGEST.join_timeout_s)


def _stderr_line(message: str) -> None:
    print(f"  \u00b7 {message}", file=sys.stderr, flush=True)


def ingest(
    paths: Sequence[str | Path],
    store: VectorStore,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    delete: Sequence[str] = (),
    progress: bool = True,
    on_wait: WaitNotice | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> IngestSummary:
    """Load every path, (re)index changed documents, delete the named ones; bad files are reported, not fatal.

    Files are read before the write lock is taken; deletes and writes happen under one hold of it. A document file
    over `max_file_bytes` is an error of its own; with `progress`, reading a large file says so on stderr.
    """
    summary = IngestSummary()
    tell = _stderr_line if progress else None
    documents, errors = load_paths(paths, max_file_bytes=max_file_bytes, on_progress=tell) if paths else ([], [])
    with store.writing(on_wait=on_wait):
        summary.repaired = store.take_repaired()
        for doc_id in delete:
            removed = store.delete_document(doc_id)
            summary.deleted += 1 if removed else 0
            if not removed:
                summary.errors.append(LoadError(doc_id, f"no document {doc_id!r} in collection {store.collection!r}"))
        summary.errors.extend(errors)
        return ingest_documents(documents, store, max_tokens=max_tokens, progress=progress, summary=summary)
