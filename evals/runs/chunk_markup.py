"""Site markup left in the chunks of a documentation set: what a reply built from them could copy.

Loads a folder as `reground ingest` does (tools/text/loaders.py) and chunks every page with the ingest chunker, then
counts the chunks holding site markup outside their code (evals/runs/usefulness.py's `markup_in`: raw links,
admonition and tab markers, language blocks, macros; and `GENERATOR_MARKUP`: template tags and expressions,
autolinks, entities, escapes, containers, TOC markers, attribute lists, components) and the chunks whose code keeps
mkdocs-material's annotation markers (`# (1)!`). Nothing is embedded or stored, so a set of a few hundred pages
takes seconds.

    python -m reground.evals.runs.chunk_markup --docs DIR [--docs DIR2 ...] --out evals/results/chunk_markup.json
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reground.evals.runs.usefulness import markup_in
from reground.tools.text.chunking import chunk_document
from reground.tools.text.loaders import load_paths
from reground.tools.text.markdown import CODE_ANNOTATION
from reground.tools.tuning.stores import INGEST

EXAMPLES = 3  # chunks shown per corpus with markup left
# Site generators' own markup, beyond what a reply is scored for (usefulness.MARKUP): template tags and expressions
# (Hugo shortcodes, Liquid/Jinja/Nunjucks/Markdoc tags, `{{ variable }}`), autolinks, HTML entities, backslash
# escapes, colon-fenced containers, table-of-contents markers, attribute lists and JSX components left in the text.
GENERATOR_MARKUP = {
    "template": re.compile(r"\{\{[<%]|[>%]\}\}|\{%-?\s*/?\w|\{\{-?\s*[A-Za-z_$'\"(][^{}\n]*\}\}"),
    "autolink": re.compile(r"<[a-zA-Z][\w+.-]{1,31}:[^\s<>]+>"),
    "entity": re.compile(r"&(?:[a-zA-Z][a-zA-Z0-9]{1,31}|#\d{1,7}|#[xX][0-9a-fA-F]{1,6});"),
    "escape": re.compile(r"\\[<>*_#|`{}]"),  # not `\[`: MathJax's display math delimiter
    "container": re.compile(r"^\s*:{3,}", re.M),
    "toc": re.compile(r"\[\[toc\]\]|\[TOC\]|\{:\s*toc\s*\}", re.I),
    "attribute_list": re.compile(r"\{\s*(?:[:#.][\w-]|[\w-]+=)[^{}\n]*\}"),
    "component": re.compile(r"</?[A-Z][\w.]*(?:\s[^<>\n]*)?/?>"),
}


# Code a chunk carries: a fenced block (closed by a fence as long as its opening) or a code span of any number of
# backticks (`` `a` `` with a backtick inside is one span).
_CODE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?\n[ \t]*\1[ \t]*$|(?<!`)(`+)(?!`).+?(?<!`)\2(?!`)", re.S | re.M)


def generator_markup_in(text: str) -> list[str]:
    """The kinds of generator markup a chunk carries outside its code."""
    prose = _CODE.sub(" ", text)
    return [name for name, pattern in GENERATOR_MARKUP.items() if pattern.search(prose)]


def chunk_markup(folder: Path) -> dict[str, Any]:
    """Counts for one documentation folder: pages, load errors, chunks, chunks with markup (and which kinds)."""
    documents, errors = load_paths([folder])
    kinds: Counter[str] = Counter()
    chunks = marked = 0
    examples: list[dict[str, str]] = []
    for document in documents:
        for chunk in chunk_document(document, max_tokens=INGEST.chunk_tokens):
            chunks += 1
            found = markup_in(chunk["text"]) + generator_markup_in(chunk["text"])
            found += ["code_annotation"] if CODE_ANNOTATION.search(chunk["text"]) else []
            kinds.update(found)
            if found:
                marked += 1
                if len(examples) < EXAMPLES:
                    examples.append({"doc_id": document.doc_id, "kinds": ", ".join(found), "text": chunk["text"][:300]})
    return {
        "pages": len(documents),
        "load_errors": [f"{e.path}: {e.reason}" for e in errors],
        "chunks": chunks,
        "chunks_with_markup": marked,
        "kinds": dict(sorted(kinds.items())),
        "examples": examples,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", required=True, type=Path, action="append", help="a documentation folder (repeat)")
    parser.add_argument("--name", action="append", help="a name per --docs (default: the folder's name)")
    parser.add_argument("--out", type=Path, default=None, help="write the counts here as JSON")
    args = parser.parse_args(argv)
    names = args.name or [folder.name for folder in args.docs]
    if len(names) != len(args.docs):
        parser.error("give one --name per --docs")
    result = {name: chunk_markup(folder) for name, folder in zip(names, args.docs, strict=True)}
    for name, counts in result.items():
        print(
            f"{name}: {counts['pages']} pages, {len(counts['load_errors'])} load errors, {counts['chunks']} chunks, "
            f"{counts['chunks_with_markup']} with markup {counts['kinds']}"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
