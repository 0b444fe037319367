"""Embedding with Postgres persistence: `build_graph(checkpointer=PostgresSaver)` on a real cluster.

Runs where Postgres binaries and `langgraph-checkpoint-postgres` are installed (skipped otherwise);
the cluster is a throwaway one in a temp directory, stopped by PID.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context
from servers import Postgres, postgres_binaries, start_postgres

from reground.testing.fake_chat import ScriptedChatModel

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    pytest.importorskip("langgraph.checkpoint.postgres", reason="pip install langgraph-checkpoint-postgres")
    if postgres_binaries() is None:
        pytest.skip("Postgres binaries (initdb, postgres) not installed")
    root = Path(tempfile.mkdtemp(prefix="reground-pg-"))  # not under pytest's 0700 tmp: postgres must read it
    server = start_postgres(root)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def ask(graph: Any, context: Context, thread: str, question: str) -> dict[str, Any]:
    config = run_config(context, configurable={"thread_id": thread})
    out = graph.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)
    return dict(out["result"])


def test_threads_persist_in_postgres_across_app_restarts(postgres: Postgres, hr_store: Any, hr_store_dir: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    context = Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        groundedness={"use_llm_groundedness_judge": False},
        refinement={"rewrite_below_margin": 1.0},
        # every follow-up is rewritten, so the restored history shows in the prompt
    )
    first, second = "How much annual leave do I get in Germany?", "Can I carry it over?"
    with PostgresSaver.from_conn_string(postgres.uri) as saver:
        saver.setup()
        graph = build_graph(checkpointer=saver, chat_model=ScriptedChatModel(), store=hr_store)
        ask(graph, context, "alice", first)
        ask(graph, context, "alice", second)
    # A second app instance (another worker, or the same one after a restart) continues the thread.
    model = ScriptedChatModel()
    with PostgresSaver.from_conn_string(postgres.uri) as saver:
        graph = build_graph(checkpointer=saver, chat_model=model, store=hr_store)
        config = run_config(context, configurable={"thread_id": "alice"})
        messages = graph.get_state(config).values["messages"]
        assert [m.content for m in messages if m.type == "human"] == [first, second]
        ask(graph, context, "alice", "Until when?")
        assert len(graph.get_state(config).values["messages"]) == 6
        assert graph.get_state(run_config(context, configurable={"thread_id": "bob"})).values == {}
    refine_prompt = next(messages for task, messages in model.calls if task == "refine_question")
    assert first in str(refine_prompt[-1].content), "the follow-up was refined with history read from Postgres"
