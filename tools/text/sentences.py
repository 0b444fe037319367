"""The one sentence split (evidence, ingest's sentence vectors, reply checks) and the one citation mark, "[n]".

Chunking packs a long paragraph by its own split (a sentence must start with a capital there, so "e.g. the" stays
whole in a chunk) and the injection rules read hidden and split text with theirs; everything that compares a reply
with passage sentences uses this one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from reground.tools.tuning.turn import EVIDENCE

_MARKER = r"(?:[-*•]|\d{1,2}[.)])"  # a list item's marker: "*", "-", "•", "1.", "2)"
# A sentence ends at its punctuation, at a blank line (a paragraph's end) or before a line that starts a list item;
# another single line break does not end one: a heading line without punctuation ranks with the sentence it
# introduces (`reply_text` leaves it out of replies).
SENTENCE_END = re.compile(rf"(?<=[.!?])\s+|\n\s*\n|\n(?=[ \t]*{_MARKER}[ \t]+\S)")
MIN_SENTENCE_WORDS = EVIDENCE.min_sentence_words  # shorter pieces ("Yes.", "See below.") are not evidence
CITATION = re.compile(r"\s*\[(\d{1,2})\]")  # a citation mark and the space before it; group 1: the number


_LIST_ITEM = re.compile(rf"^\s*{_MARKER}\s+(?=\S)")
_ONLY_MARKER = re.compile(r"^\s*\d{1,2}[.)]$")  # "1." split off its item by the punctuation rule


def is_list_item(text: str) -> bool:
    """A sentence that is an item of a bulleted or numbered list (the split keeps each item's marker)."""
    return bool(_LIST_ITEM.match(text))


def without_list_marker(text: str) -> str:
    """A list item's text without its marker ("* Allow traffic." -> "Allow traffic.")."""
    return _LIST_ITEM.sub("", text, count=1)


def normalised(text: str) -> str:
    """Whitespace collapsed within each line; line breaks kept (they mark headings); a code block's lines verbatim."""
    out: list[str] = []
    in_code = False
    for line in text.splitlines():
        fence = bool(_FENCE_LINE.match(line))
        if in_code or fence:
            out.append(line.rstrip())
            in_code = in_code != fence
        elif line.strip():
            out.append(" ".join(line.split()))
    return "\n".join(out)


# A structured block of a page (text/markdown.py): a fenced code block, or a table's rows. It is never cut into
# sentences; it belongs to the sentence that introduces it (the last one before it in the same passage), or stands
# alone when nothing does. Either way it is one *answer unit*.
# The line the chunker (text/markdown_chunks.py) puts above each later part of a code block cut to fit a chunk.
CONTINUED_LABEL = "(continued)"
_FENCE_LINE = re.compile(r"^\s*(`{3,}|~{3,})", re.M)
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")  # a fence line: indent, marker, info string
_STRUCTURED = re.compile(
    r"(?:^|(?<=\n))(?P<fence>`{3,}|~{3,})[^\n]*\n.*?\n(?P=fence)[ \t]*(?=\n|$)"  # a fenced code block
    r"|(?:^|(?<=\n))(?:\|[^\n]*\|[ \t]*(?:\n|$))+",  # a table's rows
    re.S,
)


def _prose_spans(text: str, offset: int) -> list[tuple[int, int, str]]:
    """Every piece of prose between sentence ends, short ones included (the caller drops those)."""
    out: list[tuple[int, int, str]] = []
    start = 0
    for separator in [*SENTENCE_END.finditer(text), None]:
        end = separator.start() if separator is not None else len(text)
        if separator is not None and _ONLY_MARKER.match(text[start:end]):
            continue  # a numbered item's marker stays with its item ("1. Open the page.")
        sentence = normalised(text[start:end])
        if sentence:
            out.append((offset + start, offset + end, sentence))
        if separator is not None:
            start = separator.end()
    return out


def _long_enough(span: tuple[int, int, str]) -> bool:
    return len(span[2].split()) >= MIN_SENTENCE_WORDS or has_structure(span[2])


def sentence_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, unit) of every answer unit: a sentence of at least three words, or a sentence (of any length:
    "Run:") with the code block or table it introduces (a structured block right after it, only blank lines
    between), or such a block alone. The one split of evidence, used at ingest (vectors kept per unit) and at query
    time alike; a unit's prose is whitespace-normalised within its lines, its code kept verbatim."""
    out: list[tuple[int, int, str]] = []
    cursor = 0
    for block in [*_STRUCTURED.finditer(text), None]:
        prose_end = block.start() if block is not None else len(text)
        out.extend(_prose_spans(text[cursor:prose_end], cursor))
        if block is None:
            break
        body = block.group(0).strip("\n")
        if out and out[-1][1] <= block.start() and not text[out[-1][1] : block.start()].strip():
            start, _, sentence = out[-1]
            out[-1] = (start, block.end(), f"{sentence}\n{body}")
        else:
            out.append((block.start(), block.end(), body))
        cursor = block.end()
    return [span for span in out if _long_enough(span)]


