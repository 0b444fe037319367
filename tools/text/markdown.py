"""Documentation markdown as blocks a reader sees: headings (with their path), paragraphs, code, lists and tables.

Documentation generators wrap content in site markup a reply must not copy: mkdocs/material admonitions
(`!!! note "Title"`, `??? tip`) and content tabs (`=== "Python"`), pymdown blocks (`/// note | Title` ... `///`),
Docusaurus admonitions and language-conditional blocks (`:::note` ... `:::`, `:::python` ... `:::`) and tabs
(`<TabItem label="Python">`), attribute lists (`{ #anchor }`), autoref macros (`@[ClassName]`) and anchors
(`[](){#id}`), code annotation markers (`# (1)!`), MDX imports, reference links, inline HTML, and MyST's directives
and roles (text/myst.py). Each container becomes the blocks it holds, labelled: an admonition's kind or title leads
its first paragraph ("Tip: ..."), a tab's or language block's label becomes the blocks' `variant`, which chunks carry
as metadata a scope (or the conversation) can select. Links become their text; their targets are kept per block.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from reground.tools.text import myst, templates
from reground.tools.text.hidden import strip_hidden_inline
from reground.tools.text.sentences import line_kinds

Kind = str  # "heading" | "paragraph" | "code" | "list" | "table"
BLOCK_INDENT = 4  # fact: the indent of an admonition's or a content tab's body in mkdocs markdown
FENCE_MIN = 3  # fact: a code fence is at least three backticks or tildes
LIST_INDENT = 2  # fact: a nested list item is indented two spaces per level in the text chunks carry
STRUCTURED_KINDS = frozenset({"code", "list", "table"})  # blocks a sentence introduces and that are never split

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_COLON_CLOSE = re.compile(r"^\s*:{3,}\s*$")
_THEMATIC_BREAK = re.compile(r"^\s{0,3}(?:(?:-\s*){3,}|(?:\*\s*){3,}|(?:_\s*){3,})$")
# Python-Markdown's admonition header: a kind, more CSS class words, an optional quoted title (quotes may nest).
_INDENTED_OPEN = re.compile(
    r'^(?P<indent>\s*)(?:!!!|\?\?\?\+?)\s*(?P<kind>[\w-]+)?(?:[ \t]+[\w-]+)*(?:\s+"(?P<title>.*)")?\s*$'
)
_TAB_OPEN = re.compile(r'^(?P<indent>\s*)===\+?\s+"(?P<label>[^"]+)"\s*$')
_SLASH_OPEN = re.compile(r"^\s*///\s*(?P<kind>[\w-]+)\s*(?:\|\s*(?P<title>.*?))?\s*$")
_SLASH_CLOSE = re.compile(r"^\s*///\s*$")
# `:::tip`, `:::tip Title`, `::: tip[Title]` (Docusaurus, Starlight), `:::{note}` (MyST), `::: warning {.x}`.
_COLON_OPEN = re.compile(
    r"^\s*(?P<colons>:{3,})\s*(?P<kind>\{[\w:.-]+\}|[\w-]+)(?:\[(?P<bracketed>[^\]]*)\])?(?:\s*\{[^{}]*\})?"
    r"(?:\s+(?P<title>.*?))?\s*$"
)
_TABITEM_OPEN = re.compile(r"^\s*<TabItem\b[^>]*?\blabel=[\"'](?P<label>[^\"']+)[\"'][^>]*>\s*$", re.I)
_TABITEM_CLOSE = re.compile(r"^\s*</TabItem>\s*$", re.I)
_TABS_LINE = re.compile(r"^\s*</?Tabs\b[^>]*>\s*$", re.I)
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,3}[.)])\s+\S")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_SKIPPED_LINE = re.compile(r"^\s*(--8<--|<!--.*-->\s*$|\[[^\]]+\]:\s+\S+)")  # snippet includes, comments, link defs
# mkdocstrings' `::: package.module.Name` (and its indented options): the build renders the API there from the code.
_AUTODOC = re.compile(r"^:::[ \t]+[A-Za-z_]\w*(?:\.\w+)+[ \t]*$")
# An MDX page's ESM statement (Docusaurus reads .md as MDX too): `import X from './x.mdx'`, `export const x = ...`;
# it runs with the build and, like its paragraph, is no text.
_ESM_LINE = re.compile(
    r"""^(import\s+(?:[\w*{}\s,$]+\s+from\s+)?['"][^'"]+['"];?\s*$|export\s+(?:const|let|var|function|default|\{))"""
)
_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.S)

# Code blocks that show a terminal session; sites colour them with inline HTML (`<font color=...>`), which goes.
TERMINAL_LANGUAGES = frozenset({"console", "shell", "sh", "bash", "shell-session", "pwsh-session", "text", ""})
# Code blocks a site renders as a picture (their source is not text a reader sees).
DIAGRAM_LANGUAGES = frozenset({"mermaid", "plantuml", "dot", "graphviz", "svgbob", "ditaa"})
# The names of the languages or platforms a language-conditional block (`:::python`) stands for.
LANGUAGE_LABELS = {
    "python": "Python",
    "py": "Python",
    "js": "JavaScript",
    "javascript": "JavaScript",
    "ts": "TypeScript",
    "typescript": "TypeScript",
    "java": "Java",
    "go": "Go",
    "rust": "Rust",
    "csharp": "C#",
    "kotlin": "Kotlin",
    "swift": "Swift",
    "ruby": "Ruby",
    "php": "PHP",
}


@dataclass(frozen=True)
class Block:
    """One block of a page as a reader sees it. `text` is normalised for reading (a code block: fenced, verbatim);
    `path` the headings above it; `variant` the tab or language block it sits in; `links` its links' targets."""

    kind: Kind
    text: str
    path: tuple[str, ...] = ()
    level: int = 0
    variant: str = ""
    links: tuple[str, ...] = field(default_factory=tuple)
    continued: bool = False  # a later part of a code block cut for its size: it introduces nothing, joins nothing


# --- inline markup ----------------------------------------------------------------------------------------------

_CODE_SPAN = myst.CODE_SPAN
# A link's destination: bare (one level of parentheses inside) or in angle brackets (`[term](<#my term>)`).
_DESTINATION = r"(<[^<>\n]*>|[^()\s]*(?:\([^()]*\))?[^()\s]*)"
_IMAGE = re.compile(rf"!\[([^\]]*)\]\(\s*{_DESTINATION}(?:\s+\"[^\"]*\")?\s*\)")
# A link's text may hold one level of brackets (`[[no-]color](./cli.md#no-color)`).
_LINK = re.compile(rf"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*{_DESTINATION}(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[([^\]]*)\]")
_AUTOREF = re.compile(r"@\[([^\]]+)\]")
# An attribute list: `{ #anchor }`, `{: .class }`, `{ width="500" }` (Python-Markdown, kramdown, Hugo).
_ATTR_LIST = re.compile(r"\s*\{\s*(?:[:#.][^{}]*|[\w-]+=[^{}]*)\}")
_HTML_DROP = re.compile(r"<(script|style|svg|iframe)\b.*?</\1\s*>|<img\b[^>]*>|<!--.*?-->", re.S | re.I)
_HTML_TAG = re.compile(r"</?[A-Za-z][\w:-]*(?:\s+[^<>]*?)?\s*/?>")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS = re.compile(
    r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])|(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])"
)
# mkdocs-material's code annotation marker, a comment ending a code line (`# (1)!`, `// (2)!`): the site shows a
# button there, a reply would show the marker.
_ANNOTATION = r"[ \t]*(?:#|//|--|;|%|/\*|<!--)[ \t]*\(\d{1,2}\)![ \t]*(?:\*/|-->)?[ \t]*"
_CODE_ANNOTATION_LINE = re.compile(rf"^{_ANNOTATION}\n", re.M)
CODE_ANNOTATION = re.compile(rf"{_ANNOTATION}$", re.M)
# A fence's attribute-list info string (pymdown superfences: ```` ``` { .python title="app.py" } ````): its language
# is the first class.
_FENCE_ATTRIBUTES = re.compile(r"^\{\s*\.(?P<language>[\w+#-]+)")
_ICON = re.compile(r"(?<!\S):(?:material|octicons|fontawesome|simple)-[\w-]+:(?!\S)")


