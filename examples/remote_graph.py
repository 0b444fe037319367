"""Use reground served by `langgraph dev` (or a LangGraph deployment) as if it were a local graph.

Start the servers (see the README), then:

    python examples/remote_graph.py --url http://127.0.0.1:2025 "How much annual leave do I get?"

`RemoteGraph` has the compiled graph's interface (`invoke`, `stream`, `get_state`); the thread's
history lives on the server, so each call sends only the new question.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.pregel.remote import RemoteGraph


def connect(url: str, graph_id: str = "reground") -> RemoteGraph:
    """The server's `reground` graph (or any graph id in its langgraph.json)."""
    return RemoteGraph(graph_id, url=url)


def ask(remote: RemoteGraph, thread_id: str, question: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """One turn on a server-side thread (created on first use); returns the turn's result."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    output = remote.invoke({"messages": [{"role": "user", "content": question}]}, config=config, context=context)
    return dict(output["result"])


def stream_progress(
    remote: RemoteGraph, thread_id: str, question: str, context: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The custom progress events of a turn, in order (what a UI shows while it runs)."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    events: list[dict[str, Any]] = []
    for chunk in remote.stream(
        {"messages": [{"role": "user", "content": question}]},
        config=config,
        context=context,
        stream_mode="custom",
    ):
        events.append(dict(chunk))
    return events


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("questions", nargs="+")
    parser.add_argument("--url", default="http://127.0.0.1:2025", help="URL of the LangGraph server")
    parser.add_argument("--thread", default="", help="thread id; default: a new one")
    parser.add_argument("--context", default="{}", help='run context as JSON, e.g. \'{"collection": "demo-hr"}\'')
    args = parser.parse_args(argv)
    remote = connect(args.url)
    thread_id = args.thread or str(uuid.uuid4())
    context = json.loads(args.context) or None
    for question in args.questions:
        result = ask(remote, thread_id, question, context)
        print(f"you: {question}\nreground: {result['answer']}")
        for citation in result["citations"]:
            print(f"  [{citation['number']}] {citation['title']} {citation['url']}")
    print(f"(thread {thread_id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
