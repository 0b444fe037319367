"""A reply from one variant, naming the others: when a page gives its answer once per language or platform (content
tabs, language blocks: the chunk metadata `variant`) and the conversation names none of them, the turn does not ask
which one the user runs. It answers from the variant of the best unit and names each other one with what it says
instead ("In JavaScript: `getState()`"): a question that is conceptual, or whose conversation already shows the
language (code, `npm`, a file name), was asked back for nothing, and the user who runs the other variant reads its
call in the same reply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from reground.prompts.answer import OTHER_VARIANT
from reground.tools.signals.evidence import Evidence, answer_sentences
from reground.tools.text.markdown_chunks import variant_of
from reground.tools.text.sentences import split_unit
from reground.tools.tuning.turn import EVIDENCE
from reground.tools.types import Passage

_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^\s*(```|~~~)")
VARIANTS_NAMED = EVIDENCE.variants_named
MAX_NAMED_CHARS = EVIDENCE.variant_named_chars


def one_variant(evidence: Sequence[Evidence], passages: Sequence[Passage]) -> tuple[list[Evidence], list[Evidence]]:
    """(the evidence without the units of variants other than the best answer unit's, the best answer unit of each
    other variant, best first, at most VARIANTS_NAMED): the evidence unchanged and no other when the passages hold
    fewer than two variants. Units of passages with no variant always stay."""

    def variant(e: Evidence) -> str:
        return variant_of(passages[e.passage - 1])

    answers = answer_sentences(evidence)
    labels = list(dict.fromkeys(v for v in map(variant, answers) if v))
    if len(labels) < 2:
        return list(evidence), []
    first = next((variant(e) for e in answers if variant(e)), labels[0])
    best_of: dict[str, Evidence] = {}
    for unit in answers:
        if variant(unit) and variant(unit) != first:
            best_of.setdefault(variant(unit), unit)
    kept = [e for e in evidence if variant(e) in ("", first)]
    return kept, list(best_of.values())[:VARIANTS_NAMED]


def what_it_says(unit: str) -> str:
    """The call or command a unit gives, to name beside the reply: its first inline code, else its code block's first
    line, as inline code; "" when it has neither or it is longer than MAX_NAMED_CHARS."""
    prose, structured = split_unit(unit)
    found = _INLINE_CODE.search(prose)
    code = found.group(1).strip() if found else ""
    if not code and structured:
        lines = [line.strip() for line in structured.split("\n") if line.strip() and not _FENCE.match(line)]
        code = lines[0] if lines and not lines[0].startswith("|") else ""
    return f"`{code}`" if code and len(code) <= MAX_NAMED_CHARS and "`" not in code else ""


def named_variants(others: Sequence[Evidence], passages: Sequence[Passage]) -> str:
    """The sentences naming the other variants ("In JavaScript: `getState()`."), one for each whose unit gives a call
    or command; "" when none does."""
    said = []
    for unit in others:
        code = what_it_says(unit.text)
        if code:
            said.append(OTHER_VARIANT.format(variant=variant_of(passages[unit.passage - 1]), code=code))
    return " ".join(said)


def without_named_variants(reply: str, passages: Sequence[Passage]) -> str:
    """The reply without the sentences `named_variants` adds whose call stands in that variant's passages: the rest
    is what must be the passages' own words for the reply to count as quoted."""
    before, after = OTHER_VARIANT.split("{code}")
    out = reply
    for passage in passages:
        label = variant_of(passage)
        if not label:
            continue
        pattern = re.escape(before.format(variant=label)) + r"`([^`\n]+)`" + re.escape(after)
        for match in re.finditer(pattern, reply):
            if match.group(1) in passage["text"]:
                out = out.replace(match.group(0), "")
    return out.strip()