_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_HTML_CODE = re.compile(r"<code\b[^>]*>(.*?)</code\s*>", re.S | re.I)


def _as_code_span(inner: str) -> str:
    """An HTML `<code>` element's content as a markdown code span: its tags gone, its entities read."""
    shown = " ".join(templates.rendered_characters(_HTML_TAG.sub("", inner)).split())
    if not shown:
        return ""
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", shown)), default=0) + 1)
    return f"{ticks} {shown} {ticks}" if ticks != "`" else f"`{shown}`"


def normalise_inline(text: str) -> tuple[str, tuple[str, ...]]:
    """(text as a reader reads it, link targets): links become their text, macros their name, markup goes; code
    spans are kept as they are (`Query(max_length=50)` is the answer, not markup)."""
    links: list[str] = []
    spans: list[str] = []

    def keep_code(match: re.Match[str] | str) -> str:
        spans.append(match if isinstance(match, str) else match.group(0))
        return f"\x00{len(spans) - 1}\x00"

    out = _CODE_SPAN.sub(keep_code, myst.roles_as_text(text))
    if "<code" in out:  # inline HTML code (`<code>Array&lt;T&gt;</code>`): a code span of what it shows
        out = _HTML_CODE.sub(lambda m: keep_code(_as_code_span(m.group(1))), out)
    if "\\" in out:  # a backslash escape is the character itself, never markup (`\\*not\\*` is no emphasis)
        out = _ESCAPED.sub(lambda m: keep_code(m.group(1)), out)
    out = templates.strip_templates(templates.template_links(out))
    out = templates.autolinks(out, links)
    out = strip_hidden_inline(out)  # inline HTML a reader does not see (white, 1px, display:none) is no text
    out = _HTML_DROP.sub("", out)
    out = _IMAGE.sub("", out)

    def link(match: re.Match[str]) -> str:
        target = match.group(2).strip().removeprefix("<").removesuffix(">")
        if target:
            links.append(target)
        return match.group(1)

    out = _LINK.sub(link, out)
    out = _REF_LINK.sub(lambda m: m.group(1), out)
    out = _AUTOREF.sub(lambda m: m.group(1), out)
    out = _ATTR_LIST.sub("", out)
    out = _HTML_TAG.sub("", out)
    out = _BOLD.sub(lambda m: m.group(2), out)
    out = _EMPHASIS.sub(lambda m: m.group(1) or m.group(2), out)
    out = _ICON.sub("", out)
    out = templates.rendered_characters(out)
    out = re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], out)
    return " ".join(out.split()), tuple(links)


