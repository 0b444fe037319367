"""The chunk ranker: which paragraphs of the best documents become a turn's candidates, learned on developer docs.

ConvRAG's paragraph score (a fixed sum of cosines and a BM25 term, plus the document's score, spread across documents)
was tuned on doc2dial's government pages. On a framework's documentation the page is usually among the documents
searched, but the paragraph that holds the call often is not among the candidates kept (evals/results/units/
chunk_ranker.json). This linear model reads what carries between documentation sets: the paragraph's cosine with the
turn's question and with the dialogue, its distance to the best cosine, the ConvRAG score, its document's score, the
share of the question's words it and its heading path hold, and whether it holds code (for a question that asks for a
procedure too). Paragraphs are then kept by its score alone: the document's score is one of its inputs.

Turned on (`retrieval.chunk_ranking="auto"`; off by default, tools/tuning/retrieval.py says why), it ranks when the
documents' paragraphs hold a fenced code block: it was trained and measured leave-one-corpus-out on documentation with
code (evals/train/chunk_ranker.py), not on prose collections, whose retrieval it leaves as it was. Where it chose a
candidate, rerank weighs the candidate by its score beside the unit ranker's (nodes/rerank.py). Weights ship with the
package (reground/data/units/chunk_ranker.json, sha256-pinned; `REGROUND_DOC_MODELS` swaps them as for the unit
ranker) and are never trained at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from reground.tools.signals.units import PROCEDURE, UnitRanker, documentation_model
from reground.tools.text.lexical import lexical_tokens
from reground.tools.text.sentences import has_code_block
from reground.tools.types import Chunk

CHUNK_RANKER_FILE = "chunk_ranker.json"
CHUNK_RANKER_SHA256 = "702ac29dcd9991c1985b7c9656b8dbd2d8c0a220613bde8b6adfae3c858c7043"

CHUNK_FEATURES = (
    "dense",
    "dialogue_dense",
    "dense_gap",
    "paragraph",
    "document",
    "lexical",
    "section_lexical",
    "has_code",
    "procedure_code",
)


@dataclass(frozen=True)
class ParagraphSignals:
    """What the retriever measured of each paragraph of the searched documents (one value per chunk)."""

    dense: np.ndarray  # cosine with the turn's question (RetrievalQuery.asked)
    dialogue_dense: np.ndarray  # cosine with the dialogue's query (0 without one)
    paragraph: np.ndarray  # the ConvRAG paragraph score
    document: np.ndarray  # the document's score over the best document's


def chunk_feature_rows(question: str, chunks: Sequence[Chunk], signals: ParagraphSignals) -> np.ndarray:
    """One row of CHUNK_FEATURES per chunk."""
    if not chunks:
        return np.zeros((0, len(CHUNK_FEATURES)), dtype=np.float32)
    words = set(lexical_tokens(question))
    procedure = 1.0 if PROCEDURE.search(question) else 0.0
    spread = float(signals.paragraph.max() - signals.paragraph.min())
    paragraph = (signals.paragraph - signals.paragraph.min()) / spread if spread > 0 else np.zeros(len(chunks))
    best = float(signals.dense.max())
    rows = []
    for i, chunk in enumerate(chunks):
        text = str(chunk.get("text", ""))
        heading = f"{chunk.get('title', '')} {chunk.get('section', '')}"
        code = 1.0 if has_code_block(text) else 0.0
        rows.append(
            [
                float(signals.dense[i]),
                float(signals.dialogue_dense[i]),
                float(signals.dense[i]) - best,
                float(paragraph[i]),
                float(signals.document[i]),
                len(words & set(lexical_tokens(text))) / max(len(words), 1),
                len(words & set(lexical_tokens(heading))) / max(len(words), 1),
                code,
                code * procedure,
            ]
        )
    return np.asarray(rows, dtype=np.float32)


def applies(mode: str, chunks: Sequence[Chunk]) -> bool:
    """Whether the chunk ranker ranks these paragraphs: 'on', or 'auto' on documentation with code."""
    return mode == "on" or (mode == "auto" and any(has_code_block(str(c.get("text", ""))) for c in chunks))


@dataclass(frozen=True)
class ChunkRanker(UnitRanker):
    """The unit ranker's standardising linear scorer over CHUNK_FEATURES."""

    FEATURES = CHUNK_FEATURES
    WHAT = "chunk ranker"


@lru_cache(maxsize=1)
def shipped_chunk_ranker() -> ChunkRanker:
    """The chunk ranker trained here and installed with the package (loaded once per process)."""
    return ChunkRanker.from_json(documentation_model(CHUNK_RANKER_FILE, CHUNK_RANKER_SHA256, "chunk ranker"))
