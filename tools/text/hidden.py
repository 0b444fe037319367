"""Text hidden from a human reader: HTML comments, hidden elements, markdown comments, zero-width runs.

The loader strips it (a browser would not show it); the injection rules read it, since an order hidden there is
meant for a model, not a reader. Hidden means: the `hidden` attribute, `aria-hidden="true"`, or a style that
shows nothing (display none, visibility hidden, zero opacity or font size, zero width or height with the overflow
hidden, a clip to nothing), puts the text off-screen (a large negative offset or indent), or paints it white or
transparent on no background of its own (issue 39: a credential request in white text was the reply). Styles
come from the element's `style` attribute, an old `<font color>`, or a class or id a `<style>` block hides.
"""

from __future__ import annotations

import re
from typing import Any

# Zero-width and invisible format characters: text hidden between them (or made of them) is not for readers.
ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e]")
HTML_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
MARKDOWN_COMMENT = re.compile(
    r"^[ \t]*\[(?://|comment|_)\]:\s*#?\s*(?:\((.*?)\)|\"(.*?)\"|'(.*?)'|<(.*?)>)?[ \t]*$", re.MULTILINE
)
# A CSS declaration list that shows nothing of its element's text. White or transparent text counts as hidden
# only with no background of its own (`_hides`).
_SHOWS_NOTHING = (
    r"display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse)|opacity\s*:\s*0*(?:\.0+)?\s*(?:[;!\"']|$)"
    r"|font-size\s*:\s*0*(?:\.0+)?(?:px|pt|em|rem|%)?\s*(?:[;!\"']|$)|clip\s*:\s*rect\(\s*0[^)]*\)"
    r"|clip-path\s*:\s*(?:inset\(\s*50%|circle\(\s*0)|transform\s*:\s*scale\(\s*0(?:\.0+)?\s*\)"
    r"|(?:^|[;\s\"'])(?:left|top|right|bottom|margin-left|margin-top|text-indent)\s*:\s*-\d{3,}"
)
_ZERO_BOX = re.compile(r"(?:^|[;\s\"'])(?:width|height|max-width|max-height)\s*:\s*0(?:px)?\s*(?:[;!\"']|$)", re.I)
_OVERFLOW_HIDDEN = re.compile(r"overflow\s*:\s*hidden", re.I)
_INVISIBLE_COLOUR = re.compile(
    r"(?:^|[;\s\"'])color\s*:\s*(?:white|transparent|#f{3}(?:f{3})?\b|rgba?\(\s*255\s*,\s*255\s*,\s*255\s*"
    r"(?:,\s*[\d.]+\s*)?\)|rgba\([^)]*,\s*0*(?:\.0+)?\s*\)|hsla?\(\s*\d+\s*,\s*\d+%\s*,\s*100%)",
    re.IGNORECASE,
)
_BACKGROUND = re.compile(r"background(?:-color)?\s*:", re.IGNORECASE)
_SHOWS_NOTHING_RE = re.compile(_SHOWS_NOTHING, re.IGNORECASE)
# An element the browser does not show, matched on raw markup (markdown may carry inline HTML); white text, which
# depends on the element's background, is read as HTML only (`strip_hidden_html`).
HIDDEN_ELEMENT = re.compile(
    r"<(?P<tag>[a-zA-Z][a-zA-Z0-9]*)\b(?P<attrs>[^>]*?"
    rf"(?:\bhidden\b|aria-hidden\s*=\s*[\"']?true|{_SHOWS_NOTHING})[^>]*)>(?P<body>.*?)</(?P=tag)\s*>",
    re.DOTALL | re.IGNORECASE,
)
# Read as HTML: a page, or markup with an element whose attributes can hide it (plain text keeps its characters).
_HTML_PAGE = re.compile(
    r"<(?:html|body)\b|<[a-zA-Z][a-zA-Z0-9]*\b[^>]*\b(?:style|class|id|hidden|aria-hidden|color)\b", re.IGNORECASE
)
_CSS_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")


def _hides(style: str) -> bool:
    """Whether a declaration list (a `style` attribute, a CSS rule's body) shows nothing of the element's text."""
    if _SHOWS_NOTHING_RE.search(style):
        return True
    if _ZERO_BOX.search(style) and _OVERFLOW_HIDDEN.search(style):
        return True
    return bool(_INVISIBLE_COLOUR.search(style)) and not _BACKGROUND.search(style)


def _hidden_selectors(soup: Any) -> tuple[set[str], set[str]]:
    """(classes, ids) a `<style>` block hides with a simple `.class` or `#id` selector."""
    classes: set[str] = set()
    ids: set[str] = set()
    for block in soup.find_all("style"):
        for selectors, body in _CSS_RULE.findall(block.get_text()):
            if not _hides(body):
                continue
            for selector in selectors.split(","):
                name = selector.strip().split()[-1] if selector.strip() else ""
                if re.fullmatch(r"\.[\w-]+", name):
                    classes.add(name[1:])
                elif re.fullmatch(r"#[\w-]+", name):
                    ids.add(name[1:])
    return classes, ids


def _hidden_tag(tag: Any, classes: set[str], ids: set[str]) -> bool:
    attrs = tag.attrs or {}
    if "hidden" in attrs or str(attrs.get("aria-hidden", "")).lower() == "true":
        return True
    if _hides(str(attrs.get("style", ""))):
        return True
    colour = str(attrs.get("color", "")).lower() if tag.name == "font" else ""
    if colour in ("white", "#fff", "#ffffff", "transparent"):
        return True
    return bool(set(attrs.get("class") or []) & classes) or str(attrs.get("id", "")) in ids


def strip_hidden_html(markup: str) -> str:
    """An HTML page without the elements a reader does not see (their whole subtree, nested ones included) and
    without comments; re-serialised for the loader to parse."""
    from bs4 import BeautifulSoup, Comment

    soup = BeautifulSoup(markup, "html.parser")
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    classes, ids = _hidden_selectors(soup)
    for tag in soup.find_all(True):
        if getattr(tag, "decomposed", False) or tag.attrs is None:
            continue
        if _hidden_tag(tag, classes, ids):
            tag.decompose()
    return str(soup)


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
    (the HTML loader strips it before parsing; the injection rules read the visible rest). An HTML page is read
    as HTML (`strip_hidden_html`: a class a style block hides, nested elements); other text by patterns."""
    text = text.removeprefix("\ufeff")
    if _HTML_PAGE.search(text):
        text = strip_hidden_html(text)
    text = HTML_COMMENT.sub(" ", text)
    text = HIDDEN_ELEMENT.sub(" ", text)
    text = MARKDOWN_COMMENT.sub("", text)
    return "\n".join(line for line in text.split("\n") if not ZERO_WIDTH.search(line))


def markup_hidden_segments(text: str) -> list[str]:
    """The text of HTML comments, hidden elements and markdown comments, whitespace-normalised (no zero-width runs)."""
    found = [m.group(0)[len("<!--") :].removesuffix("-->") for m in HTML_COMMENT.finditer(text)]
    found += [re.sub(r"<[^>]+>", " ", m.group("body")) for m in HIDDEN_ELEMENT.finditer(text)]
    found += [next((g for g in m.groups() if g), "") for m in MARKDOWN_COMMENT.finditer(text)]
    return [" ".join(f.split()) for f in found]