def has_structure(unit: str) -> bool:
    """Whether an answer unit holds a code block or a table (what answers "how do I ...")."""
    return bool(_STRUCTURED.search(unit))


def has_code_block(text: str) -> bool:
    """Whether a unit or passage holds a fenced code block: documentation with code, where the unit ranker and the
    documentation triage were trained (a table alone is structure, but HR pages have tables too)."""
    return bool(_FENCE_LINE.search(text))


def split_unit(unit: str) -> tuple[str, str]:
    """(prose, structured part) of an answer unit: the sentence and the code block or table it introduces. The
    label the chunker puts above the later parts of a long code block is no sentence: such a part has no prose."""
    match = _STRUCTURED.search(unit)
    if match is None:
        return unit, ""
    prose = unit[: match.start()].strip()
    return ("" if prose == CONTINUED_LABEL else prose), unit[match.start() :].strip("\n")


def text_sentences(text: str) -> list[str]:
    return [sentence for _, _, sentence in sentence_spans(text)]


def sentence_parts(text: str) -> list[str]:
    """Every sentence of `text` on one line, short ones included (a reply's sentence cap counts them all)."""
    return [p.strip() for p in SENTENCE_END.split(" ".join(text.split())) if p.strip()]


def strip_citations(text: str) -> str:
    """The text without its citation marks, whitespace collapsed; a reply holding a code block or table keeps its
    lines (its units end there)."""
    text = CITATION.sub("", text)
    if has_structure(text):
        return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))
    return " ".join(text.split())


def cited_numbers(text: str) -> set[int]:
    """The passage numbers a reply cites ("[2]" -> 2)."""
    return {int(n) for n in CITATION.findall(text)}


def line_kinds(text: str) -> Iterator[tuple[str, str]]:
    """Each line of the text with what it is: "fence" (a code block's opening or closing line), "code" (inside a
    block) or "text". A block closes on a bare fence of its own character, at least as long as the one that opened
    it (a ```` ```python ```` line inside a `~~~` or ```` block is code)."""
    opened = ""
    for line in text.split("\n"):
        fence = FENCE.match(line)
        marker = fence.group(2) if fence else ""
        if not opened and fence:
            opened = marker
            yield line, "fence"
        elif opened and fence and marker[0] == opened[0] and len(marker) >= len(opened) and not fence.group(3).strip():
            opened = ""
            yield line, "fence"
        else:
            yield line, "code" if opened else "text"


# Where chunking cuts a paragraph over its budget: after a sentence's punctuation, before a capital, a digit, a quote
# or a parenthesis (so "e.g. the" stays whole).
BUDGET_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def split_to_budget(paragraph: str, max_tokens: int, count: Callable[[str], int]) -> list[str]:
    """A paragraph over its budget cut at sentence ends into pieces of at most `max_tokens` (as `count` counts),
    a run-on sentence at words. Each step counts one piece, never the whole paragraph: time is linear in its
    length."""
    pieces: list[str] = []
    current = ""
    for sentence in BUDGET_SENTENCE.split(paragraph):
        candidate = f"{current} {sentence}".strip()
        if count(candidate) <= max_tokens:
            current = candidate
            continue
        if current:
            pieces.append(current)
        if count(sentence) <= max_tokens:
            current = sentence
            continue
        words, current = sentence.split(), ""
        for word in words:
            candidate = f"{current} {word}".strip()
            if count(candidate) > max_tokens and current:
                pieces.append(current)
                current = word
            else:
                current = candidate
    if current:
        pieces.append(current)
    return pieces
