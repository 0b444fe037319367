"""Text hidden from a human reader: HTML comments, hidden elements, markdown comments, zero-width runs.

The loader strips it (a browser would not show it); the injection rules read it, since an order hidden there is
meant for a model, not a reader.
"""

from __future__ import annotations

import re

# Zero-width and invisible format characters: text hidden between them (or made of them) is not for readers.
ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e]")
HTML_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
MARKDOWN_COMMENT = re.compile(
    r"^[ \t]*\[(?://|comment|_)\]:\s*#?\s*(?:\((.*?)\)|\"(.*?)\"|'(.*?)'|<(.*?)>)?[ \t]*$", re.MULTILINE
)
# An element the browser does not show: `hidden`, `aria-hidden`, `display:none`, `visibility:hidden`,
# zero font size, zero opacity. Matched on raw markup (markdown may carry inline HTML).
HIDDEN_ELEMENT = re.compile(
    r"<(?P<tag>[a-zA-Z][a-zA-Z0-9]*)\b(?P<attrs>[^>]*?"
    r"(?:\bhidden\b|aria-hidden\s*=\s*[\"']?true|display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0"
    r"|opacity\s*:\s*0(?:\.0+)?\s*[;\"'])[^>]*)>(?P<body>.*?)</(?P=tag)\s*>",
    re.DOTALL | re.IGNORECASE,
)


def hidden_segments(text: str) -> list[str]:
    """Text hidden from a human reader: HTML comments, hidden elements, markdown comments, zero-width runs."""
    found: list[str] = []
    for match in HTML_COMMENT.finditer(text):
        found.append(match.group(0)[len("<!--") :].removesuffix("-->").strip())
    for match in HIDDEN_ELEMENT.finditer(text):
        found.append(re.sub(r"<[^>]+>", " ", match.group("body")).strip())
    for match in MARKDOWN_COMMENT.finditer(text):
        found.append(next((g for g in match.groups() if g), "").strip())
    # Zero-width characters have no place in policy text (none in doc2dial's 274 pages or the HR set): a line
    # that carries them is hidden text, read both ways (as word separators, and as splitters inside words).
    for line in text.removeprefix("\ufeff").splitlines():
        if ZERO_WIDTH.search(line):
            found.append(ZERO_WIDTH.sub(" ", line))
            if ZERO_WIDTH.sub("", line).split() != ZERO_WIDTH.sub(" ", line).split():
                found.append(ZERO_WIDTH.sub("", line))
    return [" ".join(f.split()) for f in found if f.strip()]


def strip_hidden(text: str) -> str:
    """Text without what a reader does not see: HTML comments, hidden elements, markdown comments, zero-width lines
    (the HTML loader strips it before parsing; the injection rules read the visible rest)."""
    text = HTML_COMMENT.sub(" ", text.removeprefix("\ufeff"))
    text = HIDDEN_ELEMENT.sub(" ", text)
    text = MARKDOWN_COMMENT.sub("", text)
    return "\n".join(line for line in text.split("\n") if not ZERO_WIDTH.search(line))


def markup_hidden_segments(text: str) -> list[str]:
    """The text of HTML comments, hidden elements and markdown comments, whitespace-normalised (no zero-width runs)."""
    found = [m.group(0)[len("<!--") :].removesuffix("-->") for m in HTML_COMMENT.finditer(text)]
    found += [re.sub(r"<[^>]+>", " ", m.group("body")) for m in HIDDEN_ELEMENT.finditer(text)]
    found += [next((g for g in m.groups() if g), "") for m in MARKDOWN_COMMENT.finditer(text)]
    return [" ".join(f.split()) for f in found]
