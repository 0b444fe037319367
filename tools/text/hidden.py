"""Text hidden from a human reader: HTML comments, hidden elements, markdown comments, zero-width runs.

The loader strips it (a browser would not show it); the injection rules read it, since an order hidden there is
meant for a model, not a reader. Hidden means: the `hidden` attribute, `aria-hidden="true"`, or a style that
shows nothing (display none, visibility hidden, zero opacity or font size, zero width or height with the overflow
hidden, a clip to nothing), puts the text off-screen (a large negative offset or indent), or paints it white or
transparent on no background of its own (a credential request in white text was the reply). Styles
come from the element's `style` attribute, an old `<font color>`, or a class or id a `<style>` block hides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from reground.tools.text.colours import BLACK, PERCENT, WHITE, Colour, blend, contrast, parse_colour
from reground.tools.tuning.signals import HIDDEN_TEXT

DEFAULT_FONT_PT = 12.0  # fact: a browser's default font size (16 px)
PT_PER_PX = 0.75  # fact: CSS points per pixel

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
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
# An `@media` block for another medium than the screen (print, speech), its nested rules included; the opening of
# a screen one (or `@supports`), whose rules apply.
_OTHER_MEDIA = re.compile(r"@media\b(?![^{]*\b(?:screen|all)\b)[^{]*\{(?:[^{}]*\{[^{}]*\})*[^{}]*\}", re.I)
_AT_RULE_OPEN = re.compile(r"@(?:media|supports)\b[^{]*\{", re.I)
# A selector that applies only while the reader interacts (hover, focus) or to generated content: not the page shown.
_DYNAMIC_STATE = re.compile(
    r":(?:hover|focus|focus-within|focus-visible|active|visited|target|checked)\b|::?(?:before|after|selection|"
    r"placeholder|marker|first-line|first-letter)\b",
    re.I,
)
_COLOURING = re.compile(r"(?:^|[;\s{])(?:color|background(?:-color)?|font-size)\s*:", re.I)
_DECLARATION = re.compile(r"(?:^|;)\s*(?P<prop>[\w-]+)\s*:\s*(?P<value>[^;]*)")
_LENGTH = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(pt|px|em|rem|%)?(?:\s*!important)?")


def _colouring(style: str) -> bool:
    return bool(_COLOURING.search(style))


def _hides(style: str) -> bool:
    """Whether a declaration list (a `style` attribute, a CSS rule's body) shows nothing of the element's text."""
    if _SHOWS_NOTHING_RE.search(style):
        return True
    return bool(_ZERO_BOX.search(style) and _OVERFLOW_HIDDEN.search(style))


def _style_rules(soup: Any) -> list[tuple[str, str]]:
    """(selector, declarations) of every rule in the page's `<style>` blocks, in source order; rules inside an
    `@media` block other than screen or all are left out (a print style does not hide what a screen shows)."""
    rules: list[tuple[str, str]] = []
    for block in soup.find_all("style"):
        css = _CSS_COMMENT.sub("", block.get_text())
        css = _OTHER_MEDIA.sub("", css)
        css = _AT_RULE_OPEN.sub("", css)
        for selectors, body in _CSS_RULE.findall(css):
            for selector in selectors.split(","):
                selector = selector.strip()
                if selector and not _DYNAMIC_STATE.search(selector):
                    rules.append((selector, body))
    return rules


def _matched_declarations(soup: Any) -> dict[int, list[str]]:
    """id(element) -> the declarations of the style rules that select it (any selector the CSS engine reads:
    `p.legal`, `div > span`, `[data-x]`), in source order; a selector it cannot read selects nothing."""
    matched: dict[int, list[str]] = {}
    for selector, body in _style_rules(soup):
        if not (_hides(body) or _colouring(body)):
            continue
        try:
            tags = soup.select(selector)
        except Exception:
            continue
        for tag in tags:
            matched.setdefault(id(tag), []).append(body)
    return matched


def _declared(declarations: list[str], prop: str) -> str | None:
    """The last value a declaration list gives `prop` (`color`, `background`, `font-size`), or None."""
    value = None
    for block in declarations:
        for match in _DECLARATION.finditer(block):
            if match.group("prop").lower() == prop:
                value = re.sub(r"\s*!important\s*$", "", match.group("value").strip(), flags=re.I)
    return value


def _background(declarations: list[str], attrs: dict[str, Any]) -> tuple[Colour | None, bool]:
    """(the element's own background colour, whether it declares one at all): an image or a gradient is a
    background whose colour is unknown."""
    value = _declared(declarations, "background-color")
    shorthand = _declared(declarations, "background")
    if shorthand is not None:
        value = shorthand
    if value is None and attrs.get("bgcolor"):
        value = str(attrs["bgcolor"])
    if value is None:
        return None, False
    return parse_colour(value), True


def _font_pt(value: str | None, inherited: float) -> float:
    """A `font-size` value in points, relative units against the inherited size; unknown values inherit."""
    if not value:
        return inherited
    match = _LENGTH.fullmatch(value.strip().lower())
    if not match:
        return inherited
    number, unit = float(match.group(1)), match.group(2) or "px"
    scale = {"pt": 1.0, "px": PT_PER_PX, "em": inherited, "rem": DEFAULT_FONT_PT, "%": inherited / PERCENT}
    return number * scale.get(unit, inherited if unit else PT_PER_PX)


@dataclass(frozen=True)
class _Shown:
    """What an element passes to its children: its text colour, the background behind it, its font size."""

    colour: Colour
    background: Colour | None  # None: an image or a colour that cannot be read (its contrast is not judged)
    font_pt: float


def _faint(shown: _Shown) -> bool:
    """Whether text painted so reads as nothing: too small, or too close to the colour behind it."""
    if shown.font_pt <= HIDDEN_TEXT.font_pt:
        return True
    if shown.background is None:
        return False
    return contrast(shown.colour, shown.background) < HIDDEN_TEXT.min_contrast


def strip_hidden_html(markup: str) -> str:
    """`markup` without what a reader does not see (`hidden_html`)."""
    return hidden_html(markup)[0]


def hidden_html(markup: str) -> tuple[str, int]:
    """An HTML page without what a reader does not see, re-serialised for the loader to parse: comments, elements
    hidden by an attribute, their style or any style rule that selects them (their whole subtree), and the text of
    elements whose font is too small to read or whose colour is too close to the background behind it (their
    children are judged by their own colours), and how many characters of text went. One pass down the tree,
    so reading time is linear in its size."""
    from bs4 import BeautifulSoup, Comment, NavigableString, Tag

    soup = BeautifulSoup(markup, "html.parser")
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    matched = _matched_declarations(soup)
    page = _Shown(BLACK, WHITE, DEFAULT_FONT_PT)
    stack: list[tuple[Any, _Shown]] = [(soup, page)]
    dropped = 0
    while stack:
        node, inherited = stack.pop()
        faint = node is not soup and _faint(inherited)
        for child in list(node.children):
            if isinstance(child, NavigableString):
                if faint and child.strip() and type(child) is NavigableString:
                    dropped += len(child.strip())
                    child.extract()
                continue
            if not isinstance(child, Tag):
                continue
            attrs = child.attrs or {}
            declarations = [*matched.get(id(child), []), str(attrs.get("style", ""))]
            if _hidden_tag(child, declarations):
                dropped += len(child.get_text().strip())
                child.decompose()
                continue
            stack.append((child, _shown(child, declarations, inherited)))
    return str(soup), dropped


def _hidden_tag(tag: Any, declarations: list[str]) -> bool:
    """Hidden whatever its colours: the `hidden` attribute, `aria-hidden`, or a style that shows nothing."""
    attrs = tag.attrs or {}
    if "hidden" in attrs or str(attrs.get("aria-hidden", "")).lower() == "true":
        return True
    return any(_hides(block) for block in declarations if block)


def _shown(tag: Any, declarations: list[str], inherited: _Shown) -> _Shown:
    attrs = tag.attrs or {}
    colour_value = _declared(declarations, "color")
    if colour_value is None and tag.name == "font" and attrs.get("color"):
        colour_value = str(attrs["color"])
    colour = parse_colour(colour_value) if colour_value else None
    background, declared = _background(declarations, attrs)
    behind = inherited.background
    if declared:
        behind = None if background is None or inherited.background is None else blend(background, inherited.background)
    painted = inherited.colour if colour is None else colour
    if behind is not None and colour is not None:
        painted = blend(colour, behind)
    return _Shown(painted, behind, _font_pt(_declared(declarations, "font-size"), inherited.font_pt))


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


# Elements that never hold others. Every other unclosed element nests what follows, as the parser (bs4's
# html.parser) builds it: `<p>a<p>b` is two levels.
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
)


class HtmlTooDeepError(ValueError):
    """A page whose elements nest deeper than a reader's page ever does (a malformed or hostile file)."""


def check_depth(markup: str, limit: int = HIDDEN_TEXT.max_html_depth) -> None:
    """Raise HtmlTooDeepError when the page's elements nest deeper than `limit`; stops reading there, so a page of
    25,000 unclosed tags costs what its first `limit` do (parsing it whole grows with the square of its depth)."""
    from html.parser import HTMLParser

    class _Depth(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=False)
            self.open: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag in _VOID:
                return
            self.open.append(tag)
            if len(self.open) > limit:
                raise HtmlTooDeepError(
                    f"its elements nest more than {limit} levels deep (unclosed tags?); no page a person reads does"
                )

        def handle_endtag(self, tag: str) -> None:
            if tag in self.open:
                while self.open.pop() != tag:
                    pass

    reader = _Depth()
    reader.feed(markup)
    reader.close()


def strip_hidden(text: str) -> str:
    """Text without what a reader does not see: HTML comments, hidden elements, markdown comments, zero-width lines
    (the HTML loader strips it before parsing; the injection rules read the visible rest). An HTML page is read
    as HTML (`hidden_html`: any style rule's selector, faint or tiny text, nested elements); other text by
    patterns."""
    return strip_hidden_counted(text)[0]


def strip_hidden_counted(text: str) -> tuple[str, int]:
    """`strip_hidden`'s text, and how many characters of a page's hidden elements and faint text it dropped
    (comments and zero-width lines are not counted)."""
    text = text.removeprefix("\ufeff")
    dropped = 0
    if _HTML_PAGE.search(text):
        try:
            check_depth(text)
            text, dropped = hidden_html(text)
        except HtmlTooDeepError:  # the loader refuses such a page; other text is read by the patterns below
            pass
    text = HTML_COMMENT.sub(" ", text)
    text = HIDDEN_ELEMENT.sub(" ", text)
    text = MARKDOWN_COMMENT.sub("", text)
    return "\n".join(line for line in text.split("\n") if not ZERO_WIDTH.search(line)), dropped


# An inline element with attributes that can hide it, its body (at most INLINE_BODY_CHARS, no nested element of its
# own name) and its end: bounded, so a page of unclosed tags costs linear time.
INLINE_BODY_CHARS = HIDDEN_TEXT.inline_body_chars
_INLINE_ELEMENT = re.compile(
    r"<(?P<tag>[a-zA-Z][a-zA-Z0-9]*)\b(?P<attrs>[^<>]*\b(?:style|hidden|color|aria-hidden)\b[^<>]*)>"
    rf"(?P<body>(?:(?!</?(?P=tag)\b).){{0,{INLINE_BODY_CHARS}}}?)</(?P=tag)\s*>",
    re.DOTALL | re.IGNORECASE,
)
_ATTRIBUTE = re.compile(r"([\w:-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>]+))")


def inline_element_hidden(attrs: str) -> bool:
    """Whether an element with these attributes (raw markup inside a markdown page) shows its text to no reader:
    hidden by attribute or style, too small, or too close to white (the page's background unless it sets its own)."""
    values = {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None) for m in _ATTRIBUTE.finditer(attrs)}
    if re.search(r"(?:^|\s)hidden(?:\s|=|$)", attrs) or values.get("aria-hidden", "").lower() == "true":
        return True
    style = values.get("style", "")
    if style and _hides(style):
        return True
    declarations = [style]
    colour = _declared(declarations, "color") or values.get("color")
    background, declared = _background(declarations, values)
    shown = _Shown(
        parse_colour(colour) or BLACK if colour else BLACK,
        (background if declared else WHITE),
        _font_pt(_declared(declarations, "font-size"), DEFAULT_FONT_PT),
    )
    if shown.background is not None:
        shown = _Shown(blend(shown.colour, shown.background), shown.background, shown.font_pt)
    return _faint(shown)


def strip_hidden_inline(text: str) -> str:
    """Markdown prose without the inline HTML elements a reader would not see (their text too)."""
    return _strip_inline(text)[0]


def _strip_inline(text: str) -> tuple[str, int]:
    """`strip_hidden_inline`'s text and the characters of text (tags not counted) it dropped."""
    if "<" not in text:
        return text, 0
    dropped = 0

    def drop(match: re.Match[str]) -> str:
        nonlocal dropped
        if not inline_element_hidden(match.group("attrs")):
            return match.group(0)
        dropped += len(re.sub(r"<[^>]*>", "", match.group("body")).strip())
        return " "

    return _INLINE_ELEMENT.sub(drop, text), dropped


def strip_hidden_prose(text: str) -> tuple[str, int]:
    """A document's text without the inline HTML elements a reader would not see, outside its code blocks (a page
    showing styled HTML in a fence keeps it), and how many characters went: what ingest does to every document,
    whatever its format, before it is chunked."""
    if "<" not in text or not _INLINE_ELEMENT.search(text):
        return text, 0
    from reground.tools.text.sentences import line_kinds

    out: list[str] = []
    prose: list[str] = []
    dropped = 0

    def flush() -> None:
        nonlocal dropped
        if prose:
            kept, count = _strip_inline("\n".join(prose))
            dropped += count
            out.append(kept)
            prose.clear()

    for line, kind in line_kinds(text):
        if kind == "text":
            prose.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out), dropped


def markup_hidden_segments(text: str) -> list[str]:
    """The text of HTML comments, hidden elements and markdown comments, whitespace-normalised (no zero-width runs)."""
    found = [m.group(0)[len("<!--") :].removesuffix("-->") for m in HTML_COMMENT.finditer(text)]
    found += [re.sub(r"<[^>]+>", " ", m.group("body")) for m in HIDDEN_ELEMENT.finditer(text)]
    found += [next((g for g in m.groups() if g), "") for m in MARKDOWN_COMMENT.finditer(text)]
    return [" ".join(f.split()) for f in found]
