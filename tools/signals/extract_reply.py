"""The reply the extract default gives (`answer_style="extract"`): the best evidence sentences in the documents' own
words, in reading order, with the list a sentence introduces and without the heading lines a unit starts with.
Which evidence may be a reply at all is evidence.py's `answer_sentences`."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from reground.tools.signals.evidence import Evidence, answer_sentences
from reground.tools.text.lexical import STOPWORDS
from reground.tools.text.sentences import is_list_item, split_unit, without_list_marker
from reground.tools.tuning.turn import EVIDENCE

# How a line that ends a sentence or leads into what follows ends (a heading line has none of these).
_LINE_END = re.compile(r"[.!?:;,)\]\"']$")
# Headings and lists (each value's meaning and measurement: tools/tuning/turn.py EVIDENCE).
MAX_HEADING_WORDS = EVIDENCE.max_heading_words
LIST_ITEMS = EVIDENCE.list_items


def is_heading_line(line: str, next_line: str) -> bool:
    """A short line with no closing punctuation, not ending on a function word, before a line that starts like a
    sentence (a capital or a digit): a heading. A line wrapped mid-sentence (a PDF's, a text file's) is long, ends
    on a word like "to" or "the", or goes on in lower case, so it stays."""
    line_words = line.split()
    return (
        0 < len(line_words) <= MAX_HEADING_WORDS
        and not _LINE_END.search(line)
        and line_words[-1].lower() not in STOPWORDS
        and (next_line[:1].isupper() or next_line[:1].isdigit())
    )


def reply_text(sentence: str) -> str:
    """An evidence unit as a reply says it: without the heading lines it starts with ("How to surrender New York
    State plates" before "Note: If you need to ..."), its prose on one line, a code block or table it introduces
    kept on its own lines."""
    prose, structured = split_unit(sentence)
    lines = prose.split("\n")
    while len(lines) > 1 and is_heading_line(lines[0], lines[1]):
        lines = lines[1:]
    said = " ".join(line for line in lines if line.strip())
    return f"{said}\n{structured}" if said and structured else said or structured


def join_reply(parts: Sequence[str]) -> str:
    """Reply units in reading order: prose runs on with a space, a code block or table sits on its own lines."""
    out = ""
    for part in parts:
        if not out:
            out = part
        elif "\n" in part or out.endswith(("```", "~~~", "|")):
            out = f"{out}\n{part}"
        else:
            out = f"{out} {part}"
    return out


def _introduces_list(item: Evidence, by_order: Mapping[int, Evidence]) -> bool:
    """The passage goes on from this sentence with a list item, and the sentence is not itself in a list (an item,
    or an item's second sentence)."""
    after, before = by_order.get(item.order + 1), by_order.get(item.order - 1)
    in_a_list = before is not None and before.passage == item.passage and is_list_item(before.text)
    return (
        after is not None
        and after.passage == item.passage
        and is_list_item(after.text)
        and not is_list_item(item.text)
        and not in_a_list
    )


def _following(item: Evidence, by_order: Mapping[int, Evidence], joins: Callable[[Evidence], bool]) -> list[Evidence]:
    """The sentences right after `item` in its passage while `joins` holds, up to LIST_ITEMS."""
    out = []
    for step in range(1, LIST_ITEMS + 1):
        listed = by_order.get(item.order + step)
        if listed is None or listed.passage != item.passage or not joins(listed):
            break
        out.append(listed)
    return out


def _block(unit: str) -> str:
    """A unit's code block or table, whitespace collapsed ("" for a sentence alone)."""
    return " ".join(split_unit(unit)[1].split())


def extractive_answer(
    evidence: Sequence[Evidence],
    max_sentences: int = 1,
    ratio: float = 1.0,
    *,
    same_passage: bool = False,
    target_words: float = 0.0,
) -> tuple[str, list[int]]:
    """The best evidence sentences in the documents' own words, with the passages they come from: the best one,
    then the next-best ones while they score at least `ratio` of the best (up to `max_sentences`; with
    `same_passage`, only sentences of the best one's passage; with `target_words`, until the reply has that many
    words), in reading order; questions are skipped."""
    answers = answer_sentences(evidence)
    if not answers:
        return "", []
    best = answers[0]
    picked = [best]
    words = len(best.text.split())
    blocks = {_block(best.text)} - {""}
    for item in answers[1:]:
        if len(picked) >= max_sentences or item.strength < ratio * best.strength or 0 < target_words <= words:
            break
        if _block(item.text) in blocks:
            continue  # a page that shows one file twice: the same code again answers nothing new
        if not same_passage or item.passage == best.passage:
            picked.append(item)
            words += len(item.text.split())
            blocks |= {_block(item.text)} - {""}
    # A sentence that introduces a list is answered by the list that follows it: one ending in a colon ("Two types
    # are available:") by the sentences after it, one that its passage goes on from with list items ("Calico
    # policies add the following features." and three bullets) by those items, up to the first that asks.
    following = {e.order: e for e in evidence}
    for item in list(picked):
        if item.text.rstrip().endswith(":"):
            joins = _following(item, following, lambda _: True)
        elif _introduces_list(item, following):
            joins = _following(item, following, lambda e: is_list_item(e.text) and not e.text.rstrip().endswith("?"))
        else:
            joins = []
        picked.extend(e for e in joins if e not in picked)
    picked.sort(key=lambda e: e.order)
    said = [reply_text(e.text) for e in picked]
    said[0] = without_list_marker(
        said[0]
    )  # a reply never opens with a bullet; the items of a list it brings keep theirs
    return join_reply(said), sorted({e.passage for e in picked})
