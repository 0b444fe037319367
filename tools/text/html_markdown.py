"""An HTML page as the markdown its structure says: headings, paragraphs, fenced code, lists, tables, admonitions and
tabs, so rendered documentation (Sphinx, Docusaurus, mkdocs output) is chunked by the same structure as its source.

Inline markup becomes text (a link its words, `<code>` a code span); `<pre>` a fenced block with its language
(`language-python`, `highlight-python`); an admonition (`admonition note` with its title, Docusaurus'
`theme-admonition-tip`) a paragraph led by its label; ARIA tabs (`role="tab"` labels, `role="tabpanel"` panels,
Sphinx's and Docusaurus' markup) a `=== "Label"` content tab, which the markdown parser turns into a variant.
"""

from __future__ import annotations

import re
from typing import Any

from reground.tools.text.markdown import code_fence

_SKIP = frozenset({"script", "style", "nav", "footer", "noscript", "template", "head", "title", "svg", "button"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}  # fact: HTML's six heading levels
_INLINE = frozenset(
    {"a", "abbr", "b", "strong", "i", "em", "span", "code", "kbd", "samp", "var", "sub", "sup", "small", "mark"}
    | {"u", "s", "q", "cite", "dfn", "time", "label", "font", "br", "img", "wbr", "del", "ins", "tt"}
)
_LANGUAGE = re.compile(r"\b(?:language|lang|highlight)-([\w+#-]+)")
_ADMONITION = re.compile(r"\b(?:admonition|theme-admonition-(\w+)|alert--(\w+)|callout)\b")


def _classes(node: Any) -> str:
    value = node.get("class") or []
    return " ".join(value) if isinstance(value, list) else str(value)


def _inline(node: Any) -> str:
    """The text of inline content: code as `code`, everything else as its words."""
    from bs4 import NavigableString, Tag

    if isinstance(node, NavigableString):
        return str(node) if type(node) is NavigableString else ""
    if not isinstance(node, Tag) or node.name in _SKIP or node.name == "img":
        return ""
    if node.name == "br":
        return " "
    inner = "".join(_inline(child) for child in node.children)
    if node.name in ("code", "kbd", "samp", "tt") and inner.strip():
        return f"`{' '.join(inner.split())}`"
    return inner


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.paragraph: list[str] = []

    def flush(self, indent: str) -> None:
        text = " ".join("".join(self.paragraph).split())
        self.paragraph.clear()
        if text:
            self.block(indent, [text])

    def block(self, indent: str, lines: list[str]) -> None:
        if self.lines and self.lines[-1] != "":
            self.lines.append("")
        self.lines.extend(f"{indent}{line}" if line else "" for line in lines)
        self.lines.append("")

    def walk(self, node: Any, indent: str = "") -> None:  # one recursive descent over block elements
        from bs4 import NavigableString, Tag

        tabs: list[str] = []
        for child in node.children:
            if isinstance(child, NavigableString):
                self.paragraph.append(_inline(child))
                continue
            if not isinstance(child, Tag) or child.name in _SKIP:
                continue
            if child.name in _INLINE:
                self.paragraph.append(_inline(child))
                continue
            self.flush(indent)
            role = str(child.get("role") or "").lower()
            if role == "tablist":
                tabs = [" ".join(t.get_text(" ").split()) for t in child.find_all(True) if t.get("role") == "tab"]
            elif role == "tabpanel":
                label = tabs.pop(0) if tabs else str(child.get("aria-label") or "Tab")
                self.block(indent, [f'=== "{label}"'])
                self.walk(child, indent + "    ")
                self.flush(indent + "    ")
            else:
                self.element(child, indent)
        self.flush(indent)

    def element(self, node: Any, indent: str) -> None:
        name = node.name
        if name in _HEADINGS:
            self.block(indent, ["#" * _HEADINGS[name] + " " + " ".join(_inline(node).split())])
        elif name == "pre":
            found = _LANGUAGE.search(_classes(node) + " " + " ".join(_classes(p) for p in node.parents))
            inner = node.find("code")
            language = found.group(1) if found else ""
            if inner is not None and not found:
                code_class = _LANGUAGE.search(_classes(inner))
                language = code_class.group(1) if code_class else ""
            code = node.get_text().strip("\n")
            fence = code_fence(code)  # longer than any fence the code shows
            self.block(indent, [f"{fence}{language}", *code.split("\n"), fence])
        elif name in ("ul", "ol"):
            for number, item in enumerate(node.find_all("li", recursive=False), start=1):
                marker = f"{number}." if name == "ol" else "-"
                nested = _Writer()
                nested.walk(item)
                body = [line for line in nested.lines if line.strip()]
                if body:
                    lines = [f"{marker} {body[0]}", *("    " + line for line in body[1:])]
                    self.lines.extend(f"{indent}{line}" for line in lines)
            self.lines.append("")
        elif name == "table":
            rows = []
            for row in node.find_all("tr"):
                cells = [" ".join(_inline(c).split()).replace("|", "\\|") for c in row.find_all(["td", "th"])]
                if any(cells):
                    rows.append("| " + " | ".join(cells) + " |")
            if rows:
                width = rows[0].count(" | ") + 1
                self.block(indent, [rows[0], "|" + "---|" * width, *rows[1:]])
        elif _ADMONITION.search(_classes(node)):
            title = node.find(class_=re.compile(r"admonition-title|admonitionHeading|title"))
            label = " ".join(title.get_text(" ").split()) if title is not None else ""
            if title is not None:
                title.extract()
            self.block(indent, [f'!!! note "{label}"' if label else "!!! note"])
            self.walk(node, indent + "    ")
        else:
            self.walk(node, indent)


def html_markdown(markup: str) -> tuple[str, str]:
    """(title, markdown) of an HTML page (text hidden from readers already stripped by the caller)."""
    from bs4 import BeautifulSoup, Comment

    soup = BeautifulSoup(markup, "html.parser")
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    title = soup.title.get_text(strip=True) if soup.title else ""
    writer = _Writer()
    writer.walk(soup.body if soup.body is not None else soup)
    text = "\n".join(writer.lines)
    return title, re.sub(r"\n{3,}", "\n\n", text).strip()
