"""Structure-aware ingest of documentation pages: markup normalised for reading, code/lists/tables kept whole with the
sentence that introduces them, heading paths and variants carried by chunks, answer units, code cut to what matters."""

from __future__ import annotations

from pathlib import Path

from reground.tools.text.chunking import chunk_document
from reground.tools.text.code_blocks import indent_code_blocks, trim_code_blocks
from reground.tools.text.loaders import Document, html_text, load_paths
from reground.tools.text.markdown import looks_like_markdown, normalise_inline, parse_markdown
from reground.tools.text.sentences import has_structure, sentence_spans, split_unit, text_sentences
from reground.tools.tuning.stores import INGEST

PAGE = """---
title: Query parameters
---
# Query Parameters { #query-parameters }

Read the [tutorial](../tutorial/index.md#start) first, see @[Query] and [the API][api-ref].

## Optional parameters { #optional }

To make `q` optional, give it a default of `None`:

```python
@app.get("/items/")
async def read_items(q: str | None = None):
    return {"q": q}
```

/// tip | Good to know

FastAPI knows `q` is optional because of the **default** value.

///

!!! warning

    Do not use a *mutable* default.

=== "Python"

    Install it with `pip install fastapi`.

=== "JavaScript"

    Install it with `npm install fastapi-js`.

:::js
The JS client needs `createClient()`.
:::

```mermaid
graph TD; A-->B
```

| Flag | Meaning |
|------|---------|
| `--reload` | restart on change |
"""


def _doc(text: str = PAGE, doc_id: str = "docs/query.md") -> Document:
    return Document(doc_id=doc_id, title="Query Parameters", text=text, url="https://example.org/query/")


def test_inline_markup_becomes_text_and_keeps_code_spans_and_link_targets() -> None:
    text, links = normalise_inline(
        'See [the guide](../a.md#b "t"), @[APIRouter], [ref][x], <abbr title="Application">API</abbr>, '
        "**bold** and *em*, ![logo](img.png) `Query(max_length=50)` { #anchor }"
    )
    assert text == "See the guide, APIRouter, ref, API, bold and em, `Query(max_length=50)`"
    assert links == ("../a.md#b",)


def test_blocks_carry_heading_path_admonition_labels_and_variants() -> None:
    blocks = parse_markdown(PAGE)
    kinds = [(b.kind, b.variant) for b in blocks]
    assert ("code", "") in kinds and ("table", "") in kinds
    paragraphs = {b.text: b for b in blocks if b.kind == "paragraph"}
    assert "Good to know: FastAPI knows `q` is optional because of the default value." in paragraphs
    assert "Warning: Do not use a mutable default." in paragraphs
    assert paragraphs["Install it with `pip install fastapi`."].variant == "Python"
    assert paragraphs["Install it with `npm install fastapi-js`."].variant == "JavaScript"
    assert paragraphs["The JS client needs `createClient()`."].variant == "JavaScript"
    code = next(b for b in blocks if b.kind == "code")
    assert code.path == ("Query Parameters", "Optional parameters")
    assert code.text.startswith("```python\n@app.get") and '    return {"q": q}' in code.text
    assert not any("title:" in b.text or "{ #" in b.text or "A-->B" in b.text for b in blocks)


def test_chunks_keep_the_code_with_its_sentence_and_carry_section_and_variant() -> None:
    chunks = chunk_document(_doc(), max_tokens=40)
    with_code = next(c for c in chunks if "```python" in c["text"])
    assert with_code["text"].startswith("To make `q` optional, give it a default of `None`:\n\n```python")
    assert with_code["text"].count("```") == 2  # never split
    assert with_code["section"] == "Optional parameters"  # the page's title is not repeated in the path
    variants = {c["metadata"].get("variant") for c in chunks}
    assert {"Python", "JavaScript"} <= variants
    assert any("../tutorial/index.md#start" in c["metadata"].get("links", "") for c in chunks)
    assert not any("](" in c["text"] or "///" in c["text"] or "!!!" in c["text"] or "===" in c["text"] for c in chunks)


def test_a_long_code_block_is_cut_at_blank_lines_into_marked_parts() -> None:
    body = "\n\n".join(f"def handler_{i}(request):\n    return compute_{i}(request.value)" for i in range(60))
    chunks = chunk_document(_doc(f"# Title\n\nThe handlers:\n\n```python\n{body}\n```\n"), max_tokens=40)
    assert len(chunks) > 2
    assert all(c["text"].count("```") == 2 for c in chunks)
    assert chunks[0]["text"].startswith("The handlers:")
    assert all(c["text"].startswith("(continued)") for c in chunks[1:])


