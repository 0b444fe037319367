"""`reground engine status|stop`: the bundled search engine a `pgserver:<dir>` store starts and leaves running.

Opening a `pgserver:` store starts PostgreSQL + pgvector in <dir> and leaves it running for every process that opens
the same spec (by design: the CLI's commands, `langgraph dev` and an app share it), as `reground llm serve` leaves the
LLM server running; these commands show and stop it.
"""

from __future__ import annotations

import argparse
from typing import Any

from reground.commands import add_parser

DEFAULT_SPEC = "pgserver:"  # the engine in <the data dir>/engine


def _engine_dir(args: argparse.Namespace) -> Any:
    from reground.tools.stores.engine.process import local_engine_dir_of

    return local_engine_dir_of(args.store)


def cmd_status(args: argparse.Namespace) -> int:
    from reground.tools.stores.engine.process import local_engine_status

    path = _engine_dir(args)
    status = local_engine_status(path)
    if status is None:
        print(f"no engine is running in {path} (opening the store `{args.store}` starts it)")
        return 1
    print(status.describe())
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Stops the server of that directory only (a fast shutdown: open sessions are ended, committed data kept)."""
    from reground.tools.stores.engine.process import EngineError, local_engine_status, stop_local_engine

    path = _engine_dir(args)
    status = local_engine_status(path)
    if status is None:
        print(f"no engine was running in {path}")
        return 0
    if not stop_local_engine(path) or local_engine_status(path) is not None:
        raise EngineError(f"the engine in {path} (pid {status.pid}) did not stop: stop that process yourself")
    print(f"stopped the engine in {path} (pid {status.pid})")
    return 0


def add_commands(subparsers: Any) -> None:
    engine = add_parser(subparsers, "engine")
    commands = engine.add_subparsers(dest="engine_command", metavar="COMMAND", required=True)
    status = commands.add_parser("status", help="show the engine running in a pgserver: store's directory")
    status.set_defaults(func=cmd_status)
    stop = commands.add_parser("stop", help="stop the engine running in a pgserver: store's directory")
    stop.set_defaults(func=cmd_stop)
    for sub in (status, stop):
        sub.add_argument(
            "--store",
            default=DEFAULT_SPEC,
            help="the store spec, pgserver:<dir> (default: pgserver:, the engine in <data dir>/engine)",
        )
