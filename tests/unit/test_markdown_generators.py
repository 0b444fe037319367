"""Markup of any site generator is read as the page a reader sees: Hugo shortcodes, Liquid/Jinja/Nunjucks/Markdoc
tags, template expressions, autolinks, entities, escapes, colon containers with bracketed titles, TOC markers,
thematic breaks, inline HTML code; code spans and blocks keep theirs."""

from __future__ import annotations

from pathlib import Path

import pytest
from reground.evals.runs.chunk_markup import generator_markup_in
from reground.tools.text.chunking import chunk_document
from reground.tools.text.loaders import Document, load_paths
from reground.tools.text.markdown import normalise_inline, parse_markdown
from reground.tools.tuning.stores import INGEST


@pytest.mark.parametrize(
    ("source", "shown", "links"),
    [
        ('Run [the add command]({{< relref "commands/add#flags" >}}) first.', "Run the add command first.",
         ("commands/add#flags",)),
        ("See [the theme]({{ '/docs/themes/' | relative_url }}) page.", "See the theme page.", ("/docs/themes/",)),
        ("Since {{< new-in 1.4.0 />}} the cache is shared.", "Since the cache is shared.", ()),
        ("{{% notice warning %}}Back up first.{{% /notice %}}", "Back up first.", ()),
        ("{%- include badge.html version=\"2.0\" -%} Plugins load in order.", "Plugins load in order.", ()),
        ("The release is {{ site.version }} for all users.", "The release is for all users.", ()),
        ("{% aside type=\"tip\" %}Pin the version.{% /aside %}", "Pin the version.", ()),
        ("Mail <mailto:ops@example.org> or read <https://example.org/runbook>.",
         "Mail ops@example.org or read https://example.org/runbook.", ("mailto:ops@example.org",
                                                                       "https://example.org/runbook")),
        ("Read <project:#caching-rules> next.", "Read caching-rules next.", ("project:#caching-rules",)),
        ("Limits &mdash; 10&nbsp;MB, set \\<size\\> and \\*not\\* &lt;max&gt;.",
         "Limits — 10 MB, set <size> and *not* <max>.", ()),
        ("**Type:** <code>Map&lt;string, number&gt;</code>", "Type: `Map<string, number>`", ()),
        ("Keep `{{ .Title }}` and `{% raw %}` as written.", "Keep `{{ .Title }}` and `{% raw %}` as written.", ()),
        ("An image { width=\"300\" } and a heading {: #anchor }", "An image and a heading", ()),
    ],
    ids=["hugo-relref", "liquid-url", "hugo-inline", "hugo-paired", "liquid-include", "expression", "markdoc",
         "autolinks", "myst-autolink", "entities-escapes", "html-code", "code-spans-kept", "attribute-lists"],
)  # fmt: skip
def test_inline_generator_markup_reads_as_shown(source: str, shown: str, links: tuple[str, ...]) -> None:
    assert normalise_inline(source) == (shown, links)


def test_blocks_of_generator_markup() -> None:
    page = "\n".join(
        [
            "# Deploy",
            "[[toc]]",
            "",
            ":::caution[Before you start]",
            "Stop the workers.",
            ":::",
            "",
            "---",
            "",
            "- Build the image.",
            "",
            "  ::: warning",
            "  Tag it first.",
            "  :::",
            "",
            "- Push it.",
            "",
            "````md",
            ":::note",
            "```sh",
            "deploy --now",
            "```",
            ":::",
            "````",
        ]
    )
    blocks = [(b.kind, b.text) for b in parse_markdown(page) if b.kind != "heading"]
    assert blocks == [
        ("paragraph", "Before you start: Stop the workers."),
        ("list", "- Build the image. Warning: Tag it first.\n- Push it."),
        ("code", "````md\n:::note\n```sh\ndeploy --now\n```\n:::\n````"),
    ]


def test_a_template_file_of_a_site_is_no_text_but_its_code_blocks_keep_their_tags(tmp_path: Path) -> None:
    theme = tmp_path / "main.html"
    theme.write_text('{% extends "base.html" %}{% block content %}<p>Welcome, {{ user.name }}.</p>{% endblock %}')
    page = tmp_path / "guide.html"
    page.write_text("<html><body><p>Write a loop:</p><pre>{% for page in pages %}{{ page.title }}{% endfor %}</pre>")
    documents, _ = load_paths([tmp_path])
    texts = {d.doc_id: d.text for d in documents}
    assert texts["main.html"] == "Welcome, ."
    assert "{% for page in pages %}{{ page.title }}{% endfor %}" in texts["guide.html"]


def test_the_counter_sees_generator_markup_outside_code_only() -> None:
    assert generator_markup_in('Use {{< relref "x" >}} here.') == ["template"]
    assert generator_markup_in("See <https://example.org>.") == ["autolink"]
    assert generator_markup_in('Write `{{< relref "x" >}}` or ``a `{% raw %}` b``.') == []
    assert generator_markup_in("```md\n{% raw %}\n```") == []
    chunks = chunk_document(
        Document("p.md", "P", '# P\n\nRead [it]({{< ref "a" >}}) &amp; go.\n', source="p.md"),
        max_tokens=INGEST.chunk_tokens,
    )
    assert [generator_markup_in(c["text"]) for c in chunks] == [[]]


def test_a_component_tag_spread_over_lines_is_no_text() -> None:
    page = 'Intro line.\n\n<Code\n\tslot="preview"\n\tcode={`## Hi\n\nFrom {space}!`}\n\tlang="md"\n/>\n\nAfter it.\n'
    assert [b.text for b in parse_markdown(page)] == ["Intro line.", "After it."]
