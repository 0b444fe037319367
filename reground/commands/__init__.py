"""CLI sub-command groups; `reground.cli` wires them.

`COMMANDS` names each command, the module that adds it and its one-line help. The CLI imports only the module of
the command it runs (`reground --help` imports none), so a measuring or training command (`eval`, `judge`) loads its
code from `reground.evals` only when it runs, and a missing optional extra breaks only its own group.
"""

from __future__ import annotations

from typing import Any

# command -> (module under reground.commands that adds it, its help in `reground --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "llm": ("llm", "the embedded local LLM server (llama.cpp)"),
    "ingest": ("ingest", "index .jsonl/.md/.mdx/.txt/.html/.pdf files and folders into a collection"),
    "collections": ("collections", "list collections, or one collection's documents"),
    "ask": ("conversation", "answer one question (follow up with --thread)"),
    "chat": ("conversation", "interactive conversation with citations and scores"),
    "demo": ("conversation", "start the local LLM, ingest the demo HR corpus, run 3 turns, stop"),
    "worker": ("worker", "a warm process for this data dir that answers `reground ask` at once: start|status|stop"),
    "engine": ("engine", "the bundled search engine of a pgserver: store (PostgreSQL + pgvector): status|stop"),
    "eval": ("eval", "evaluate retrieval and answers; calibrate; write reports (loads reground.evals)"),
    "judge": (
        "judge",
        "train the judge that decides which sentence answers a question (run from the repository root)",
    ),
    "ui": ("ui", "start the local LLM and the LangGraph server with the chat page; print its URL (Ctrl-C stops)"),
}


def add_parser(subparsers: Any, name: str, **options: Any) -> Any:
    """The sub-parser of a command in COMMANDS, with its help from there (one declaration)."""
    return subparsers.add_parser(name, help=COMMANDS[name][1], **options)