# --- block structure --------------------------------------------------------------------------------------------


def _indent(line: str) -> int:
    expanded = line.expandtabs(BLOCK_INDENT)
    return len(expanded) - len(expanded.lstrip()) if line.strip() else sys.maxsize


def _dedent(lines: list[str], by: int) -> list[str]:
    return [line[by:] if line[:by].strip() == "" else line.lstrip() for line in lines]


def _indented_body(lines: list[str], start: int, indent: int) -> int:
    """The end (exclusive) of the body a container opened at `indent` holds: the following lines indented deeper,
    blank lines between them included."""
    end = start
    last = start
    while end < len(lines):
        line = lines[end]
        if line.strip() and _indent(line) <= indent:
            break
        if line.strip():
            last = end + 1
        end += 1
    return last


def _fenced_end(lines: list[str], start: int, opener: re.Pattern[str], closer: Callable[[str], bool]) -> int:
    """The index of the line that closes a block opened before `start` (nested openers of the same kind count)."""
    depth = 0
    in_code = ""
    for i in range(start, len(lines)):
        fence = _FENCE.match(lines[i])
        if fence and (not in_code or fence.group("fence").startswith(in_code)):
            in_code = "" if in_code else fence.group("fence")[:FENCE_MIN]
            continue
        if in_code:
            continue
        if closer(lines[i]):
            if depth == 0:
                return i
            depth -= 1
        elif opener.match(lines[i]):
            depth += 1
    return len(lines)