def test_plain_text_keeps_the_paragraph_chunker() -> None:
    plain = (
        "Know your rights\nThe office regulates all shops. You must register.\n\nThe complaint process\nA rep calls."
    )
    assert not looks_like_markdown(plain, "policy.txt")
    assert looks_like_markdown(PAGE) and looks_like_markdown("x", "a.md")
    (chunk,) = chunk_document(Document("p", "Policy", plain), max_tokens=160)
    assert "Know your rights\nThe office" in chunk["text"]


def test_a_unit_is_a_sentence_with_the_code_or_table_it_introduces() -> None:
    text = (
        "Install it first.\n\nRun this:\n\n```console\n$ uv add  --dev pytest\n```\n\n"
        "Then test it now.\n\n| a | b |\n|---|---|"
    )
    units = text_sentences(text)
    assert units == [
        "Install it first.",
        "Run this:\n```console\n$ uv add  --dev pytest\n```",  # code verbatim, double space kept
        "Then test it now.\n| a | b |\n|---|---|",
    ]
    assert [has_structure(u) for u in units] == [False, True, True]
    assert split_unit(units[1]) == ("Run this:", "```console\n$ uv add  --dev pytest\n```")
    spans = sentence_spans(text)
    assert text[spans[1][0] : spans[1][1]].endswith("```")
    assert text_sentences("```python\nx = 1\n```\n\nThen run it now.")[0] == "```python\nx = 1\n```"


def test_a_long_code_block_in_a_reply_keeps_the_lines_that_matter() -> None:
    lines = [f"    value_{i} = compute({i})" for i in range(30)]
    lines[20] = "    limit = Query(max_length=50)"
    reply = "Set `max_length` in `Query`:\n```python\ndef read():\n" + "\n".join(lines) + "\n```"
    trimmed = trim_code_blocks(reply, ["how do I cap it at 50 chars?", reply.split("\n")[0]], max_lines=6)
    assert "limit = Query(max_length=50)" in trimmed
    assert "    ..." in trimmed and trimmed.count("\n") < reply.count("\n")
    assert trimmed.startswith("Set `max_length` in `Query`:\n```python") and trimmed.endswith("```")
    short = "Run:\n```console\n$ uv sync\n```"
    assert trim_code_blocks(short, ["sync"], max_lines=6) == short
    assert indent_code_blocks(short) == "Run:\n    $ uv sync"


def test_rendered_html_keeps_code_admonitions_and_tabs() -> None:
    markup = """<html><body><h1>Install</h1><p>Run the <a href="/x">installer</a>:</p>
    <div class="highlight-console"><pre>$ curl -LsSf https://example.org/install.sh | sh</pre></div>
    <div class="admonition note"><p class="admonition-title">Note</p><p>Needs <code>curl</code>.</p></div>
    <ul role="tablist"><li role="tab">Linux</li><li role="tab">Windows</li></ul>
    <div role="tabpanel"><p>Use the shell script.</p></div><div role="tabpanel"><p>Use PowerShell.</p></div>
    </body></html>"""
    _, text = html_text(markup)
    chunks = chunk_document(Document("install.html", "Install", text), max_tokens=60)
    joined = "\n\n".join(c["text"] for c in chunks)
    assert "Run the installer:\n\n```console\n$ curl -LsSf https://example.org/install.sh | sh\n```" in joined
    assert "Note: Needs `curl`." in joined
    by_variant = {c["metadata"].get("variant"): c["text"] for c in chunks}
    assert by_variant["Linux"] == "Use the shell script." and by_variant["Windows"] == "Use PowerShell."


def test_a_table_right_under_a_sentence_is_a_table_and_the_next_line_a_paragraph() -> None:
    blocks = parse_markdown(
        "Everything about the ticket.\n| What | Details |\n|---|---|\n| Fee | £18 per term |\n"
        "You can arrange it at the Student Hub.\nA pipe | in prose | is no table."
    )
    assert [b.kind for b in blocks] == ["paragraph", "table", "paragraph"]
    assert blocks[1].text.splitlines()[2] == "| Fee | £18 per term |"
    assert blocks[2].text.startswith("You can arrange it at the Student Hub.")


def test_a_later_part_of_a_cut_code_block_is_no_reply_on_its_own() -> None:
    from reground.tools.signals.evidence import stands_as_reply
    from reground.tools.text.sentences import CONTINUED_LABEL

    part = f"{CONTINUED_LABEL}\n```python\nasync def read_users_me(user: User):\n    return user\n```"
    assert split_unit(part) == ("", part.split("\n", 1)[1])
    assert not stands_as_reply(part)
    assert stands_as_reply("Return the current user:\n```python\nreturn user\n```")


