"""The "Change it" guide (docs/change-it.md, linked from the README) stays true: its Python blocks run, in order,
in one namespace (with the scripted chat model as `my_model` and the HR policies ingested as `my-docs`), and its
diff applies to graph/builder.py and wires the new node into a graph that runs."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from reground.tools.tuning.stores import INGEST

from reground.testing.fake_chat import ScriptedChatModel

REPO = Path(__file__).resolve().parents[2]
GUIDE = Path("docs") / "change-it.md"  # the README links it from its "Change it"
GROUNDED = "Full-time employees in Germany receive 30 working days of paid annual leave per calendar year [1]."


def section() -> str:
    return (REPO / GUIDE).read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(), re.DOTALL)


def apply_diff(source: str, diff: str) -> str:
    """Apply a README diff (hunks separated by '...' lines; ' ' context, '-' removed, '+' added lines) to source.
    Each hunk's old text must occur exactly once."""
    for hunk in re.split(r"(?m)^\.\.\.\n", diff):
        lines = hunk.splitlines()
        old = "\n".join(line[1:] for line in lines if line[:1] in (" ", "-"))
        new = "\n".join(line[1:] for line in lines if line[:1] in (" ", "+"))
        assert source.count(old) == 1, f"the README diff no longer applies to graph/builder.py:\n{old}"
        source = source.replace(old, new)
    return source


@pytest.fixture
def my_docs(tmp_path: Path, hr_corpus: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    data_dir = tmp_path / "data"
    assert not ingest(
        [hr_corpus],
        PassageStore.open("my-docs", data_dir=data_dir, create=True),
        progress=False,
        max_tokens=INGEST.chunk_tokens,
    ).errors
    monkeypatch.setenv("REGROUND_DATA_DIR", str(data_dir))
    return str(data_dir)


@pytest.fixture
def elsewhere_dir(tmp_path: Path) -> str:
    """Another store, reached only through the store spec: its 'my-docs' holds one document of its own."""
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    doc = {"doc_id": "elsewhere-leave", "title": "Leave", "url": "https://elsewhere.example", "text": GROUNDED[:-5]}
    corpus = tmp_path / "elsewhere.jsonl"
    corpus.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    data_dir = tmp_path / "elsewhere"
    assert not ingest(
        [corpus],
        PassageStore.open("my-docs", data_dir=data_dir, create=True),
        progress=False,
        max_tokens=INGEST.chunk_tokens,
    ).errors
    return str(data_dir)


def test_the_section_has_the_four_examples() -> None:
    text = section()
    for topic in ("A different model per role", "A new prompt", "A new node", "Another vector store"):
        assert f"**{topic}." in text, topic
    assert len(blocks("python")) == 4 and len(blocks("diff")) == 1


def test_the_python_examples_run_and_the_diff_wires_the_new_node(
    my_docs: str, elsewhere_dir: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    my_model = ScriptedChatModel(script={"answer": [GROUNDED]})
    namespace: dict[str, Any] = {"my_model": my_model, "data_dir": elsewhere_dir, "__name__": "readme_change_it"}
    for code in blocks("python"):
        exec(compile(code, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "30 working days" in printed and "True" in printed, printed
    assert printed.rstrip().endswith("elsewhere-leave"), "the store spec opened the other store"
    prompts = [str(messages[-1].content) for task, messages in my_model.calls if task == "answer"]
    assert any(p.startswith("Answer the user's last message in one sentence") for p in prompts), "the new prompt"

    # The new node: the README's module, wired by the README's diff into a copy of the builder.
    node_module = types.ModuleType("reground.nodes.expand_query")
    node_module.expand_query = namespace["expand_query"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "reground.nodes.expand_query", node_module)
    source = apply_diff((REPO / "graph" / "builder.py").read_text(encoding="utf-8"), blocks("diff")[0])
    builder = types.ModuleType("readme_builder")
    exec(compile(source, "graph/builder.py (README diff)", "exec"), builder.__dict__)
    from reground import Context

    context = Context(collection="my-docs")
    graph = builder.build_graph(chat_model=ScriptedChatModel(script={"answer": [GROUNDED]}))
    assert "expand_query" in graph.get_graph().nodes
    updates = list(
        graph.stream(
            {"messages": [{"role": "user", "content": "How much holiday do I get?"}]},
            config=builder.run_config(context),
            context=context,
            stream_mode="updates",
        )
    )
    nodes = [name for update in updates for name in update]
    assert nodes.index("extract_keywords") < nodes.index("expand_query") < nodes.index("retrieve"), nodes
    expanded = next(update["expand_query"] for update in updates if "expand_query" in update)
    assert {"annual leave", "vacation"} <= set(expanded["keywords"]), expanded
