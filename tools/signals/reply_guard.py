"""The reply guard, at finalize: no reply says an injected instruction, a quote holding one is marked, and a
contact a reply gives comes from the documents' content (tools/signals/injection.py flags the sentences)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

from reground.tools.signals.contacts import contact_key, contact_keys, contacts
from reground.tools.signals.injection import flag_passage, passage_flags, split_sentences, unit_flagged
from reground.tools.text.sentences import CITATION, normalised

QUOTE_WARNING = "[Warning: this passage holds text flagged as an injected instruction; it was not followed] "
FLAGGED_REPLY_REASON = "the reply's only content was text flagged as an injected instruction"


C = TypeVar("C", bound=Mapping[str, Any])


def guard_reply(
    text: str,
    passed: bool,
    reason: str | None,
    kind: str,
    citations: Sequence[C],
    passages: Sequence[Mapping[str, Any]],
    not_found: str,
    *,
    reviewed: bool = False,
) -> tuple[str, bool, str | None, str, list[C]]:
    """At finalize: a passed reply's flagged sentences (its own, or the passages' flagged ones it restates) are not
    said; a reply with nothing else becomes `not_found` (not passed, kind "abstain"); a citation whose quote holds a
    flagged sentence shows it with `QUOTE_WARNING`. A reviewer's own edit is not second-guessed."""
    flagged = flags_of(passages)
    if passed and not reviewed and kind != "clarify":
        kept = _without_flagged(text, flagged)
        if _nothing_else(text, kept):
            return not_found, False, FLAGGED_REPLY_REASON, "abstain", []
        text = kept
    warned = [
        cast(C, {**c, "quote": QUOTE_WARNING + str(c.get("quote", ""))})
        if any(unit_flagged(u, flagged, None) for u in split_sentences(str(c.get("quote", ""))))
        and not str(c.get("quote", "")).startswith(QUOTE_WARNING)
        else c
        for c in citations
    ]
    return text, passed, reason, kind, warned


def flags_of(passages: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Every flagged sentence of the passages, with its reasons."""
    flagged: dict[str, tuple[str, ...]] = {}
    for passage in passages:
        flagged.update(passage_flags(passage))
    return flagged


def only_flagged(text: str, passages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a reply says nothing but flagged text (the passages' flagged sentences, or its own sentences the rules
    flag): checked before finalize too, so a written reply that only obeyed an injection is replaced by the
    passages' own unflagged sentences (the quote node) instead of becoming "not found"."""
    return _nothing_else(text, _without_flagged(text, flags_of(passages)))


def _nothing_else(text: str, kept: str) -> bool:
    return kept != text and len(CITATION.sub("", kept).split()) < 2


def _without_flagged(text: str, flagged: Mapping[str, tuple[str, ...]]) -> str:
    """The reply without the passages' flagged sentences it holds (verbatim, as an extracted reply quotes them,
    whatever the line breaks) and without its own sentences the rules flag (a written reply); unchanged if none."""
    out = text
    for sentence in sorted(flagged, key=len, reverse=True):
        pattern = r"\s+".join(re.escape(word) for word in sentence.split())
        out = re.sub(pattern, " ", out) if len(sentence.split()) >= 2 else out
    lines = []
    for line in out.split("\n"):
        parts = split_sentences(line)
        keep = [p for p in parts if not unit_flagged(p, {}, None)]
        lines.append(" ".join(keep) if len(keep) != len(parts) else line)
    out = "\n".join(lines)
    if out == text:
        return text
    # Something was taken out: the prose is tidied, a code block's lines stay as they were (indentation is code).
    return normalised(out).strip()


def unsupported_contacts(answer: str, cited_texts: Sequence[str], removed_sentences: Sequence[str]) -> list[str]:
    """Contacts in the answer that no unflagged sentence of a cited passage holds, or that a flagged (or given
    instruction) sentence held: a link, address or number the answer gives must come from the documents' content,
    never from an order."""
    given = contacts(answer)
    if not given:  # nothing to check: the passages' flags need not be read
        return []
    clean: list[str] = []
    injected = list(removed_sentences)
    for text in cited_texts:
        flagged = {f.sentence for f in flag_passage(text)}
        for sentence in split_sentences(text):
            (injected if sentence in flagged else clean).append(sentence)
    supported, bad = contact_keys(clean), contact_keys(injected)
    return [c for c in given if contact_key(c) not in supported or contact_key(c) in bad]
