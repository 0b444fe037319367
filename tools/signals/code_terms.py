"""Code in a written reply must come from its passages: the figure check (signals/figures.py), widened to code.

A small model asked how to do something in a framework writes a plausible call the documentation never shows
(`Query(max_len=50)`, `uv install --dev`), and every other word of the reply is the passages', so word overlap and
embeddings read it as grounded. What a reply names as code is cheap to check exactly: its code spans and code blocks
(`Query(max_length=50)`), and, in its prose, what only code looks like (a `--flag`, a `snake_case` or `dotted.name`,
a `CamelCase` class, a `call(`). Each must occur in the cited passages or in the conversation (a user's own
`get_db` is theirs to name), compared without whitespace; common keywords of the languages docs show are not names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)\n[ \t]*\1[ \t]*$", re.S | re.M)
# In prose, tokens that only code looks like.
_PROSE_CODE = re.compile(
    r"(?<![\w-])--?[a-zA-Z][\w-]*"  # a flag
    r"|(?<![\w.@/-])[A-Za-z_]\w*\.[A-Za-z_][\w.]*\b"  # a dotted name
    r"|\b[a-z][a-z0-9]*_[a-z0-9_]+\b"  # snake_case
    r"|\b[A-Z][a-z0-9]+[A-Z]\w*\b"  # CamelCase
    r"|\b[A-Za-z_]\w*\("  # a call
)
_IDENTIFIER = re.compile(r"(?<![\w-])--?[a-zA-Z][\w-]*|(?<![\w-])[A-Za-z_](?:[\w.-]*\w)?")
# Links, addresses and host names are contacts, which the contact check reads (signals/injection.py).
_CONTACT = re.compile(
    r"\b(?:https?://|www\.)\S+|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\b[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|app|"
    r"example|gov|edu|info|biz|co|uk|de|fr|eu|us)\b",
    re.I,
)
# Words code blocks use in any program (Python, JavaScript, shell, TOML, Dockerfiles): never a name to check.
KEYWORDS = frozenset(
    [
        "and",
        "as",
        "assert",
        "async",
        "await",
        "break",
        "case",
        "class",
        "const",
        "continue",
        "def",
        "del",
        "elif",
        "else",
        "except",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "from",
        "function",
        "if",
        "import",
        "in",
        "is",
        "lambda",
        "let",
        "match",
        "new",
        "none",
        "not",
        "null",
        "or",
        "pass",
        "raise",
        "return",
        "self",
        "static",
        "super",
        "this",
        "throw",
        "true",
        "try",
        "typeof",
        "var",
        "void",
        "while",
        "with",
        "yield",
        "print",
        "str",
        "int",
        "float",
        "bool",
        "list",
        "dict",
        "set",
        "tuple",
        "bytes",
        "type",
        "any",
        "object",
        "len",
        "range",
        "echo",
        "cd",
        "run",
        "sudo",
        "export",
        "env",
        "true",
        "false",
        "run",
        "from",
        "copy",
        "workdir",
        "cmd",
        "entrypoint",
        "expose",
        "arg",
        "add",
        "label",
        "user",
        "volume",
        "shell",
    ]
)
_SHORT = 2  # names this short (i, x, db) are too common to check
# A code block's comments and string literals are words, not names.
_NOT_NAMES = re.compile(r"#[^\n]*|//[^\n]*|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")


def code_names(reply: str) -> list[str]:
    """What a reply names as code: its code spans whole, the names in its code blocks, and the code-like tokens of
    its prose; in order, without repeats."""
    names: list[str] = []
    blocks = list(_FENCED.finditer(reply))
    prose = _CONTACT.sub(" ", _FENCED.sub(" ", reply))
    for block in blocks:
        names.extend(m.group(0) for m in _IDENTIFIER.finditer(_NOT_NAMES.sub(" ", block.group(2))))
    for span in _CODE_SPAN.findall(prose):
        names.append(span.strip())
    names.extend(m.group(0).rstrip("(") for m in _PROSE_CODE.finditer(_CODE_SPAN.sub(" ", prose)))
    kept = [n.strip(".") for n in names if len(n.strip(".")) > _SHORT and n.strip(".").lower() not in KEYWORDS]
    return list(dict.fromkeys(kept))


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _held(name: str, text: str, squeezed: str) -> bool:
    """A name must stand whole in the text (`max_len` is not `max_length`); a span with spaces is compared without
    whitespace (`q: str|None` is `q: str | None`)."""
    if any(ch.isspace() for ch in name) or not re.fullmatch(r"[\w.-]+", name):
        return _squeezed(name) in squeezed
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def unsupported_code(reply: str, passages: Iterable[str], conversation: Iterable[str] = ()) -> list[str]:
    """The code the reply names that neither its passages nor the conversation hold."""
    text = " ".join([*passages, *conversation])
    squeezed = _squeezed(text)
    return [name for name in code_names(reply) if not _held(name, text, squeezed)]
