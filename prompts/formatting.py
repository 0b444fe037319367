"""Pure formatting of a turn's data into prompt text, shared by the graph's nodes and the eval baselines.

It lives with the prompts (not in nodes/) so that evals can show a baseline model exactly the text the graph
shows its model without importing the graph's nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reground.prompts import answer as answer_prompts
from reground.prompts.fence import fence_text


def format_history(history: Sequence[Mapping[str, str]]) -> str:
    """The dialogue as 'role: text' lines (a placeholder when there is none)."""
    if not history:
        return "(no earlier messages)"
    return "\n".join(f"{turn['role']}: {turn['text']}" for turn in history)


def format_conversation(history: Sequence[Mapping[str, str]], question: str) -> str:
    """The dialogue followed by the user's question, as 'role: text' lines."""
    return "\n".join([*(f"{t['role']}: {t['text']}" for t in history), f"user: {question}"])


def format_passages(passages: Sequence[Mapping[str, Any]]) -> str:
    """Numbered passage blocks (answer_prompts.PASSAGE); the numbers are what answers cite."""
    blocks = []
    for number, passage in enumerate(passages, start=1):
        section = f" / {passage['section']}" if passage.get("section") else ""
        blocks.append(
            answer_prompts.PASSAGE.format(
                number=number,
                title=passage.get("title", ""),
                section=section,
                url=passage.get("url") or "no url",
                text=fence_text(passage["text"].strip()),  # cannot open or close the prompts' fence
            )
        )
    return "\n\n".join(blocks) if blocks else "(no passages found)"