class _Parser:
    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.path: list[tuple[int, str]] = []

    def heading_path(self) -> tuple[str, ...]:
        return tuple(text for _, text in self.path)

    def add(self, kind: Kind, text: str, variant: str, links: tuple[str, ...] = (), level: int = 0) -> None:
        if text.strip():
            self.blocks.append(Block(kind, text, self.heading_path(), level, variant, links))

    def labelled(self, label: str, lines: list[str], variant: str) -> None:
        """A container's content, its first paragraph led by the label ("Tip: ...")."""
        first = len(self.blocks)
        self.parse(lines, variant)
        if not label:
            return
        for i in range(first, len(self.blocks)):
            if self.blocks[i].kind == "paragraph":
                text = self.blocks[i].text
                lead = label if label.endswith((":", ".", "?", "!")) else f"{label}:"
                self.blocks[i] = replace(self.blocks[i], text=f"{lead} {text}")
                return
        self.blocks.insert(first, Block("paragraph", f"{label}:", self.heading_path(), 0, variant))

    def parse(self, lines: list[str], variant: str = "") -> None:
        i = 0
        paragraph: list[str] = []

        def flush() -> None:
            if paragraph:
                text, links = normalise_inline(" ".join(line.strip() for line in paragraph))
                self.add("paragraph", text, variant, links)
                paragraph.clear()

        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if not stripped:
                flush()
                i += 1
                continue
            if _SKIPPED_LINE.match(line) or _TABS_LINE.match(line) or myst.SKIPPED_LINE.match(line):
                flush()
                i += 1
                continue
            if _AUTODOC.match(line):
                flush()
                i = _indented_body(lines, i + 1, _indent(line))
                continue
            if not paragraph and _ESM_LINE.match(line):
                while i < len(lines) and lines[i].strip():
                    i += 1
                continue
            fence = _FENCE.match(line)
            if fence:
                flush()
                marker, info = fence.group("fence"), fence.group("info").strip()
                body: list[str] = []
                i += 1
                while i < len(lines):
                    close = lines[i].strip()
                    if close.startswith(marker[0] * len(marker)) and not close.strip(marker[0]):
                        i += 1
                        break
                    body.append(lines[i])
                    i += 1
                indent = len(fence.group("indent"))
                named = myst.directive(info)
                if named is not None and named.name not in myst.CODE:  # a MyST directive: content, not code
                    self._directive(named, myst.content_lines(_dedent(body, indent)), variant)
                    continue
                if named is not None:  # ```{code-block} python
                    body, info = myst.content_lines(body), named.argument
                code = "\n".join(_dedent(body, indent)).strip("\n")
                attributes = _FENCE_ATTRIBUTES.match(info)
                language = attributes.group("language") if attributes else (info.split()[0] if info else "")
                language = "" if language.startswith("{") else language
                if (
                    language.lower() in DIAGRAM_LANGUAGES
                ):  # a diagram's source: the site draws it, a reader never reads it
                    continue
                if language.lower() in TERMINAL_LANGUAGES:  # a recorded terminal session, coloured with HTML
                    code = _HTML_TAG.sub("", code)
                code = CODE_ANNOTATION.sub("", _CODE_ANNOTATION_LINE.sub("", code))
                title = re.search(r"title=[\"']([^\"']+)[\"']", info)
                label = f' title="{title.group(1)}"' if title else ""  # the file it shows, in the fence's info
                written = code_fence(code)
                self.add("code", f"{written}{language}{label}\n{code}\n{written}", variant)
                continue
            heading = _ATX.match(line)
            if heading:
                flush()
                level = len(heading.group(1))
                text, _ = normalise_inline(heading.group(2))
                self.path = [(lvl, t) for lvl, t in self.path if lvl < level] + [(level, text)]
                self.add("heading", text, variant, level=level)
                i += 1
                continue
            if paragraph and _SETEXT.match(line) and len(paragraph) == 1:
                level = 1 if stripped.startswith("=") else 2
                text, _ = normalise_inline(paragraph[0])
                paragraph.clear()
                self.path = [(lvl, t) for lvl, t in self.path if lvl < level] + [(level, text)]
                self.add("heading", text, variant, level=level)
                i += 1
                continue
            if not paragraph and _JSX_OPEN.match(line):
                end = _jsx_tag_end(lines, i)
                if end > i:  # a component's tag spread over lines: its props (code={`...`}) are no text
                    i = end + 1
                    continue
            if not paragraph and (_THEMATIC_BREAK.match(line) or _COLON_CLOSE.match(line)):
                flush()  # a rule between sections, or a container's close whose opening a list item held: no text
                i += 1
                continue
            opened = self._container(lines, i, variant)
            if opened is not None:
                flush()
                i = opened
                continue
            if _LIST_ITEM.match(line) and not paragraph:
                flush()
                i = self._list(lines, i, variant)
                continue
            header = i + 1 < len(lines) and bool(_TABLE_RULE.match(lines[i + 1]))
            if _TABLE_ROW.match(line) and (not paragraph or header):  # a header row and its rule interrupt a paragraph
                flush()
                end = i
                while end < len(lines) and _TABLE_ROW.match(lines[end]):
                    end += 1
                rows = [self._table_row(row) for row in lines[i:end] if not _TABLE_RULE.match(row)]
                if len(rows) >= 1:
                    width = max(len(r) for r in rows)
                    rendered = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in rows]
                    rendered.insert(1, "|" + "---|" * width)
                    self.add("table", "\n".join(rendered), variant)
                i = end
                continue
            paragraph.append(line)
            i += 1
        flush()

    def _container(self, lines: list[str], i: int, variant: str) -> int | None:
        """Parse a container opening at line i (its content, labelled); the index after it, or None."""
        line = lines[i]
        tab = _TAB_OPEN.match(line)
        if tab:
            indent = len(tab.group("indent"))
            end = _indented_body(lines, i + 1, indent)
            inner = _dedent(lines[i + 1 : end], indent + BLOCK_INDENT)
            self.parse(inner, _join_variant(variant, tab.group("label")))
            return end
        admonition = _INDENTED_OPEN.match(line)
        if admonition:
            indent = len(admonition.group("indent"))
            end = _indented_body(lines, i + 1, indent)
            body = _dedent(lines[i + 1 : end], indent + BLOCK_INDENT)
            self.labelled(_label(admonition.group("kind"), admonition.group("title")), body, variant)
            return end
        slash = _SLASH_OPEN.match(line)
        if slash:
            end = _fenced_end(lines, i + 1, _SLASH_OPEN, lambda s: bool(_SLASH_CLOSE.match(s)))
            self.labelled(_label(slash.group("kind"), slash.group("title")), lines[i + 1 : end], variant)
            return end + 1
        colon = _COLON_OPEN.match(line)
        if colon:
            colons = colon.group("colons")
            # Only a fence of as many colons nests (`::::{grid}` holds `:::{grid-item}` ... `:::`).
            same = re.compile(rf"^\s*{colons}(?!:)\s*\S")
            end = _fenced_end(lines, i + 1, same, lambda s: s.strip() == colons)
            kind = colon.group("kind").lower()
            named = myst.directive(f"{kind} {colon.group('title') or ''}")
            if named is not None:
                self._directive(named, myst.content_lines(lines[i + 1 : end]), variant)
            elif kind in LANGUAGE_LABELS:
                self.parse(lines[i + 1 : end], _join_variant(variant, LANGUAGE_LABELS[kind]))
            else:
                title = colon.group("bracketed") or colon.group("title")
                self.labelled(_label(kind, title), lines[i + 1 : end], variant)
            return end + 1
        tab_item = _TABITEM_OPEN.match(line)
        if tab_item:
            end = _fenced_end(lines, i + 1, _TABITEM_OPEN, lambda s: bool(_TABITEM_CLOSE.match(s)))
            self.parse(lines[i + 1 : end], _join_variant(variant, tab_item.group("label")))
            return end + 1
        return None

    def _directive(self, named: myst.Directive, lines: list[str], variant: str) -> None:
        """A MyST directive's content as the rendered page shows it (text/myst.py says what each one is)."""
        if named.name in myst.HIDDEN:
            return
        if named.name in myst.TABS:
            self.parse(lines, _join_variant(variant, named.argument or named.name))
            return
        self.labelled(myst.label(named), lines, variant)

    def _list(self, lines: list[str], i: int, variant: str) -> int:
        """A list: its items (each on one line, marker kept, nested items indented by two spaces per level)."""
        base = _indent(lines[i])
        items: list[str] = []
        links: list[str] = []
        current: list[str] = []
        depth = 0

        def close() -> None:
            if current:
                text, found = normalise_inline(" ".join(current))
                items.append(" " * LIST_INDENT * depth + text)
                links.extend(found)
                current.clear()

        while i < len(lines):
            line = lines[i]
            if not line.strip():
                following = next((ln for ln in lines[i + 1 :] if ln.strip()), "")
                if following and (
                    (_LIST_ITEM.match(following) and _indent(following) >= base) or _indent(following) > base
                ):
                    if _FENCE.match(following):
                        break
                    i += 1
                    continue
                break
            item = _LIST_ITEM.match(line)
            if item and _indent(line) >= base:
                close()
                depth = (_indent(line) - base) // LIST_INDENT
                marker = item.group(2)
                current.append(f"{'-' if marker in '-*+' else marker} {line.strip()[len(marker) :].strip()}")
            elif _indent(line) > base and not _FENCE.match(line):
                container = _COLON_OPEN.match(line)  # an admonition inside the item: its label leads its text
                if container:
                    title = container.group("bracketed") or container.group("title")
                    current.append(f"{_label(container.group('kind').strip('{}'), title)}:")
                elif not _COLON_CLOSE.match(line):
                    current.append(line.strip())
            else:
                break
            i += 1
        close()
        self.add("list", "\n".join(items), variant, tuple(links))
        return i

    @staticmethod
    def _table_row(row: str) -> list[str]:
        cells = row.strip().strip("|").split("|")
        return [normalise_inline(cell)[0] for cell in cells]


