"""Whether a text can be asked at all: checked by the graph's first node and by the CLI before any model runs."""

from __future__ import annotations


def question_problem(text: str) -> str | None:
    """Why `text` cannot be answered as a question (None if it can): empty, or no letter or digit at all.

    Emoji and control characters alone retrieve arbitrary passages and get a confident, irrelevant
    answer, so they are refused like an empty question. The CLI checks this before starting a turn.
    """
    if not text.strip():
        return "the question is empty"
    if not any(ch.isalnum() for ch in text):
        return "the question has no letters or digits"
    return None
