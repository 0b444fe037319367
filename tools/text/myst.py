"""MyST, the markdown Sphinx and Jupyter Book read: its directives and roles, as a reader of the rendered page sees
them.

A directive is a fence whose info string names it (```` ```{note} ````, ```` :::{tab-item} Python ````), with option
lines (`:class: dropdown`) before its content; a role is `` {ref}`the text <target>` `` inside a paragraph; `(label)=`
on its own line is a link target, `% ...` a comment. text/markdown.py reads the fences and calls here for what each
one is: code to show (`code-block`), a container to label (an admonition: "Note: ...", "New in version 2.0: ..."), a
tab whose label is the blocks' variant, a layout container that adds nothing (`tab-set`, `grid`), or a build
instruction a reader never sees (`toctree`, `include`, `eval-rst`'s reStructuredText).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DIRECTIVE = re.compile(r"^\{(?P<name>[\w:.-]+)\}\s*(?P<argument>.*?)\s*$")
_OPTION = re.compile(r"^\s*:[\w-]+:(\s.*)?$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)  # an inline code span; a role's content is one
# A role's name right before its code span, itself after a space, an opening bracket or quote, or nothing.
_ROLE_NAME = re.compile(r"(?:(?<=[\s(\[\"'>])|^)\{(?P<role>[\w:.-]+)\}$")
_TITLED = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$")
# A link target `(label)=` and a comment `% ...` on a line of their own.
SKIPPED_LINE = re.compile(r"^\s*(\([\w./:-]+\)=\s*$|%\s)")

CODE = frozenset({"code-block", "code", "sourcecode", "code-cell"})
# What the build reads and a reader never sees: tables of contents, included files, rST, API stubs, images.
HIDDEN = frozenset(
    {"toctree", "include", "literalinclude", "eval-rst", "raw", "contents", "image", "autosummary", "only", "meta"}
    | {"button-ref", "button-link"}
)
TABS = frozenset({"tab-item", "tab"})
# Containers that lay content out and say nothing of it.
LAYOUT = frozenset({"tab-set", "grid", "grid-item", "grid-item-card", "card", "div", "container", "rubric"})
VERSIONS = {"versionadded": "New in version", "versionchanged": "Changed in version", "deprecated": "Deprecated since"}
# Roles whose content is a name in code (the Python domain's and the generic ones): shown as a code span.
_CODE_ROLES = re.compile(r"^(py:|js:|c:|cpp:|std:)?(func|class|meth|attr|mod|obj|data|exc|const|var|option|code)$")


@dataclass(frozen=True)
class Directive:
    name: str
    argument: str


def directive(info: str) -> Directive | None:
    """The directive a fence's info string (or a colon fence's rest of line) names, if it names one."""
    match = _DIRECTIVE.match(info.strip())
    return Directive(match.group("name").lower(), match.group("argument")) if match else None


def content_lines(lines: list[str]) -> list[str]:
    """A directive's content: its leading option lines (`:class: tip`) or YAML option block left out."""
    if lines and lines[0].strip() == "---":
        closing = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        if closing is not None:
            lines = lines[closing + 1 :]
    start = 0
    while start < len(lines) and _OPTION.match(lines[start]):
        start += 1
    return lines[start:]


def label(found: Directive) -> str:
    """What leads a container's first paragraph: an admonition's title or kind, a version note; "" for layout."""
    if found.name in LAYOUT:
        return ""
    if found.name in VERSIONS:
        return f"{VERSIONS[found.name]} {found.argument}".strip()
    if found.argument and found.name in ("admonition", "dropdown", "topic", "sidebar"):
        return found.argument
    return found.name.split(":")[-1].replace("-", " ").capitalize()


def roles_as_text(text: str) -> str:
    """Each role as its rendered text: `` {ref}`the guide <target>` `` -> "the guide", `` {py:class}`~a.Model` `` ->
    `` `Model` `` (a code name keeps its code span), `` {math}`x^2` `` -> "x^2". Code spans are read left to right, so
    `` `/users/{user_id}` `` stays code."""
    out: list[str] = []
    last = 0
    for span in CODE_SPAN.finditer(text):
        before = text[last : span.start()]
        role = _ROLE_NAME.search(before) if len(span.group(1)) == 1 else None
        if role is None:
            out.extend([before, span.group(0)])
        else:
            out.extend([before[: role.start()], _rendered(role.group("role").lower(), span.group(2).strip())])
        last = span.end()
    out.append(text[last:])
    return "".join(out)


def _rendered(role: str, content: str) -> str:
    titled = _TITLED.match(content)
    shown = (titled.group("title") if titled and titled.group("title") else content).lstrip("!")
    if _CODE_ROLES.match(role):
        if not titled and shown.startswith("~"):
            shown = shown[1:].split(".")[-1]
        return f"`{shown}`"
    return shown
