"""Text that is safe to store and to print on a terminal: no control characters, no ANSI or OSC escape sequences, no
invisible formatting characters (bidi controls, tag characters, zero-width ones: tools/text/invisible.py).

A document holding ESC[2J clears the reader's screen when a reply quotes it; OSC 0 retitles the window; OSC 8 turns
text into a hyperlink to wherever the document's author wants. Documents are stripped of all of these at ingest
(`tools.stores.ingest` counts what it removed per document) and the CLI strips whatever it prints (`reground.cli`), so a
collection written before this existed cannot reach the terminal either. Newlines and tabs are kept; a carriage
return becomes a newline (CR LF one newline), and a control that moves the cursor back over text (backspace, a
cursor movement) ends a paragraph: "20 EUR" overwritten by "200 EUR" reads as two statements, never as
"20 EUR200 EUR" or "20 EUR 200 EUR" (which pairs two figures in one sentence).
"""

from __future__ import annotations

import re
from typing import TextIO

from reground.tools.text.invisible import visible

# 7-bit and 8-bit forms: CSI (ESC [ or 0x9b) ... final byte; OSC (ESC ] or 0x9d) ... BEL or ST; DCS, SOS, PM, APC
# (ESC P/X/^/_ or 0x90/0x98/0x9e/0x9f) ... ST; any other ESC + one character; then single control characters.
# An unterminated OSC/DCS ends at a newline: a terminal would swallow more, a reader must not lose the document.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -~]?"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)
_NEWLINES = re.compile(r"\r\n?")
# Where text was overwritten: a paragraph break, so the text before and the text after are read as two statements
# ("20 EUR", then "200 EUR"), never one ("20 EUR 200 EUR" would pair the two figures in one sentence).
OVERWRITE_BREAK = "\n\n"
# What moves the cursor over text already written: backspace, DEL, and CSI cursor movements.
_OVERWRITES = re.compile(r"[\x08\x7f]|(?:\x1b\[|\x9b)[0-?]*[ -/]*[A-HSTfd`]")


def strip_terminal_controls(text: str) -> tuple[str, int]:
    """(`text` without control characters and escape sequences, how many were removed); keeps \\n and \\t, and
    a run of controls that overwrites text leaves a paragraph break, so the text on either side never merges."""
    text = _NEWLINES.sub("\n", text)
    removed = 0

    def drop(match: re.Match[str]) -> str:
        nonlocal removed
        removed += 1
        return "\0" if _OVERWRITES.fullmatch(match.group(0)) else ""

    cleaned = _SEQUENCE.sub(drop, text)
    if "\0" in cleaned:  # a paragraph break where the overwrite sat between two pieces of text
        cleaned = re.sub(r"(?<=\S)[ \t]*\0+[ \t]*(?=\S)", OVERWRITE_BREAK, cleaned).replace("\0", "")
    return cleaned, removed


def terminal_safe(text: str) -> str:
    """`text` as it may be printed: control characters, escape sequences and invisible formatting characters
    removed (a bidi override cannot make "toner.exe (download)" read otherwise)."""
    return visible(strip_terminal_controls(text)[0])


class SafeStream:
    """A text stream that strips control characters and escape sequences from everything written to it.

    `keep_cr`: let carriage returns through (stderr, where tqdm redraws its progress bar with them).
    """

    def __init__(self, stream: TextIO, *, keep_cr: bool = False) -> None:
        self._stream = stream
        self._keep_cr = keep_cr

    def write(self, text: str) -> int:
        if self._keep_cr and "\r" in text:
            safe = "\r".join(visible(_SEQUENCE.sub("", part)) for part in text.split("\r"))
        else:
            safe = terminal_safe(text)
        self._stream.write(safe)
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> object:
        """flush, fileno, isatty, encoding, buffer ...: the wrapped stream's."""
        return getattr(self._stream, name)
