"""MyST pages (Sphinx's and Jupyter Book's markdown) read as the rendered page shows them: directives become code,
labelled containers, tabs or nothing; roles become their text; link targets and comments go."""

from __future__ import annotations

from reground.tools.text.markdown import normalise_inline, parse_markdown

MYST_PAGE = """(install-section)=
# Installing

% a comment the build drops

```{note}
Install it with `pip`.
```

:::{admonition} Before you start
:class: tip
Read {ref}`the requirements <reqs>` first.
:::

```{code-block} python
:caption: app.py
import mypkg
```

```{toctree}
:maxdepth: 2
intro
api
```

::::{tab-set}
:::{tab-item} Linux
Run `./install.sh`.
:::
:::{tab-item} Windows
Run `install.ps1`.
:::
::::

```{versionadded} 2.0
The `--fast` flag.
```

Use {py:class}`~mypkg.models.Model`; the path `/users/{user_id}` is code.
"""


def test_myst_directives_become_code_labelled_containers_tabs_or_nothing() -> None:
    blocks = [b for b in parse_markdown(MYST_PAGE) if b.kind != "heading"]
    shown = [(b.kind, b.text, b.variant) for b in blocks]
    assert shown == [
        ("paragraph", "Note: Install it with `pip`.", ""),
        ("paragraph", "Before you start: Read the requirements first.", ""),
        ("code", "```python\nimport mypkg\n```", ""),
        ("paragraph", "Run `./install.sh`.", "Linux"),
        ("paragraph", "Run `install.ps1`.", "Windows"),
        ("paragraph", "New in version 2.0: The `--fast` flag.", ""),
        ("paragraph", "Use `Model`; the path `/users/{user_id}` is code.", ""),
    ]
    text = "\n".join(b.text for b in blocks)
    assert "(install-section)=" not in text and "a comment" not in text and "maxdepth" not in text


def test_roles_render_as_their_text_and_code_names_keep_a_code_span() -> None:
    text, _ = normalise_inline("See {ref}`the guide <sec>`, {term}`MyST`, {math}`x^2` and {py:func}`mypkg.run`.")
    assert text == "See the guide, MyST, x^2 and `mypkg.run`."
    # a brace inside a code span is no role, however the spans fall
    text, _ = normalise_inline("a `{package}@{version}` and `{package}@latest` b")
    assert text == "a `{package}@{version}` and `{package}@latest` b"
