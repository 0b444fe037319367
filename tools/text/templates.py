"""Template markup a site generator expands at build time, read as the page a reader sees.

Hugo shortcodes (`{{< relref "cli#add" >}}`, `{{% note %}}` ... `{{% /note %}}`), Liquid, Jinja and Nunjucks tags
(Jekyll's `{% include x.html %}`, `{% raw %}`, Eleventy's `{%- if x -%}`), Markdoc tags (`{% aside %}`) and template
expressions (`{{ site.baseurl }}`, mkdocs-macros' `{{ version }}` or `{{ code_block(...) }}`, MyST substitutions
`{{role}}`) are replaced by their output when the site is built; the source holds none of it, so each tag goes and
a paired tag's content stays. A link whose destination is a template (`[add]({{< relref "cli#add" >}})`,
`[sass]({{ '/docs/sass/' | relative_url }})`) links to the template's first quoted string.

Other generic markup a page renders: autolinks (`<https://example.com>`, MyST's `<project:#target>`) become their
target, HTML entities (`&nbsp;`, `&lt;`) and backslash escapes (`\\<`) the characters they stand for, a table of
contents marker (`[[toc]]`, `[TOC]`, `{:toc}`) nothing. Code spans and blocks are left as they are by the caller.
"""

from __future__ import annotations

import html
import re

# A tag: `{{< ... >}}`, `{{% ... %}}` (Hugo), `{% ... %}` / `{%- ... -%}` (Liquid, Jinja, Nunjucks, Markdoc).
_TAG = re.compile(r"\{\{[<%].*?[>%]\}\}|\{%-?.*?-?%\}", re.S)
# An expression: `{{ name }}`, `{{ a.b | filter: "x" }}`, `{{ f('{}', 1) }}`, `{{role}}`; not `{{#include ...}}`
# (mdBook, in code) nor JSON's `{{"a": 1}}`.
_EXPRESSION = re.compile(r"\{\{-?\s*[A-Za-z_$'\"(](?:[^{}\n]|\{[^{}\n]*\})*?-?\}\}")
_TEMPLATE_DESTINATION = re.compile(r"\]\(\s*(\{\{[<%].*?[>%]\}\}|\{%.*?%\}|\{\{[^{}\n]*\}\})\s*\)", re.S)
_QUOTED = re.compile(r"\"([^\"]*)\"|'([^']*)'")
_AUTOLINK = re.compile(r"<(?P<target>(?P<scheme>[a-zA-Z][\w+.-]{1,31}):[^\s<>]+)>")
_WEB_SCHEMES = frozenset({"http", "https", "ftp", "mailto"})
_TOC_MARKER = re.compile(r"\[\[toc\]\]|\[TOC\]|\{:\s*toc\s*\}|\{\{<\s*toc\s*>\}\}", re.I)
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_ENTITY = re.compile(r"&(?:[a-zA-Z][a-zA-Z0-9]{1,31}|#\d{1,7}|#[xX][0-9a-fA-F]{1,6});")


def _destination(match: re.Match[str]) -> str:
    quoted = _QUOTED.search(match.group(1))
    return f"]({(quoted.group(1) if quoted.group(1) is not None else quoted.group(2)) if quoted else ''})"


def template_links(text: str) -> str:
    """Links whose destination is a template, pointed at the template's first quoted string (or at nothing)."""
    return _TEMPLATE_DESTINATION.sub(_destination, text) if "](" in text else text


def strip_templates(text: str) -> str:
    """`text` without template tags, expressions and table-of-contents markers (a paired tag's content stays)."""
    if "{" not in text and "[" not in text:
        return text
    text = _TOC_MARKER.sub("", text)
    return _EXPRESSION.sub("", _TAG.sub("", text))


def autolinks(text: str, links: list[str]) -> str:
    """Autolinks as their text: a web address itself, another scheme's target (`<project:#install>`) its last
    part; each target is appended to `links`."""

    def replace(match: re.Match[str]) -> str:
        target = match.group("target")
        links.append(target)
        if match.group("scheme").lower() in _WEB_SCHEMES:
            return target.removeprefix("mailto:")
        return re.split(r"[#/:]", target)[-1] or target

    return _AUTOLINK.sub(replace, text) if "<" in text else text


def rendered_characters(text: str) -> str:
    """HTML entities and backslash escapes as the characters they stand for (`&lt;` -> `<`, `\\*` -> `*`)."""
    if "\\" in text:
        text = _ESCAPE.sub(r"\1", text)
    if "&" in text and _ENTITY.search(text):
        text = _ENTITY.sub(lambda m: html.unescape(m.group(0)), text)
    return text
