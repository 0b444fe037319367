"""The one sentence split (evidence, ingest's sentence vectors, reply checks) and the one citation mark, "[n]".

Chunking packs a long paragraph by its own split (a sentence must start with a capital there, so "e.g. the" stays
whole in a chunk) and the injection rules read hidden and split text with theirs; everything that compares a reply
with passage sentences uses this one.
"""

from __future__ import annotations

import re

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
    """Whitespace collapsed within each line; line breaks kept (they mark headings)."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


def sentence_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, sentence) of every sentence of at least three words: the one sentence split of evidence, used
    at ingest (sentence vectors kept per chunk) and at query time alike; `sentence` is whitespace-normalised
    within its lines."""
    out: list[tuple[int, int, str]] = []
    start = 0
    for separator in [*SENTENCE_END.finditer(text), None]:
        end = separator.start() if separator is not None else len(text)
        if separator is not None and _ONLY_MARKER.match(text[start:end]):
            continue  # a numbered item's marker stays with its item ("1. Open the page.")
        sentence = normalised(text[start:end])
        if len(sentence.split()) >= MIN_SENTENCE_WORDS:
            out.append((start, end, sentence))
        if separator is not None:
            start = separator.end()
    return out


def text_sentences(text: str) -> list[str]:
    return [sentence for _, _, sentence in sentence_spans(text)]


def sentence_parts(text: str) -> list[str]:
    """Every sentence of `text` on one line, short ones included (a reply's sentence cap counts them all)."""
    return [p.strip() for p in SENTENCE_END.split(" ".join(text.split())) if p.strip()]


def strip_citations(text: str) -> str:
    return " ".join(CITATION.sub("", text).split())


def cited_numbers(text: str) -> set[int]:
    """The passage numbers a reply cites ("[2]" -> 2)."""
    return {int(n) for n in CITATION.findall(text)}
