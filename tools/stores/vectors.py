"""What both stores do alike with a collection's vectors: check the embedder they come from, and compute each
chunk's vectors (and its sentences') when it is written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from reground.tools.stores.vector_store import StoreError, pack_sentence_vectors
from reground.tools.types import Chunk

if TYPE_CHECKING:
    from reground.tools.adapters.embeddings import Embedder


class EmbeddingMismatchError(StoreError):
    """A collection opened with another embedding model than the one its vectors come from."""


def matching_embedder(collection: str, recorded: str, embedder: Embedder | None) -> Embedder:
    """The embedder of an existing collection: the one it was written with (`recorded` in its metadata) when none
    is given; a given one of another model is refused, since its vectors would not be comparable."""
    from reground.tools.adapters.embeddings import MINILM_SPEC, load_embedder

    if embedder is None:
        return load_embedder(recorded or MINILM_SPEC)  # collections without a record predate the choice
    if recorded and recorded != embedder.name:
        raise EmbeddingMismatchError(
            f"collection {collection!r} was embedded with {recorded!r}, not {embedder.name!r}: set the "
            f"embedding model to {recorded!r} (Context.embedding_model, --embedding) or ingest into a new "
            "collection"
        )
    return embedder


def chunk_vectors(embedder: Embedder, chunks: Sequence[Chunk]) -> tuple[np.ndarray, list[bytes | None]]:
    """The chunks' vectors and, packed per chunk, their sentences' vectors (the sentences evidence ranks, split by
    `text.sentences.sentence_spans`): kept at ingest so a turn does not embed passage sentences again."""
    from reground.tools.adapters.embeddings import embed_passages_with_spans
    from reground.tools.text.sentences import sentence_spans

    if not chunks:
        return np.zeros((0, embedder.dimension), dtype=np.float32), []
    # A chunk is embedded under its heading path ("Dependencies > Global dependencies"): what the section is about
    # is often said only there. Its units' spans are read from the same forward pass, shifted past the path.
    heads = [f"{c['section']}\n" if c.get("section") else "" for c in chunks]
    texts = [head + c["text"] for head, c in zip(heads, chunks, strict=True)]
    spans = [
        [(len(head) + start, len(head) + end) for start, end, _ in sentence_spans(c["text"])]
        for head, c in zip(heads, chunks, strict=True)
    ]
    vectors, sentences = embed_passages_with_spans(embedder, texts, spans)
    return vectors, [pack_sentence_vectors(rows) if len(rows) else None for rows in sentences]
