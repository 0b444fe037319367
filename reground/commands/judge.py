"""`reground judge train|cost`: train the judge (signals/judge.py) from the dev data with a fixed seed, or time what
it adds to a turn (evals/train/judge.py)."""

from __future__ import annotations

import argparse
from typing import Any

from reground.commands import add_parser


def cmd_judge(args: argparse.Namespace) -> int:
    from reground.evals.train.judge import main

    return main([args.action, *args.options])


def add_commands(subparsers: Any) -> None:
    judge = add_parser(
        subparsers,
        "judge",
        description="Options after the action go to `python -m reground.evals.train.judge` (see its --help).",
    )
    judge.add_argument("action", choices=["train", "cost"])
    judge.add_argument("options", nargs=argparse.REMAINDER, help="--doc2dial, --mtrag, --weights, --out, --cache")
    judge.set_defaults(func=cmd_judge)
