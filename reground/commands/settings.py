"""`--set FIELD=VALUE`: any Context setting from the command line, the same way for `ask`, `chat` and `eval answers`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

SET_EXAMPLE = "triage.reading_ratio=0.7"


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
    """FIELD=VALUE pairs → Context overrides, checked against the Context's fields (GROUP.FIELD for a group's
    field, or GROUP=JSON for several of them); an unknown name is an InputError naming it."""
    from reground.nodes.context import setting_names
    from reground.tools.errors import InputError

    known = set(setting_names())
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise InputError(
                f"--set {item!r}: expected FIELD=VALUE with FIELD a Context field or GROUP.FIELD, e.g. {SET_EXAMPLE}"
            )
        try:
            out[name] = json.loads(raw)
        except json.JSONDecodeError:
            out[name] = raw
    return out