MKDOCS_MATERIAL_PAGE = """# Validators

[](){#field-after-validator}

!!! note "on the "jsonable" nature of JSON schema"
    Calling `json.dumps(m.model_json_schema())` returns a valid JSON string.

!!! warning Polymorphic serialization of dataclasses
    Polymorphic serialization is only supported for models.

Now create a file `Dockerfile` with:

```{ .dockerfile .annotate }
# (1)!
FROM python:3.14

RUN pip install -r requirements.txt  # (2)!
```

1. Start from the official Python base image.
2. Install the requirements.

See the [Pyrefly documentation](https://pyrefly.org/en/docs/pydantic/ ) for more.
"""


def test_mkdocs_material_anchors_admonition_headers_and_code_annotations_leave_no_markup() -> None:
    blocks = parse_markdown(MKDOCS_MATERIAL_PAGE)
    texts = [b.text for b in blocks if b.kind != "heading"]
    joined = "\n".join(texts)
    # an autorefs anchor `[](){#id}` is no paragraph; an admonition header's classes and nested quotes are no text
    assert "](" not in joined and "{#" not in joined and "!!!" not in joined
    assert texts[0] == (
        'on the "jsonable" nature of JSON schema: '
        "Calling `json.dumps(m.model_json_schema())` returns a valid JSON string."
    )
    assert texts[1] == "Warning: Polymorphic serialization is only supported for models."
    code = next(b.text for b in blocks if b.kind == "code")
    # the fence's attribute list names the language; the annotation markers go, the annotated lines stay
    assert code == "```dockerfile\nFROM python:3.14\n\nRUN pip install -r requirements.txt\n```"
    assert any(b.kind == "list" and "Start from the official Python base image." in b.text for b in blocks)
    # a link whose target has a space before the closing parenthesis is a link too
    last = blocks[-1]
    assert last.text == "See the Pyrefly documentation for more."
    assert last.links == ("https://pyrefly.org/en/docs/pydantic/",)


def test_mdx_imports_and_exports_are_no_text_and_a_link_text_may_hold_brackets() -> None:
    page = (
        "import OsFlag from '../settings/_osFlag.mdx'\n"
        "import { Tabs, TabItem } from '@theme/Tabs';\n\n"
        "Install the package.\n\n"
        "export const hooks = {\n  readPackage\n}\n\n"
        "- [[no-]color](./settings/cli.md#no-color)\n\n"
        "To import data, run the import script.\n"
    )
    blocks = parse_markdown(page)
    assert [b.text for b in blocks] == [
        "Install the package.",
        "- [no-]color",
        "To import data, run the import script.",
    ]
    assert blocks[1].links == ("./settings/cli.md#no-color",)


def test_a_page_title_comes_from_front_matter_or_the_first_level_one_heading_outside_code(tmp_path: Path) -> None:
    """pnpm's `cli/dedupe.md` has `title: "pnpm dedupe"` in its front matter and a `## Options` further down: the
    loader named the page "Options" (the first line starting with "#"), and its chunks lost "Options" from their
    heading paths."""
    (tmp_path / "dedupe.md").write_text(
        '---\nid: dedupe\ntitle: "pnpm dedupe"\n---\n\nPerform an install.\n\n## Options\n'
    )
    (tmp_path / "guide.md").write_text("```bash\n# a comment\n```\n\n# The guide { #guide }\n\n## Steps\n\nDo it.\n")
    (tmp_path / "notes.md").write_text("## Only a section\n\nText.\n")
    documents, errors = load_paths([tmp_path])
    assert errors == []
    assert {d.doc_id: d.title for d in documents} == {
        "dedupe.md": "pnpm dedupe",
        "guide.md": "The guide",
        "notes.md": "notes",
    }
    sections = [
        c["section"]
        for d in documents
        if d.doc_id == "notes.md"
        for c in chunk_document(d, max_tokens=INGEST.chunk_tokens)
    ]
    assert sections == ["Only a section"]


def test_an_mkdocstrings_autodoc_line_and_its_options_are_no_text() -> None:
    options = "    options:\n        members:\n          - model_dump\n"
    page = f"Models inherit from `BaseModel`.\n\n::: pydantic.BaseModel\n{options}"
    assert [b.text for b in parse_markdown(page)] == ["Models inherit from `BaseModel`."]