_JSX_OPEN = re.compile(r"^\s*<[A-Z][\w.]*(?:\s|$)")


def _jsx_tag_end(lines: list[str], start: int) -> int:
    """The line on which an MDX component's opening tag (begun on `start`) ends: its `>` outside braces and
    template strings; `start` when it ends there or nowhere."""
    depth, quote = 0, ""
    for number in range(start, len(lines)):
        for char in lines[number]:
            if quote:
                quote = "" if char == quote else quote
            elif char in "`\"'" and depth:
                quote = char
            elif char == "{":
                depth += 1
            elif char == "}":
                depth = max(0, depth - 1)
            elif char == ">" and not depth:
                return number
    return start


def code_fence(code: str) -> str:
    """The fence a code block is written back with: three backticks, or one more than the longest run of backticks
    opening a line of the code (a block showing markdown with fences inside stays one block)."""
    runs = [len(m.group(1)) for m in re.finditer(r"^[ \t]*(`{3,})", code, re.M)]
    return "`" * max(FENCE_MIN, max(runs, default=0) + 1 if runs else FENCE_MIN)


def _label(kind: str | None, title: str | None) -> str:
    if title and title.strip():
        return normalise_inline(title.strip())[0]
    return (kind or "").replace("-", " ").capitalize()


def _join_variant(outer: str, inner: str) -> str:
    return f"{outer} / {inner}" if outer else inner


