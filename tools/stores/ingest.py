"""Ingest documents into a store: idempotent by content hash, crash-safe per document, with a progress bar.

An ingest holds the collection's write lock from reading the manifest to its last write, so concurrent
ingests (processes, threads, server runs) take turns instead of deciding from a manifest another one is
about to change.

Before chunking, every document loses what a reader would not see or what would reach a terminal raw (control
characters and escape sequences, invisible formatting characters: tools/text/terminal.py, tools/text/invisible.py)
and each blob glued to its prose is set on a line of its own (tools/text/blobs.py). Each chunk carries its flagged
sentences and title (signals/injection.py) and whether it is keyword stuffing (signals/stuffing.py). A document
that fails anywhere is skipped and named with the reason in `errors`; the others are ingested. The
progress bar counts characters, so it moves within a large file; the collection's trusted domains are learned
from what was written (stores/trusted_domains.py).

An unchanged document is not rewritten. Where its record (stores/trusted_domains.py) does not say it was flagged
with today's injection rules, its chunks' screening marks (signals/injection_screen.py) are checked, a hash per
chunk: where the rules changed since it was written, its chunks are flagged again and only their metadata is updated
in place (`update_metadata`, no chunking or embedding), so read time trusts the stored flags again; a store that
cannot update metadata rewrites the document.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from reground.tools.signals import injection_screen
from reground.tools.signals.contacts import document_domain_of
from reground.tools.signals.injection import FLAGS_KEY, flag_metadata
from reground.tools.signals.injection_screen import SCREEN_KEY, screen_mark
from reground.tools.signals.stuffing import STUFFED_KEY, STUFFED_PAGE_KEY, mark_stuffed_page, stuffing_metadata
from reground.tools.stores.ingest_summary import IngestSummary
from reground.tools.stores.locking import WaitNotice
from reground.tools.stores.pipeline import batches, pipeline
from reground.tools.stores.store import chunk_vectors
from reground.tools.stores.trusted_domains import (
    SCREENED_KEY,
    document_record,
    record_documents,
    screened_with,
    settings_dir,
)
from reground.tools.stores.vector_store import EmbeddedDocument, Snapshot, VectorStore
from reground.tools.text.blobs import separate_blobs
from reground.tools.text.chunking import chunk_document
from reground.tools.text.hidden import strip_hidden_prose
from reground.tools.text.invisible import strip_invisible
from reground.tools.text.loaders import MAX_FILE_BYTES, Document, LoadError, iter_documents, readable_id
from reground.tools.text.terminal import strip_terminal_controls
from reground.tools.tuning.stores import INGEST, STORE_IO
from reground.tools.types import Chunk
from tqdm import tqdm

# Bumped when what a chunk stores changes, so the next ingest rewrites documents written before
# (2: sentence vectors kept per chunk; 3: paragraphs keep their line breaks, packed paragraphs a blank line;
# 4: the same, with format 2's chunk boundaries; 5: the sentence split keeps a list item whole, its marker
# included, and starts a sentence at each item's line, so the kept sentence vectors follow it; 6: invisible
# characters removed and glued blobs set apart before chunking, titles and keyword stuffing flagged; 8: markdown
# parsed by structure, answer units kept whole, diagrams and site markup left out; 9: both; 10: a dotted name in
# code ("exc.detail") and a host off the internet (127.0.0.1, localhost) are no outside contact to flag; 11: each
# chunk carries the mark of the rules that flagged it, so read time uses its stored flags: signals/injection_screen.py;
# 12: mkdocs-material code annotation markers, autorefs anchors `[](){#id}` and admonition class words left out, a
# superfences attribute list `{ .lang }` read as the code's language; MyST directives, roles, targets and comments read
# as the rendered page shows them; MDX import and export statements and mkdocstrings' autodoc lines left out; 13: a
# markdown paragraph over the chunk budget cut at its sentence ends; generator template tags and expressions, table
# of contents markers and thematic breaks left out; autolinks, HTML entities and backslash escapes read as the
# characters they show; a code block holding fences written back with a longer fence).
CHUNK_FORMAT = 13  # fact: the stored chunk format's version


def content_hash(doc: Document, max_tokens: int) -> str:
    """Changes when anything a chunk carries changes (text, title, url, metadata, chunk size, stored format)."""
    payload = json.dumps([doc.title, doc.text, doc.url, doc.metadata, max_tokens, CHUNK_FORMAT], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def ingest_documents(
    documents: Sequence[Document],
    store: VectorStore,
    *,
    max_tokens: int,
    progress: bool = True,
    summary: IngestSummary | None = None,
    on_wait: WaitNotice | None = None,
    settings_root: Path | None = None,
    deleted: Sequence[str] = (),
    seen: set[str] | None = None,
) -> IngestSummary:
    """Index the documents under the collection's write lock (waiting for another writer if there is one), then
    learn the collection's trusted domains from what was written (in `settings_root`, else the store's data dir).
    `seen`: the doc ids an earlier batch of the same ingest indexed (a repeat is skipped, as within a batch)."""
    summary = summary or IngestSummary()
    prepared: list[Document] = []
    for doc in documents:
        try:
            prepared.append(prepare(doc, summary))
        except Exception as exc:  # a document's own content failed: it is named and skipped, the rest go on
            _skip(summary, doc, exc)
    with store.writing(on_wait=on_wait):
        summary.repaired = sorted(set(summary.repaired) | set(store.take_repaired()))
        root = settings_dir(store, settings_root)
        screened = screened_with(root, store.collection)
        records = _ingest_locked(
            prepared, store, max_tokens=max_tokens, progress=progress, summary=summary, screened=screened, seen=seen
        )
        summary.trusted_domains = sorted(record_documents(root, store.collection, records, deleted).domains)
    return summary


def prepare(doc: Document, summary: IngestSummary) -> Document:
    """The document as it is chunked: no control characters or escape sequences in any field (they would reach a
    reader's terminal: a cleared screen, a new window title, a disguised link), no invisible formatting characters
    (bidi controls, tag characters, zero-width ones: they change what a reader sees, or cut a sentence), and each
    blob glued to prose on a line of its own; what was removed or moved is counted per document."""
    controls = invisible = 0

    def clean(value: str) -> str:
        nonlocal controls, invisible
        text, count = strip_terminal_controls(value)
        text, hidden = strip_invisible(text)
        controls, invisible = controls + count, invisible + hidden
        return text

    metadata = {key: clean(value) if isinstance(value, str) else value for key, value in doc.metadata.items()}
    visible, hidden = strip_hidden_prose(doc.text)  # inline HTML no reader sees, in a record or a page alike
    text, blobs = separate_blobs(clean(visible))
    cleaned = Document(
        doc_id=readable_id(clean(doc.doc_id)),
        title=clean(doc.title),
        text=text,
        url=clean(doc.url),
        metadata=metadata,
        source=doc.source,
    )
    for counts, n in ((summary.controls_stripped, controls), (summary.invisible_stripped, invisible)):
        if n:
            counts[cleaned.doc_id] = counts.get(cleaned.doc_id, 0) + n
    if blobs:
        summary.blobs_separated[cleaned.doc_id] = summary.blobs_separated.get(cleaned.doc_id, 0) + blobs
    if doc.hidden_chars + hidden:
        dropped = summary.hidden_dropped.get(cleaned.doc_id, 0) + doc.hidden_chars + hidden
        summary.hidden_dropped[cleaned.doc_id] = dropped
    return cleaned


def _skip(summary: IngestSummary, doc: Document, error: BaseException) -> None:
    """A document that failed: named with its reason in the errors, and skipped."""
    summary.errors.append(LoadError(doc.source or doc.doc_id, f"not ingested: {_reason(error)}"))
    summary.skipped += 1


def _reason(error: BaseException) -> str:
    """An error on one line, with its type: what a summary line names."""
    return f"{type(error).__name__}: {' '.join(str(error).split()) or 'no message'}"


@dataclass
class _Part:
    """Up to INGEST.part_chunks chunks of one document, as they go through the pipeline (`error`: it failed)."""

    doc: Document
    digest: str
    chunks: list[Chunk]
    last: bool
    error: BaseException | None = None
    vectors: Any = None
    sentences: list[bytes | None] = field(default_factory=list)


def _ingest_locked(
    documents: Sequence[Document],
    store: VectorStore,
    *,
    max_tokens: int,
    progress: bool,
    summary: IngestSummary,
    screened: Mapping[str, str] | None = None,
    seen: set[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Write what changed and re-screen unchanged documents with stale marks (`screened`: doc_id -> the rules
    fingerprint its record holds; the others are checked); per document now written (new, replaced or re-screened)
    or checked, what the trusted domains learn of it."""
    known = store.document_hashes()
    seen = set() if seen is None else seen
    same: list[tuple[Document, str]] = []
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
        (same if known.get(doc.doc_id) == digest else todo).append((doc, digest))
    written: dict[str, dict[str, Any]] = {}
    current = injection_screen.rules_fingerprint()
    unsure = [(doc, digest) for doc, digest in same if not current or (screened or {}).get(doc.doc_id) != current]
    rewrites = _rescreen(same, unsure, store, summary, written, progress=progress)  # stale, and no metadata update
    todo += rewrites
    rescreening = {doc.doc_id for doc, _ in rewrites}
    chars = sum(len(doc.text) for doc, _ in todo)
    desc = f"ingest → {store.collection}"
    with tqdm(total=chars, desc=desc, unit="char", unit_scale=True, disable=not progress or not todo) as bar:
        bar.set_postfix_str(f"0/{len(todo)} documents")
        write_embedded = getattr(store, "write_embedded", None)
        for doc, chunks in _written(todo, store, max_tokens, bar, write_embedded, summary):
            replaced = doc.doc_id in known
            if _count(summary, doc, chunks, replaced=replaced):
                written[doc.doc_id] = document_record(doc, chunks)  # never raises (tested with any text)
                summary.rescreened += int(doc.doc_id in rescreening)
            bar.set_postfix_str(f"{len(written)}/{len(todo)} documents")
    for record in written.values():  # each was flagged (or its marks checked) with today's rules
        record[SCREENED_KEY] = current
    return written


def _written(
    todo: Sequence[tuple[Document, str]],
    store: VectorStore,
    max_tokens: int,
    bar: Any,
    write_embedded: Callable[[EmbeddedDocument], None] | None,
    summary: IngestSummary,
) -> Iterator[tuple[Document, list[Chunk]]]:
    """(document, its chunks) for each document written (a failed one is skipped and named in the summary)."""
    if not callable(write_embedded):
        for doc, digest in todo:
            try:
                chunks = flagged_chunks(doc, max_tokens)
            except Exception as exc:
                _skip(summary, doc, exc)
                continue
            if chunks:
                store.replace_document(doc.doc_id, digest, chunks)
            bar.update(len(doc.text))
            yield doc, chunks
        return
    # Chunking, flagging and embedding overlap: worker threads flag and embed the next parts (onnxruntime releases
    # the GIL) while this thread writes, under its write lock, each document whose parts are all done.
    stream = pipeline(_parts(todo, max_tokens), [_flagger, _embedder(store)], depth=INGEST.pipeline_depth)
    try:
        parts: list[_Part] = []
        moved = 0  # characters the bar moved for the document in hand (its chunks' text)
        for part in stream:
            parts.append(part)
            step = min(sum(len(c["text"]) for c in part.chunks), len(part.doc.text) - moved)
            bar.update(step)
            moved += step
            if not part.last:
                continue
            bar.update(len(part.doc.text) - moved)  # the document's own length, whatever its chunks hold
            moved = 0
            doc, failed = part.doc, next((p.error for p in parts if p.error is not None), None)
            parts, done = [], parts
            if failed is not None:
                _skip(summary, doc, failed)
                continue
            chunks = [c for p in done for c in p.chunks]
            mark_stuffed_page(chunks)
            if chunks:
                vectors = np.concatenate([p.vectors for p in done]) if len(done) > 1 else done[0].vectors
                sentences = [s for p in done for s in p.sentences]
                write_embedded(EmbeddedDocument(doc.doc_id, part.digest, chunks, vectors, sentences))
            yield doc, chunks
    finally:
        stream.close()


def _parts(todo: Iterable[tuple[Document, str]], max_tokens: int) -> Iterator[_Part]:
    """Each document chunked and cut into parts of INGEST.part_chunks chunks (one empty part for a document with no
    chunks; one failed part for a document that could not be chunked)."""
    for doc, digest in todo:
        try:
            chunks = chunk_document(doc, max_tokens=max_tokens)
        except Exception as exc:
            yield _Part(doc, digest, [], last=True, error=exc)
            continue
        size = INGEST.part_chunks
        starts = range(0, len(chunks), size) if chunks else range(1)
        for start in starts:
            yield _Part(doc, digest, chunks[start : start + size], last=start + size >= len(chunks))


def _flagger(part: _Part) -> _Part:
    if part.error is None:
        try:
            for chunk in part.chunks:
                chunk["metadata"] = chunk_metadata(chunk, part.doc.title)
        except Exception as exc:
            part.error = exc
    return part


def _embedder(store: VectorStore) -> Callable[[_Part], _Part]:
    def stage(part: _Part) -> _Part:
        if part.error is None and part.chunks:
            try:
                part.vectors, part.sentences = _distinct_vectors(store, part.chunks)
            except Exception as exc:
                part.error = exc
        return part

    return stage


def _distinct_vectors(store: VectorStore, chunks: list[Chunk]) -> tuple[Any, list[bytes | None]]:
    """The chunks' vectors, each distinct (section, text) embedded once: a page padded with one passage repeated
    thousands of times costs one forward pass, not thousands (a page without repeats embeds exactly as before)."""
    first: dict[tuple[str, str], int] = {}
    distinct: list[Chunk] = []
    index: list[int] = []
    for chunk in chunks:
        key = (str(chunk.get("section") or ""), chunk["text"])
        if key not in first:
            first[key] = len(distinct)
            distinct.append(chunk)
        index.append(first[key])
    if len(distinct) == len(chunks):
        return chunk_vectors(store.embedder, chunks)
    vectors, sentences = chunk_vectors(store.embedder, distinct)
    return vectors[index], [sentences[i] for i in index]


def chunk_metadata(chunk: Chunk, title: str = "") -> dict[str, Any]:
    """A chunk's metadata with its flagged sentences and title (kept, never removed: see signals/injection.py) and
    whether it is keyword stuffing (signals/stuffing.py), so a reader is warned at every read."""
    flagged = flag_metadata(chunk["metadata"], chunk["text"], chunk["url"], title=title or chunk.get("title", ""))
    return stuffing_metadata(flagged, chunk["text"])


def flagged_chunks(doc: Document, max_tokens: int) -> list[Chunk]:
    """The document's chunks, each one's metadata carrying its flags (`chunk_metadata`)."""
    return _flagged(chunk_document(doc, max_tokens=max_tokens), doc.title)


def _flagged(chunks: list[Chunk], title: str) -> list[Chunk]:
    """The chunks of one document, each one's metadata flagged (`chunk_metadata`), a stuffed page marked."""
    for chunk in chunks:
        chunk["metadata"] = chunk_metadata(chunk, title)
    mark_stuffed_page(chunks)
    return chunks


# What ingest adds to a chunk's metadata (`chunk_metadata`, `mark_stuffed_page`): taken off to flag a chunk again.
SCREENING_KEYS = (FLAGS_KEY, SCREEN_KEY, STUFFED_KEY, STUFFED_PAGE_KEY)


def rescreened_chunks(doc: Document, stored: Sequence[Chunk]) -> list[Chunk]:
    """A document's stored chunks with the metadata ingest gives them today: what ingest added taken off (the
    document's own values of those keys put back, as `chunk_document` copies them) and flagged again. Text, ids and
    positions stay as stored, so the stored vectors still fit."""
    own = {key: doc.metadata[key] for key in SCREENING_KEYS if key in doc.metadata}
    chunks: list[Chunk] = []
    for chunk in stored:
        again = chunk.copy()
        again["metadata"] = {**{k: v for k, v in chunk["metadata"].items() if k not in SCREENING_KEYS}, **own}
        chunks.append(again)
    return _flagged(chunks, doc.title)


def _mark_holds(chunk: Chunk) -> bool:
    """Whether a stored chunk's screening mark is today's for its text and domain (a hash: no flagging), the domain
    read as read time reads it (`document_domain_of`)."""
    return chunk["metadata"].get(SCREEN_KEY) == screen_mark(chunk["text"], document_domain_of(chunk))


def _live_chunks(store: VectorStore) -> list[Chunk]:
    """Every live chunk as stored; without vectors where the store can leave them out (both built-in stores)."""
    load: Callable[..., Snapshot] = store.load_snapshot
    return (load(vectors=False) if "vectors" in inspect.signature(load).parameters else load()).chunks


def _stored_chunks(unsure: Sequence[tuple[Document, str]], store: VectorStore) -> dict[str, list[Chunk]]:
    """doc_id -> stored chunks (in position order) of each of these documents. The store is read only when there
    are some, and only when the rules have a fingerprint (else no mark could hold)."""
    if not unsure or not injection_screen.rules_fingerprint():
        return {}
    wanted = {doc.doc_id for doc, _ in unsure}
    by_doc: dict[str, list[Chunk]] = {}
    for chunk in _live_chunks(store):
        if chunk["doc_id"] in wanted:
            by_doc.setdefault(chunk["doc_id"], []).append(chunk)
    return {doc_id: sorted(chunks, key=lambda c: c["position"]) for doc_id, chunks in by_doc.items()}


def _rescreen(
    same: Sequence[tuple[Document, str]],
    unsure: Sequence[tuple[Document, str]],
    store: VectorStore,
    summary: IngestSummary,
    written: dict[str, dict[str, Any]],
    *,
    progress: bool,
) -> list[tuple[Document, str]]:
    """Count the unchanged documents (`same`), and check the stored marks of those not recorded as flagged with
    today's rules (`unsure`). One whose marks do not hold (an upgrade changed the rules) is flagged again: its chunks'
    metadata is updated in place (`update_metadata`, a batch of documents a call: no chunking, no embedding, the
    content hash kept) and its trusted-domain record follows the new flags; one whose marks hold is recorded as
    checked, so the next ingest reads nothing. A store without `update_metadata` rewrites the stale ones: those are
    returned, to be written as changed documents are."""
    stored = _stored_chunks(unsure, store)
    update = getattr(store, "update_metadata", None)
    rewrite: list[tuple[Document, str]] = []
    batch: dict[str, tuple[Document, list[Chunk]]] = {}
    held = 0  # chunks in the batch
    desc = f"re-screen → {store.collection}"
    bar = tqdm(total=len(stored), desc=desc, unit="doc", disable=not progress or not stored)
    with bar:
        for doc, digest in same:
            found = stored.get(doc.doc_id)
            bar.update(bool(found))
            # None: not read (recorded as flagged with today's rules) or failed; `found` itself: nothing to change.
            chunks = _flagged_again(doc, found, summary) if found and not all(map(_mark_holds, found)) else found
            if chunks is not None and chunks is not found and not callable(update):
                rewrite.append((doc, digest))
                continue
            summary.unchanged += 1
            summary.documents += 1
            if chunks is None:
                continue
            if chunks is found:  # checked: recorded with today's rules, so the next ingest does not read it
                written[doc.doc_id] = document_record(doc, found)
                continue
            batch[doc.doc_id] = (doc, chunks)
            held += len(chunks)
            if held >= STORE_IO.write_batch:  # a store write costs about the same for one document or hundreds
                _update_batch(cast(_MetadataUpdate, update), batch, summary, written)
                batch, held = {}, 0
        _update_batch(cast(_MetadataUpdate, update), batch, summary, written)
    return rewrite


_MetadataUpdate = Callable[[Mapping[str, Sequence[Chunk]]], None]  # a store's `update_metadata`


def _flagged_again(doc: Document, stored: list[Chunk], summary: IngestSummary) -> list[Chunk] | None:
    """The stored chunks flagged again (`rescreened_chunks`); `stored` itself when that changes nothing (a document
    that brought flags of its own has chunks never marked); None when it fails (named in the errors: read time flags
    it, as before, and the next ingest tries again)."""
    try:
        chunks = rescreened_chunks(doc, stored)
    except Exception as exc:
        _not_refreshed(summary, [doc], exc)
        return None
    return chunks if _metadata_json(chunks) != _metadata_json(stored) else stored


def _update_batch(
    update: _MetadataUpdate,
    batch: Mapping[str, tuple[Document, list[Chunk]]],
    summary: IngestSummary,
    written: dict[str, dict[str, Any]],
) -> None:
    """Write a batch of re-screened documents' metadata in one store call; a failure names each of them."""
    if not batch:
        return
    try:
        update({doc_id: chunks for doc_id, (_doc, chunks) in batch.items()})
    except Exception as exc:  # the documents stay as stored: read time flags them, as before
        _not_refreshed(summary, [doc for doc, _chunks in batch.values()], exc)
        return
    summary.rescreened += len(batch)
    for doc_id, (doc, chunks) in batch.items():
        written[doc_id] = document_record(doc, chunks)


def _not_refreshed(summary: IngestSummary, docs: Sequence[Document], error: BaseException) -> None:
    for doc in docs:
        summary.errors.append(LoadError(doc.source or doc.doc_id, f"screening marks not refreshed: {_reason(error)}"))


def _metadata_json(chunks: Sequence[Chunk]) -> list[str]:
    """The chunks' metadata as the stores keep it (JSON), to compare what flagging again gives with what is stored."""
    return [json.dumps(c["metadata"], sort_keys=True) for c in chunks]


def _count(summary: IngestSummary, doc: Document, chunks: list[Chunk], *, replaced: bool) -> bool:
    if not chunks:
        summary.errors.append(LoadError(doc.source or doc.doc_id, "no text to index"))
        summary.skipped += 1
        return False
    summary.documents += 1
    summary.chunks_added += len(chunks)
    summary.replaced += int(replaced)
    summary.stuffed_chunks += sum(1 for c in chunks if STUFFED_KEY in c["metadata"])
    return True


def _stderr_line(message: str) -> None:
    print(f"  \u00b7 {message}", file=sys.stderr, flush=True)


def ingest(
    paths: Sequence[str | Path],
    store: VectorStore,
    *,
    max_tokens: int,
    delete: Sequence[str] = (),
    progress: bool = True,
    on_wait: WaitNotice | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
    settings_root: Path | None = None,
) -> IngestSummary:
    """Load every path, (re)index changed documents, delete the named ones; bad files and documents are reported
    by name, not fatal.

    Deletes come first; files are then indexed as they are read, in batches (`INGEST.flush_documents`, or whatever
    was read when no file has come for `INGEST.flush_idle_s`), each under its own hold of the write lock, while a
    thread reads the next files: a slow or huge file holds up none read before it. A document file
    over `max_file_bytes` is an error of its own; with `progress`, reading a large file says so on stderr. The
    collection's settings (its trusted domains) are kept in `settings_root`, else the store's data dir.
    """
    summary = IngestSummary()
    tell = _stderr_line if progress else None
    deleted: list[str] = []
    with store.writing(on_wait=on_wait):
        summary.repaired = store.take_repaired()
        for doc_id in delete:
            removed = store.delete_document(doc_id)
            summary.deleted += 1 if removed else 0
            if removed:
                deleted.append(doc_id)
            else:
                summary.errors.append(LoadError(doc_id, f"no document {doc_id!r} in collection {store.collection!r}"))
    documents = iter_documents(paths, summary.errors, max_file_bytes=max_file_bytes, on_progress=tell)
    seen: set[str] = set()
    indexed = False
    for batch in batches(documents, size=INGEST.flush_documents, idle_s=INGEST.flush_idle_s):
        ingest_documents(
            batch,
            store,
            max_tokens=max_tokens,
            progress=progress,
            summary=summary,
            on_wait=on_wait,
            settings_root=settings_root,
            deleted=() if indexed else deleted,
            seen=seen,
        )
        indexed = True
    if not indexed:  # nothing read: the deletes still reach the collection's records
        ingest_documents(
            [],
            store,
            max_tokens=max_tokens,
            progress=progress,
            summary=summary,
            settings_root=settings_root,
            on_wait=on_wait,
            deleted=deleted,
        )
    return summary
