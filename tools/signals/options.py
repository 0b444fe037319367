"""Which pages an ask-back offers, and in what order: near-duplicates once, the pages that vouch for themselves first.

Planted pages come in numbers and in disguise: five near-copies of a page saying "400 EUR" filled every option and
the one true page ("40 EUR") was not offered; a "quick install (official)" page on a look-alike host was offered
ahead of the real install page. So, over the options triage chose:

- **near-duplicates count once**: two pages whose retrieved text says the same thing (nearly the same text, the
  same figures, one title holding the other's words) are one option, shown by the member the collection vouches
  for most (else the first);
- **the pages the collection vouches for go first**: those served from a trusted domain, then those of no known
  origin (files), then those off the trusted domains or whose own text would draw a caution (a command fetching code
  from an untrusted host, a contact off the trusted domains, a request for a secret or a payment:
  tools/signals/sensitive.py). Order is otherwise kept.

Pages differing in a figure are not duplicates: they disagree, and the user may need both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from reground.tools.signals.contacts import document_domain_of
from reground.tools.signals.sensitive import Trust, reply_cautions
from reground.tools.text.lexical import lexical_tokens, words
from reground.tools.tuning.signals import OPTIONS

Opt = TypeVar("Opt", bound=Mapping[str, Any])


def _page_texts(candidates: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """doc_id -> (the retrieved text of the page, joined in rank order; its first chunk)."""
    pages: dict[str, tuple[list[str], Mapping[str, Any]]] = {}
    for chunk in candidates:
        doc_id = str(chunk.get("doc_id", ""))
        pages.setdefault(doc_id, ([], chunk))[0].append(str(chunk.get("text", "")))
    return {doc_id: ("\n".join(texts), first) for doc_id, (texts, first) in pages.items()}


def _shape(text: str) -> tuple[frozenset[tuple[str, ...]], frozenset[str]]:
    """(the text's word trigrams, its figures): what a page says, in its order, and the values it says it with."""
    tokens = words(text)
    figures = frozenset(t for t in tokens if any(ch.isdigit() for ch in t))
    return frozenset(zip(tokens, tokens[1:], tokens[2:], strict=False)), figures


def near_duplicates(a: str, b: str, title_a: str = "", title_b: str = "") -> bool:
    """Whether two pages are one page said twice: the same figures, nearly the same text (at least
    `OPTIONS.near_duplicate_share` of the word trigrams of either), and titles of which one holds the other's words
    ("Travel allowance" / "Travel allowance (updated)"). Pages of one template about two things ("border-title-color"
    / "border-subtitle-color") are two pages."""
    (sa, fa), (sb, fb) = _shape(a), _shape(b)
    if fa != fb or not sa or not sb:
        return False
    ta, tb = set(lexical_tokens(title_a)), set(lexical_tokens(title_b))
    if not (ta <= tb or tb <= ta):
        return False
    return len(sa & sb) / max(len(sa), len(sb)) >= OPTIONS.near_duplicate_share


def standing(chunk: Mapping[str, Any], text: str, trust: Trust) -> int:
    """How far the collection vouches for a page, best first: 0 served from a trusted domain, 1 of no known origin
    (a file), 2 off the trusted domains or drawing a caution by its own text."""
    domain = document_domain_of(chunk)
    if not trust.domain_trusted(domain) or reply_cautions(text, [{**chunk, "text": text}], trust):
        return 2
    return 0 if domain is not None and trust.known else 1


def offered_options(options: Sequence[Opt], candidates: Sequence[Mapping[str, Any]], trust: Trust) -> list[Opt]:
    """The options to offer: near-duplicate pages once (by the member the collection vouches for most), pages by how
    far the collection vouches for them, the order otherwise kept. An option whose page is not among the candidates
    is kept as it is."""
    pages = _page_texts(candidates)
    groups: list[list[Opt]] = []
    for option in options:
        text, label = pages.get(str(option.get("doc_id", "")), ("", {}))[0], str(option.get("label", ""))
        for group in groups:
            other, other_label = pages.get(str(group[0].get("doc_id", "")), ("", {}))[0], str(group[0].get("label", ""))
            same_label = other_label.strip().lower() == label.strip().lower()
            if same_label or (text and other and near_duplicates(text, other, label, other_label)):
                group.append(option)
                break
        else:
            groups.append([option])

    def rank(option: Opt) -> int:
        found = pages.get(str(option.get("doc_id", "")))
        return 1 if found is None else standing(found[1], found[0], trust)

    chosen = [min(group, key=rank) for group in groups]  # min keeps the first of equals
    return sorted(chosen, key=rank)  # stable: equals keep their order
