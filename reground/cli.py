"""`reground` command line: llm, ingest, ask, chat, demo, eval."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each group lives in its own module and adds its sub-commands; imported lazily so `--help` is quick
# and a missing optional extra only breaks its own group.
COMMAND_GROUPS = ("llm", "ingest", "conversation", "eval")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reground",
        description="Faithful conversational question answering over your own documents (LangGraph).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in COMMAND_GROUPS:
        module = importlib.import_module(f"reground.commands.{group}")
        module.add_commands(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "func", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
