"""The variant a conversation is in: when a page holds its content once per language or platform (content tabs,
language blocks: the chunk metadata `variant`, text/markdown_chunks.py), the reply comes from the one the user uses.

A variant is named when a word of its label ("macOS and Linux", "JavaScript") or a common name for it ("js", "npm",
"powershell") occurs in the conversation. Passages of the variants the conversation names, and passages with no
variant, are kept; the others leave the candidates. When it names none and the best passages hold several variants of
one section, the turn can ask which (nodes/triage.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from reground.tools.text.markdown_chunks import variant_of
from reground.tools.types import Passage

# Common names of languages and platforms that a variant's label does not spell out.
ALIASES: dict[str, tuple[str, ...]] = {
    "javascript": ("js", "node", "nodejs", "npm", "yarn", "pnpm", "typescript", "ts"),
    "typescript": ("ts", "tsx"),
    "python": ("py", "pip", "pypi", "pytest"),
    "macos": ("mac", "osx", "homebrew", "brew"),
    "linux": ("ubuntu", "debian", "fedora", "bash"),
    "windows": ("win", "powershell", "pwsh", "winget", "scoop", "cmd"),
}
_WORD = re.compile(r"[a-z0-9#+]+")
_FILLER = frozenset({"and", "or", "the", "with", "for", "on", "in", "via", "using", "other"})


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def label_words(label: str) -> set[str]:
    """The words that name a variant: its label's own words and their common names."""
    own = {w for w in _words(label) if w not in _FILLER and len(w) > 1}
    return own | {alias for w in own for alias in ALIASES.get(w, ())}


def named_variants(texts: Iterable[str], labels: Iterable[str]) -> list[str]:
    """The variants among `labels` that the texts name, in `labels` order."""
    said = set().union(*(_words(t) for t in texts)) if texts else set()
    return [label for label in labels if label_words(label) & said]


def prefer_named_variant(candidates: Sequence[Passage], texts: Sequence[str]) -> tuple[list[Passage], list[str]]:
    """(the candidates without the variants the conversation does not use, the variants it names): unchanged when
    it names none of the candidates' variants."""
    labels = list(dict.fromkeys(v for v in map(variant_of, candidates) if v))
    named = named_variants(texts, labels)
    if not named:
        return list(candidates), []
    kept = [p for p in candidates if not variant_of(p) or variant_of(p) in named]
    return kept, named


def competing_variants(passages: Sequence[Passage]) -> list[Passage]:
    """One passage per variant when the best passage's section appears in several variants among the passages (the
    same section of the same page once per tab): the choice to ask about; empty otherwise."""
    if not passages or not variant_of(passages[0]):
        return []
    top = passages[0]
    same = [p for p in passages if p["doc_id"] == top["doc_id"] and p.get("section") == top.get("section")]
    first: dict[str, Passage] = {}
    for passage in same:
        first.setdefault(variant_of(passage), passage)
    return list(first.values()) if len([v for v in first if v]) >= 2 else []
