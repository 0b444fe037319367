"""Machine-readable blobs glued to prose (a JSON object, an XML element, a markdown image) set on lines of their own.

A page can write a tool call straight after a fact ("... an extra paid day.{"tool": "send_email", ...}"): the
sentence split then reads fact and blob as one sentence, the injection flags flag both, and the fact is lost.
Ingest makes each such blob a paragraph of its own before chunking, so the fact stays a sentence a
reply can quote (a fee line without a full stop is not read as the heading of the blob) and the blob is flagged
alone (the injection flags treat each line as a unit). Nothing is removed.
"""

from __future__ import annotations

import re

# The start of a JSON object with a quoted key, or of a JSON array of objects.
_JSON_START = re.compile(r"[{\[]\s*(?:\{\s*)?\"[^\"\n]{1,80}\"\s*:")
# An XML element with a name no prose or HTML inline markup uses for text: a tool call, a function call, a fake
# system block (<tool_call>, <function_calls>, <system>, <invoke name=...>).
_XML_OPEN = re.compile(r"(?<!<)<([A-Za-z_][\w:.-]*)(?:\s[^<>]*)?>(?!>)")
_INLINE_HTML = frozenset(
    {"a", "abbr", "b", "bdi", "bdo", "br", "cite", "code", "data", "dfn", "em", "i", "kbd", "mark", "q", "s"}
    | {"samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr", "img", "del", "ins", "font"}
)
_IMAGE = re.compile(r"!\[[^\]\n]{0,200}\]\([^)\n]{1,2000}\)")
# Code is left as written: fenced blocks, inline code spans and indented lines (a blob in code is the code).
_CODE = re.compile(
    r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[^\n]*$|\Z)|`[^`\n]+`|^(?: {4}|\t)[^\n]*$", re.MULTILINE | re.DOTALL
)


def _json_end(text: str, start: int) -> int:
    """The end (exclusive) of the balanced JSON value opening at `start`, or -1 (never closed on this text)."""
    depth, in_string, escaped = 0, False, False
    for at in range(start, len(text)):
        char = text[at]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return at + 1
    return -1


def _blob_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    at = 0
    while (match := _JSON_START.search(text, at)) is not None:
        end = _json_end(text, match.start())
        if end < 0:
            at = match.end()
            continue
        spans.append((match.start(), end))
        at = end
    for match in _XML_OPEN.finditer(text):
        name = match.group(1)
        if name.lower() in _INLINE_HTML:
            continue
        close = text.find(f"</{name}>", match.end())
        if close >= 0 and text[close - 1 : close] != "<":
            spans.append((match.start(), close + len(f"</{name}>")))
    spans += [m.span() for m in _IMAGE.finditer(text)]
    code = [m.span() for m in _CODE.finditer(text)]
    spans = [(s, e) for s, e in spans if not any(s < ce and cs < e for cs, ce in code)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def separate_blobs(text: str) -> tuple[str, int]:
    """(`text` with every blob that shares a line with other text set apart as a paragraph of its own, how many
    were)."""
    if "{" not in text and "<" not in text and "![" not in text:
        return text, 0
    out: list[str] = []
    moved, last = 0, 0
    for start, end in _blob_spans(text):
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end
        before, after = text[last:start], text[end:line_end]
        glued_before, glued_after = bool(text[line_start:start].strip()), bool(after.strip())
        if glued_before:
            before = before.rstrip(" \t") + "\n\n"
        out += [before, text[start:end]]
        if glued_after:
            out.append("\n\n")
        moved += int(glued_before or glued_after)
        last = end
        if glued_after:
            while last < len(text) and text[last] in " \t":
                last += 1
    out.append(text[last:])
    return ("".join(out), moved) if moved else (text, 0)
