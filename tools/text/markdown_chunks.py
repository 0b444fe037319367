"""Chunks of a structured page: a section's blocks packed under its heading path, never splitting a code block, a
list or a table, nor parting one from the sentence that introduces it; a paragraph over the budget is cut at its
sentence ends (text/sentences.py `split_to_budget`), the last piece introducing what follows.

A documentation page answers "how do I ..." with a call, a command or a short code block introduced by one sentence
("add `Query` inside of `Annotated`, and set the parameter `max_length` to `50`:" and the code): that pair is the
unit of an answer, so it is the unit of packing. A chunk holds one section (`section`: the headings above it, the
page's title left out) and one variant (a content tab or language block: metadata `variant`); a block from another
variant inside it (a tip's two platform tabs) is labelled in the text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from reground.tools.text.markdown import STRUCTURED_KINDS, Block, parse_markdown
from reground.tools.text.sentences import CONTINUED_LABEL, split_to_budget
from reground.tools.tuning.stores import INGEST

SECTION_SEPARATOR = " > "
VARIANT_FIELD = "variant"  # chunk metadata: the content tab or language block the chunk's text comes from


def variant_of(passage: Mapping[str, Any]) -> str:
    """The content tab or language block a passage's text comes from ('' when none)."""
    return str((passage.get("metadata") or {}).get(VARIANT_FIELD) or "")


LINKS_FIELD = "links"  # chunk metadata: the targets of the links in the chunk's text, space-separated
MAX_LINKS = INGEST.max_chunk_links


@dataclass
class _Group:
    """Blocks that stay together: a paragraph and the code, lists and tables it introduces."""

    blocks: list[Block]

    @property
    def section(self) -> tuple[str, ...]:
        return self.blocks[0].path

    @property
    def variant(self) -> str:
        variants = {b.variant for b in self.blocks}
        return variants.pop() if len(variants) == 1 else ""

    def text(self, chunk_variant: str) -> str:
        parts = []
        for block in self.blocks:
            labelled = block.kind in STRUCTURED_KINDS and block.variant and block.variant != chunk_variant
            parts.append(f"{block.variant}:\n{block.text}" if labelled else block.text)
        return "\n\n".join(parts)


def _groups(blocks: list[Block]) -> list[_Group]:
    groups: list[_Group] = []
    for block in blocks:
        if block.kind == "heading":
            continue
        previous = groups[-1] if groups else None
        attaches = (
            previous is not None
            and not block.continued
            and block.kind in STRUCTURED_KINDS
            and previous.section == block.path
            and previous.blocks[0].kind == "paragraph"
            and previous.blocks[0].variant in ("", block.variant)
        )
        if attaches and previous is not None:
            previous.blocks.append(block)
        else:
            groups.append(_Group([block]))
    return groups


def _split_code(block: Block, budget: int, count: Callable[[str], int]) -> list[Block]:
    """A code block over the budget, cut at blank lines (or, past `code_cut_slack` budgets, at any line) into fenced
    parts; every part after the first is marked as continued."""
    fence_open, *lines = block.text.split("\n")
    fence_close = lines.pop() if lines else "```"
    parts: list[list[str]] = [[]]
    for line in lines:
        size = count("\n".join([*parts[-1], line]))
        if parts[-1] and size > budget and (not line.strip() or size > budget * INGEST.code_cut_slack):
            parts.append([])
        parts[-1].append(line)
    out = []
    for i, part in enumerate(p for p in parts if any(line.strip() for line in p)):
        text = "\n".join([*([CONTINUED_LABEL] if i else []), fence_open, *part, fence_close])
        out.append(Block(block.kind, text, block.path, block.level, block.variant, block.links, continued=i > 0))
    return out or [block]


def structured_pieces(
    text: str, title: str, max_tokens: int, count: Callable[[str], int]
) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(section, variant, text, link targets) of each chunk of a structured page, in reading order; `title`: the
    page's, left out of the heading paths it leads."""
    blocks = parse_markdown(text)
    cap = max_tokens * INGEST.max_unit_chunks
    sized: list[Block] = []
    for block in blocks:
        if block.kind == "code" and count(block.text) > cap:
            sized.extend(_split_code(block, cap, count))
        elif block.kind == "paragraph" and len(block.text) > max_tokens and count(block.text) > max_tokens:
            sized.extend(replace(block, text=piece) for piece in split_to_budget(block.text, max_tokens, count))
        else:
            sized.append(block)
    pieces: list[tuple[tuple[str, ...], str, list[_Group]]] = []
    for group in _groups(sized):
        if pieces:
            section, variant, packed = pieces[-1]
            joined = "\n\n".join([*(g.text(variant) for g in packed), group.text(variant)])
            if section == group.section and variant == group.variant and count(joined) <= max_tokens:
                packed.append(group)
                continue
        pieces.append((group.section, group.variant, [group]))
    out = []
    for path, variant, packed in pieces:
        shown = path[1:] if path and path[0] == title else path
        links = tuple(dict.fromkeys(link for g in packed for b in g.blocks for link in b.links))[:MAX_LINKS]
        out.append((SECTION_SEPARATOR.join(shown), variant, "\n\n".join(g.text(variant) for g in packed), links))
    return out
