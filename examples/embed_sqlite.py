"""Embed reground in your own app, with conversations that survive a restart (SQLite checkpoints).

    python examples/embed_sqlite.py --db chats.sqlite --collection demo-hr --thread alice \\
        "How many days of annual leave do I get?" "Can I carry them over?"

Run it twice with the same --db and --thread: the second run continues the conversation (the
follow-up is rewritten with the earlier turns, which come from the SQLite file, not from memory).
With Postgres instead, swap the saver: `PostgresSaver.from_conn_string(uri)` from
`langgraph-checkpoint-postgres` (see docs/deployment.md); nothing else changes.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context


@contextmanager
def open_app(db_path: str | Path, **overrides: Any) -> Iterator[Any]:
    """A compiled reground graph whose threads live in the SQLite file `db_path`.

    `overrides` go to `build_graph` (e.g. `chat_model=`, `store=`), for tests or your own clients.
    The connection is closed on exit; open the app again later and every thread is still there.
    """
    connection = sqlite3.connect(str(db_path), check_same_thread=False)
    try:
        yield build_graph(checkpointer=SqliteSaver(connection), **overrides)
    finally:
        connection.close()


def ask(app: Any, thread_id: str, question: str, context: Context) -> dict[str, Any]:
    """One turn on a thread: only the new user message is sent, the checkpointer holds the rest."""
    config = run_config(context, configurable={"thread_id": thread_id})
    output = app.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)
    return dict(output["result"])


def history(app: Any, thread_id: str, context: Context) -> list[tuple[str, str]]:
    """(role, text) of every message on the thread, as the checkpointer has them."""
    state = app.get_state(run_config(context, configurable={"thread_id": thread_id}))
    return [(m.type, str(m.content)) for m in state.values.get("messages", [])]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("questions", nargs="+", help="questions to ask, in order, on the thread")
    parser.add_argument("--db", default="reground-threads.sqlite", help="SQLite file holding the threads")
    parser.add_argument("--thread", default="demo", help="thread id (one per user conversation)")
    parser.add_argument("--collection", default=None, help="collection to answer from")
    parser.add_argument("--data-dir", default=None, help="store directory (default $REGROUND_DATA_DIR)")
    parser.add_argument("--chat-model", default=None, help="model spec, e.g. local:default")
    args = parser.parse_args(argv)
    settings = {
        key: value
        for key, value in {
            "collection": args.collection,
            "data_dir": args.data_dir,
            "chat_model": args.chat_model,
        }.items()
        if value
    }
    context = Context(**settings)
    with open_app(args.db) as app:
        earlier = history(app, args.thread, context)
        if earlier:
            print(f"(thread {args.thread!r} continues: {len(earlier)} earlier messages, {args.db})")
        for question in args.questions:
            result = ask(app, args.thread, question, context)
            print(f"you: {question}\nreground: {result['answer']}")
            for citation in result["citations"]:
                print(f"  [{citation['number']}] {citation['title']} {citation['url']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
