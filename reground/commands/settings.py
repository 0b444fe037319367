"""`--set FIELD=VALUE`: any Context setting from the command line, the same way for `ask`, `chat` and `eval answers`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

SET_EXAMPLE = "triage.reading_ratio=0.7"  # the help's example (nodes.context names it too; loaded with the turn)


def add_set_option(parser: argparse.ArgumentParser, *, applies_to: str = "the turn") -> None:
    """The repeatable `--set FIELD=VALUE` option."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help=f"override a Context field for {applies_to}, a group's field by GROUP.FIELD, e.g. --set {SET_EXAMPLE} "
        "(VALUE is parsed as JSON when it can be); repeatable",
    )


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """The Context's `--set` parser (nodes.context.parse_overrides), imported when a command runs, not for --help."""
    from reground.nodes.context import parse_overrides as parse

    return parse(items)
