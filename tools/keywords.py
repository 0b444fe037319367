"""The LLM-free keyword extractor: used by the graph's keyword and re-ground nodes and by the retrieval eval.

A tool (not a node) so that evals can build the same query the graph builds without importing the graph.
"""

from __future__ import annotations

import re
from collections import Counter

from reground.tools.lexical import STOPWORDS

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]{2,}")


def lexical_keywords(*texts: str, limit: int = 5) -> list[str]:
    """Content words ranked by frequency across the texts, earlier texts first on ties (no LLM)."""
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for text in texts:
        for word in _WORD.findall(text.lower()):
            word = word.strip("'-")
            if word in STOPWORDS or len(word) < 3:
                continue
            counts[word] += 1
            first_seen.setdefault(word, len(first_seen))
    ranked = sorted(counts, key=lambda w: (-counts[w], first_seen[w]))
    return ranked[:limit]
