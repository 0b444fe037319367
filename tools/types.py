"""Plain data that crosses tool, node and eval boundaries (JSON-serialisable: it lives in graph state)."""

from __future__ import annotations

from typing import Any, TypedDict

MATCH_ANY = "all"  # a document scope value that matches every user (metadata {"country": "all"})

# The roles of the assistant's side of a dialogue: the graph's own turns say "assistant", the datasets "agent".
ASSISTANT_ROLES = frozenset({"agent", "assistant", "ai", "system"})


def is_assistant(role: str) -> bool:
    """Whether a dialogue turn with this role is the assistant's (any case)."""
    return role.lower() in ASSISTANT_ROLES


class Chunk(TypedDict):
    """One stored paragraph-sized chunk of a document, with everything a citation needs."""

    chunk_id: str
    doc_id: str
    title: str
    section: str
    url: str
    position: int
    text: str
    metadata: dict[str, Any]


class Passage(Chunk, total=False):
    """A retrieved chunk with the scores that ranked it."""

    score: float
    doc_score: float
    paragraph_score: float
    rerank_score: float
    chunk_score: float  # the chunk ranker's logit, when it chose the candidate (retrieval/chunk_ranker.py)
    rank: int
