"""What one ingest did to a collection (tools/stores/ingest.py): the counts the CLI prints in one line and the
ingestion graph returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from reground.tools.text.loaders import LoadError


@dataclass
class IngestSummary:
    """What one ingest did to the collection, for the CLI line and the ingestion graph's result."""

    documents: int = 0  # documents now in the store from this ingest: the unchanged and the (re)written ones
    chunks_added: int = 0
    unchanged: int = 0  # same content hash as stored: not rewritten
    replaced: int = 0  # stored before with other content (or stale marks, on a store without metadata updates)
    rescreened: int = 0  # stored with stale screening marks: flagged again, metadata updated (or rewritten)
    deleted: int = 0  # removed by doc_id (`reground ingest --delete`, the ingestion graph's `delete`)
    skipped: int = 0  # a repeated doc_id or no text to index (each also in errors)
    errors: list[LoadError] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)  # manifest records dropped: their chunks were missing
    # doc_id -> control characters and terminal escape sequences removed from it (tools/text/terminal.py)
    controls_stripped: dict[str, int] = field(default_factory=dict)
    # doc_id -> invisible formatting characters removed (bidi controls, tag characters, zero-width; text/invisible.py)
    invisible_stripped: dict[str, int] = field(default_factory=dict)
    # doc_id -> blobs (JSON, XML, a markdown image) glued to prose and set on a line of their own (text/blobs.py)
    blobs_separated: dict[str, int] = field(default_factory=dict)
    # doc_id -> characters of text a reader would not see (white, tiny, off-page, hidden by a style), dropped by
    # the loader (text/hidden.py, text/pdf_hidden.py)
    hidden_dropped: dict[str, int] = field(default_factory=dict)
    stuffed_chunks: int = 0  # chunks written flagged as keyword stuffing (signals/stuffing.py)
    trusted_domains: list[str] = field(default_factory=list)  # the collection's, after this ingest

    def __str__(self) -> str:
        text = (
            f"{self.documents} documents ({self.replaced} replaced, {self.unchanged} unchanged), "
            f"{self.chunks_added} chunks added, {self.deleted} deleted, {self.skipped} skipped, "
            f"{len(self.errors)} errors"
        )
        if self.rescreened:
            text += f", {self.rescreened} documents re-screened with the current injection rules"
        if self.repaired:
            text += f", {len(self.repaired)} documents with missing chunks re-added"
        if self.controls_stripped:
            text += (
                f", {sum(self.controls_stripped.values())} control characters or escape sequences stripped from "
                f"{len(self.controls_stripped)} documents"
            )
        if self.invisible_stripped:
            text += (
                f", {sum(self.invisible_stripped.values())} invisible formatting characters removed from "
                f"{len(self.invisible_stripped)} documents"
            )
        if self.blobs_separated:
            text += f", {sum(self.blobs_separated.values())} blobs set apart from their text"
        if self.hidden_dropped:
            text += (
                f", {sum(self.hidden_dropped.values())} characters of hidden text dropped from "
                f"{len(self.hidden_dropped)} documents"
            )
        if self.stuffed_chunks:
            text += f", {self.stuffed_chunks} chunks flagged as keyword stuffing"
        return text

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["errors"] = [str(e) for e in self.errors]
        return data
