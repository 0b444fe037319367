"""Keyword stuffing: text that repeats a few words (or one sentence) far past what prose does, to buy rank.

A page repeating a question's words fifty times around a false figure outranked the real page in BM25 and in the
dense search, and pushed it out of the passages. Prose spreads its words; a stuffed chunk is almost only
repeats, of words (`repeat_share`: the share of its content words, three letters or more, that repeat an earlier
one) and of character sequences (`compressed_share`: zlib's size against the text's). Lists of similar
identifiers repeat words too, but not whole sequences, so both must be high. Ingest records a stuffed chunk in its
metadata (`STUFFED_KEY`), and every chunk of its page as a stuffed page's (`STUFFED_PAGE_KEY`); retrieval weighs
their hits down (tools/retrieval/search.py) and indexes their words once each (tools/stores/search_index.py), so
repeating words buys nothing.

The two cut-offs are declared in tools/tuning/signals.py (`Stuffing`): no chunk of doc2dial, MTRAG-UN, techdocs or
the demo corpus passes both, and the stuffed pages of the injection suites do.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from reground.tools.text.lexical import lexical_tokens
from reground.tools.tuning.signals import STUFFING

STUFFED_KEY = "stuffed"  # chunk metadata: its `repeat_share`, present only on a stuffed chunk
STUFFED_PAGE_KEY = "stuffed_page"  # chunk metadata: True on every chunk of a document with a stuffed chunk
_WORD = re.compile(r"[^\W\d_]{3,}")


def repeat_share(text: str) -> float:
    """The share of a text's content words (letters only, three or more) that repeat an earlier one: 0 for text too
    short to tell."""
    words = [w for w in lexical_tokens(text) if _WORD.fullmatch(w)]
    if len(words) < STUFFING.min_words:
        return 0.0
    return 1.0 - len(set(words)) / len(words)


def compressed_share(text: str) -> float:
    """zlib's size of the text against its own (UTF-8): near 0.5 for prose, low for text that repeats itself."""
    raw = text.encode("utf-8")
    return len(zlib.compress(raw, STUFFING.zlib_level)) / max(len(raw), 1)


@lru_cache(maxsize=STUFFING.texts_kept)
def is_stuffed(text: str) -> bool:
    """Whether a chunk's text is keyword stuffing: its words and its character sequences both repeat."""
    return repeat_share(text) >= STUFFING.repeat_threshold and compressed_share(text) <= STUFFING.compressed_threshold


def stuffing_metadata(metadata: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A chunk's metadata, with `STUFFED_KEY` when its text is stuffed (unchanged otherwise, as a copy)."""
    out = dict(metadata)
    if is_stuffed(text):
        out[STUFFED_KEY] = round(repeat_share(text), 3)
    return out


def mark_stuffed_page(chunks: list[Any]) -> bool:
    """Mark every chunk of a document that stuffs keywords anywhere (`STUFFED_PAGE_KEY`): its other chunks (the one
    with the false figure after the repeated words) are the same page's, and rank no better; whether it did."""
    if not any(STUFFED_KEY in chunk["metadata"] for chunk in chunks):
        return False
    for chunk in chunks:
        chunk["metadata"] = {**chunk["metadata"], STUFFED_PAGE_KEY: True}
    return True


def chunk_is_stuffed(chunk: Mapping[str, Any]) -> bool:
    """A chunk recorded at ingest as stuffed or of a stuffed page, or read as stuffed now (a collection written
    before the check)."""
    metadata = chunk.get("metadata") or {}
    if isinstance(metadata, Mapping) and (STUFFED_KEY in metadata or STUFFED_PAGE_KEY in metadata):
        return True
    return is_stuffed(str(chunk.get("text", "")))
