"""The LLM-free keyword extractor: used by the graph's keyword and re-ground nodes and by the retrieval eval.

A tool (not a node) so that evals can build the same query the graph builds without importing the graph.
"""

from __future__ import annotations

from collections import Counter

from reground.tools.text.lexical import lexical_tokens
from reground.tools.tuning.retrieval import SEARCH


def lexical_keywords(*texts: str, limit: int = SEARCH.keywords) -> list[str]:
    """Content words (the shared tokeniser's, 3+ characters, starting with a letter) ranked by frequency across
    the texts, earlier texts first on ties (no LLM)."""
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for text in texts:
        for word in lexical_tokens(text):
            if len(word) < SEARCH.keyword_min_chars or not word[0].isalpha():
                continue
            counts[word] += 1
            first_seen.setdefault(word, len(first_seen))
    ranked = sorted(counts, key=lambda w: (-counts[w], first_seen[w]))
    return ranked[:limit]
