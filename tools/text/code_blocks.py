"""Code blocks in replies: cut a long one to the lines that matter, and show code as code in a terminal.

A page's example often holds a whole file (imports, models, three endpoints) while the question is about one call in
it. A reply keeps the lines that carry what the question and the unit's own sentence name (their code spans and
content words), with the line before each (a decorator, the `def` a parameter sits in), and marks each cut with a
`...` line; a block of at most `max_lines` lines stays whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import pairwise

from reground.tools.text.lexical import lexical_tokens
from reground.tools.text.sentences import FENCE, line_kinds

CUT_MARK = "..."  # a cut in a code block (Python's own ellipsis; reads as "more here" in any language)
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.-]*[\w]|\d+(?:\.\d+)*|--?[\w-]+")


def code_terms(text: str) -> set[str]:
    """What a sentence names as code: its `code spans` and the identifiers, flags and numbers inside them."""
    out: set[str] = set()
    for span in _CODE_SPAN.findall(text):
        out.add(span.strip().lower())
        out.update(m.lower() for m in _IDENTIFIER.findall(span) if len(m) > 1)
    return out


def _line_score(line: str, terms: set[str], words: set[str]) -> int:
    lowered = line.lower()
    named = sum(1 for term in terms if term and term in lowered)
    said = len(words & set(lexical_tokens(line)))
    return 2 * named + said


def trim_code(code_lines: list[str], terms: set[str], words: set[str], max_lines: int) -> list[str]:
    """The lines of one code block's body that matter (see the module docstring), cuts marked."""
    if len(code_lines) <= max_lines:
        return code_lines
    scores = [_line_score(line, terms, words) for line in code_lines]
    best = sorted(range(len(code_lines)), key=lambda i: (-scores[i], i))
    keep: set[int] = set()
    for i in best:
        if scores[i] <= 0 or len(keep) >= max_lines:
            break
        keep.update(j for j in (i - 1, i) if j >= 0 and code_lines[j].strip())
    if not keep:
        keep = set(range(max_lines))
    # A blank line between two kept lines stays blank: nothing was cut there, so it gets no `...`.
    kept = sorted(keep)
    keep.update(
        j for a, b in pairwise(kept) if all(not code_lines[j].strip() for j in range(a + 1, b)) for j in range(a + 1, b)
    )
    out: list[str] = []
    for i, line in enumerate(code_lines):
        if i in keep:
            out.append(line)
        elif not out or out[-1].strip() != CUT_MARK:
            following = next((code_lines[k] for k in sorted(keep) if k > i), "")
            out.append(following[: len(following) - len(following.lstrip())] + CUT_MARK)
    return out


def trim_code_blocks(text: str, context: Iterable[str], max_lines: int) -> str:
    """Every code block of a reply cut to the lines that matter to `context` (the question and the reply's own
    sentences): their code spans and content words."""
    context = list(context)
    terms = set().union(*(code_terms(t) for t in context)) if context else set()
    words = set(lexical_tokens(" ".join(context)))
    out: list[str] = []
    body: list[str] | None = None
    for line in text.split("\n"):
        if body is None:
            out.append(line)
            if FENCE.match(line):
                body = []
        elif FENCE.match(line):
            out.extend(trim_code(body, terms, words, max_lines))
            out.append(line)
            body = None
        else:
            body.append(line)
    if body is not None:
        out.extend(body)
    return "\n".join(out)


def close_fences(text: str) -> str:
    """A reply whose last code block a length cap cut off, with the block closed (its fence's own marker)."""
    opened = ""
    for line in text.split("\n"):
        fence = FENCE.match(line)
        if fence:
            opened = "" if opened else fence.group(2)
    return f"{text.rstrip()}\n{opened}" if opened else text


def indent_code_blocks(text: str, indent: str = "    ") -> str:
    """A reply for a terminal: each fenced block's lines indented, the fences themselves left out."""
    return "\n".join(
        f"{indent}{line}" if kind == "code" else line for line, kind in line_kinds(text) if kind != "fence"
    )


def code_lines(text: str) -> set[str]:
    """The lines (stripped) inside the text's fenced code blocks, fences included."""
    return {line.strip() for line, kind in line_kinds(text) if kind != "text"}


def without_code_spans(text: str) -> str:
    """The text with its inline code spans blanked: what it says in words."""
    return _CODE_SPAN.sub(" ", text)
