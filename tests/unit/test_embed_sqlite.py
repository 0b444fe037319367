"""examples/embed_sqlite.py: a conversation kept in SQLite survives reopening the app."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from reground.nodes.context import Context

from reground.testing.fake_chat import ScriptedChatModel

REPO = Path(__file__).resolve().parents[2]


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "reground_example_embed_sqlite", REPO / "examples" / "embed_sqlite.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_turns_then_a_restart_continues_the_thread(tmp_path: Path, hr_store: Any, hr_store_dir: str) -> None:
    example = load_example()
    db = tmp_path / "threads.sqlite"
    context = Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        groundedness={"use_llm_groundedness_judge": False, "threshold": 0.0},
        refinement={"rewrite_below_margin": 1.0},
        use_principle_refinement=False,
        # every follow-up is rewritten, so the restored history shows in the prompt
    )
    first = "How many days of annual leave do full-time employees in Germany get?"
    second = "Can I carry them over?"
    model = ScriptedChatModel(script={"refine_question": ["Can unused annual leave in Germany be carried over?"]})
    with example.open_app(db, chat_model=model, store=hr_store) as app:
        one = example.ask(app, "alice", first, context)
        two = example.ask(app, "alice", second, context)
        example.ask(app, "bob", "How do I report sick?", context)
    assert one["answer"] and two["answer"]
    assert model.calls_for("refine_question") == 1, "the second turn is a follow-up rewritten with the history"

    # A new process would do exactly this: a fresh model, a fresh graph, the same SQLite file.
    restarted = ScriptedChatModel(script={"refine_question": ["Does carried-over leave expire?"]})
    with example.open_app(db, chat_model=restarted, store=hr_store) as app:
        before = example.history(app, "alice", context)
        assert [role for role, _ in before] == ["human", "ai", "human", "ai"]
        assert before[0][1] == first and before[2][1] == second
        assert before[3][1] == two["answer"]
        example.ask(app, "alice", "When does it expire?", context)
        after = example.history(app, "alice", context)
        assert len(after) == 6
        assert [text for role, text in example.history(app, "bob", context) if role == "human"] == [
            "How do I report sick?"
        ]
    prompt = next(messages for task, messages in restarted.calls if task == "refine_question")
    conversation = str(prompt[-1].content)
    assert first in conversation and second in conversation, "the earlier turns came back from SQLite"
