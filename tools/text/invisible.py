"""Characters that change how text displays without being seen: format characters, bidi controls, tag characters.

A page can hide text in Unicode tag characters (U+E0000-E007F, read by models, shown by nothing), reverse how a
line reads with bidi controls (U+202E makes "toner.exe (download)" read otherwise on a terminal), and split words
with zero-width characters so that a chunker or a rule sees other words than a reader (tag characters
made the chunker cut a fact mid-sentence). Ingest removes them before chunking (tools/stores/ingest.py counts
them per document) and the CLI removes them from everything it prints (tools/text/terminal.py), so text written
before either cannot reach a terminal with them.

What is removed: every format character (Unicode category Cf) except the few that are visible signs (Arabic and
Kaithi number signs, the end-of-ayah marks, hieroglyph joiners); the invisible fillers and variation selectors
outside the emoji ones; zero-width joiners and non-joiners except between two letters of a script that needs them
(Persian, Indic, emoji sequences). Line and paragraph separators become line breaks.
"""

from __future__ import annotations

import re

# Category Cf of Unicode 14 (Python 3.11's unicodedata; tests/unit/test_invisible.py checks every Cf character is
# here or a listed visible sign) without the visible signs: U+0600-0605, 06DD, 070F, 0890-0891, 08E2, 110BD,
# 110CD, 13430-13438. The joiners U+200C/U+200D are handled apart (`_JOINER`).
_FORMAT = (
    "\u00ad\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
# Invisible but not Cf: combining grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian free variation
# selectors, variation selectors 1-14 and 17-256 (15 and 16 choose text or emoji presentation: kept).
_FILLERS = "\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\ufe00-\ufe0d\uffa0\U000e0100-\U000e01ef"
INVISIBLE = re.compile(f"[{_FORMAT}{_FILLERS}]")
# A zero-width (non-)joiner is kept between two characters of a script that shapes with it (not Latin, Greek or
# Cyrillic letters, digits or punctuation): Persian ZWNJ, Indic conjuncts, emoji ZWJ sequences.
_JOINER = re.compile(r"[\u200c\u200d]")
_SHAPING = re.compile(r"[^\W\d_A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]|[\U0001f000-\U0001faff\u2600-\u27bf]")
_SEPARATORS = re.compile("[\u2028\u2029]")
# What a check reads past: every invisible character, joiners included (normalise_for_check in the injection flags).
HIDDEN_FOR_CHECK = re.compile(f"[{_FORMAT}{_FILLERS}\u200c\u200d]")


def _keeps_joiner(text: str, at: int) -> bool:
    before, after = text[at - 1 : at], text[at + 1 : at + 2]
    return bool(before and after and _SHAPING.match(before) and _SHAPING.match(after))


def strip_invisible(text: str) -> tuple[str, int]:
    """(`text` without invisible formatting characters, how many were removed); line and paragraph separators
    become newlines (not counted). Nothing visible changes, so no fact is lost."""
    text = _SEPARATORS.sub("\n", text)
    removed = 0

    def drop(_match: re.Match[str]) -> str:
        nonlocal removed
        removed += 1
        return ""

    text = INVISIBLE.sub(drop, text)
    if _JOINER.search(text):
        kept = []
        for at, char in enumerate(text):
            if char in "\u200c\u200d" and not _keeps_joiner(text, at):
                removed += 1
                continue
            kept.append(char)
        text = "".join(kept)
    return text, removed


def visible(text: str) -> str:
    """`text` as `strip_invisible` leaves it."""
    return strip_invisible(text)[0]
