"""Token-aware chunking that keeps paragraphs whole: short passages are what retrieval and the prompt budget want."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from reground.tools.text.loaders import Document
from reground.tools.text.markdown import looks_like_markdown
from reground.tools.text.markdown_chunks import LINKS_FIELD, VARIANT_FIELD, structured_pieces
from reground.tools.text.sentences import BUDGET_SENTENCE, split_to_budget
from reground.tools.text.tokens import count_tokens
from reground.tools.tuning.stores import INGEST
from reground.tools.types import Chunk

T = TypeVar("T")
# Between the paragraphs packed into one chunk: a blank line, where evidence sentences always end (a single line
# break inside a paragraph does not end one).
PARAGRAPH_BREAK = "\n\n"
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_SENTENCE = BUDGET_SENTENCE


def _budget_tokens(text: str) -> int:
    """Tokens a chunk's budget counts: a line break inside a paragraph as the space it replaces and a blank line as
    one line break, so keeping line breaks moved no chunk boundary (CHUNK_FORMAT 4; format 3 had moved a few)."""
    return count_tokens(text.replace(PARAGRAPH_BREAK, "\0").replace("\n", " ").replace("\0", "\n"))


def _paragraphs(text: str) -> list[tuple[str, str]]:
    """(section, paragraph) pairs; a markdown heading sets the section of what follows.

    A paragraph keeps its line breaks: a plain heading line ("How to surrender your plates") stays part of the
    sentence after it, whose words it helps rank, and an extracted reply can still leave it out
    (tools/signals/extract_reply.reply_text)."""
    section = ""
    out: list[tuple[str, str]] = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        lines = [ln for ln in block.strip().splitlines() if ln.strip()]
        body: list[str] = []
        for line in lines:
            heading = _HEADING.match(line)
            if heading:
                if body:
                    out.append((section, "\n".join(body)))
                    body = []
                section = heading.group(1).strip()
            else:
                body.append(line.strip())
        if body:
            out.append((section, "\n".join(body)))
    return out


def _split_long(paragraph: str, max_tokens: int) -> list[str]:
    """A paragraph over the budget is cut at sentence ends (or words, for a run-on sentence)."""
    return split_to_budget(paragraph, max_tokens, _budget_tokens)


def _once(pieces: list[T], key: Callable[[T], Hashable] = lambda piece: piece) -> list[T]:
    """The pieces without those repeating an earlier one word for word (same `key`), in order."""
    seen: set[Hashable] = set()
    kept = []
    for piece in pieces:
        if key(piece) not in seen:
            seen.add(key(piece))
            kept.append(piece)
    return kept


def chunk_id_for(doc_id: str, position: int, text: str) -> str:
    return hashlib.sha1(f"{doc_id}\x1f{position}\x1f{text}".encode()).hexdigest()[:16]  # fact: the chunk id format


def chunk_document(doc: Document, *, max_tokens: int, overlap_tokens: int = 0) -> list[Chunk]:
    """Pack consecutive paragraphs of a section up to max_tokens; never merge across sections. A passage the page
    repeats word for word in the same section (and variant) is kept once: repeats add nothing to find, and a page
    padded with one passage thousands of times would bloat the collection.

    `overlap_tokens` > 0 repeats the previous chunk's last sentence(s) up to that many tokens.
    """
    if max_tokens < INGEST.min_chunk_tokens:
        raise ValueError(f"max_tokens must be at least {INGEST.min_chunk_tokens}")
    if looks_like_markdown(doc.text, doc.source or doc.doc_id):
        return _structured_chunks(doc, max_tokens)
    packed: list[tuple[str, str]] = []
    for section, paragraph in _paragraphs(doc.text):
        for piece in _split_long(paragraph, max_tokens) if _budget_tokens(paragraph) > max_tokens else [paragraph]:
            if packed and packed[-1][0] == section:
                joined = f"{packed[-1][1]}{PARAGRAPH_BREAK}{piece}"
                if _budget_tokens(joined) <= max_tokens:
                    packed[-1] = (section, joined)
                    continue
            packed.append((section, piece))
    packed = _once(packed)
    chunks: list[Chunk] = []
    previous = ""
    for position, (section, text) in enumerate(packed):
        body = text
        if overlap_tokens and previous:
            tail = _SENTENCE.split(previous)[-1]
            if _budget_tokens(tail) <= overlap_tokens:
                body = f"{tail}{PARAGRAPH_BREAK}{text}"
        previous = text
        chunks.append(_chunk(doc, position, section, body, dict(doc.metadata)))
    return chunks


def _chunk(doc: Document, position: int, section: str, text: str, metadata: dict[str, Any]) -> Chunk:
    return Chunk(
        chunk_id=chunk_id_for(doc.doc_id, position, text),
        doc_id=doc.doc_id,
        title=doc.title,
        section=section,
        url=doc.url,
        position=position,
        text=text,
        metadata=metadata,
    )


def _structured_chunks(doc: Document, max_tokens: int) -> list[Chunk]:
    """A markdown (or HTML-derived) page chunked by its structure (text/markdown_chunks.py)."""
    chunks: list[Chunk] = []
    pieces = structured_pieces(doc.text, doc.title, max_tokens, _budget_tokens)
    pieces = _once(pieces, key=lambda piece: (piece[0], piece[1], piece[2]))  # section, variant, text
    for position, (section, variant, text, links) in enumerate(pieces):
        metadata = dict(doc.metadata)
        if variant:
            metadata[VARIANT_FIELD] = variant
        if links:
            metadata[LINKS_FIELD] = " ".join(links)
        chunks.append(_chunk(doc, position, section, text, metadata))
    return chunks