_FRONT_MATTER_TITLE = re.compile(r"^title:\s*(?P<quote>[\"']?)(?P<title>.+?)(?P=quote)\s*$", re.M)


def page_title(text: str) -> str:
    """A page's title: its front matter's `title:` (Docusaurus, Jekyll, Hugo, mkdocs), else its first level-1
    heading outside code; "" when it has neither (a `## Options` further down names a section, not the page)."""
    front = _FRONT_MATTER.match(text.replace("\r\n", "\n"))
    found = _FRONT_MATTER_TITLE.search(front.group(0)) if front else None
    if found:
        return normalise_inline(found.group("title"))[0]
    for line, kind in line_kinds(text.replace("\r\n", "\n")):
        heading = _ATX.match(line) if kind == "text" else None
        if heading and len(heading.group(1)) == 1:
            return normalise_inline(_ATTR_LIST.sub("", heading.group(2)))[0]
    return ""


def parse_markdown(text: str) -> list[Block]:
    """The page's blocks in reading order (front matter, comments and snippet includes left out)."""
    parser = _Parser()
    parser.parse(_FRONT_MATTER.sub("", text.replace("\r\n", "\n"), count=1).split("\n"))
    return parser.blocks


MARKDOWN_SUFFIXES = (".md", ".mdx", ".markdown")  # files read as markdown (Docusaurus pages are .mdx)
_MARKDOWN_SIGNS = re.compile(
    r"^\s{0,3}#{1,6}\s+\S|^\s*(`{3,}|~{3,})|^\s*(!!!|\?\?\?|///|:::|===\s+\")|^\s*\|.*\|\s*$", re.M
)


def looks_like_markdown(text: str, name: str = "") -> bool:
    """Whether a document is markdown to parse by structure: named .md/.mdx, or holding its signs (headings, fences,
    admonitions, tabs, tables). Plain text (a PDF's, a text file's) keeps the paragraph chunker."""
    if name.lower().endswith(MARKDOWN_SUFFIXES):
        return True
    return bool(_MARKDOWN_SIGNS.search(text))
