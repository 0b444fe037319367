"""`reground llm serve|status|stop|models`: the embedded local LLM server."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from reground.commands import add_parser


def cmd_serve(args: argparse.Namespace) -> int:
    from reground.tools.adapters.local_server import LocalServerError, resolve_gguf, serve

    try:
        print(f"preparing {args.model} ...", file=sys.stderr)
        resolve_gguf(args.model)
        info = serve(args.model, port=args.port, n_ctx=args.n_ctx, n_threads=args.threads, data=args.data_dir)
    except LocalServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{info.model} serving at {info.url} (pid {info.pid}, log {info.log})")
    print("chat model spec `local:default` now finds it; stop it with `reground llm stop`")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from reground.tools.adapters.local_server import status

    info = status(args.data_dir)
    if info is None:
        print("no local LLM server is running (start one with `reground llm serve`)")
        return 1
    print(f"{info.model} at {info.url} (pid {info.pid}, gguf {info.gguf}, log {info.log})")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Stops only the server this data dir's `serve` started (its record names the data dir and process)."""
    from reground.tools.adapters.local_server import LocalServerError, stop

    try:
        info = stop(args.data_dir)
    except LocalServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"stopped {info.model} (pid {info.pid})" if info else "no local LLM server was running for this data dir")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from reground.tools.adapters.local_server import DEFAULT_MODEL, MODELS, installed_models

    installed = installed_models()
    for name, spec in MODELS.items():
        mark = "installed" if installed[name] else f"not installed ({spec.install})"
        default = " [default]" if name == DEFAULT_MODEL else ""
        print(f"{name}{default}: {spec.description}; {mark}")
    return 0


def add_commands(subparsers: Any) -> None:
    from reground.tools.adapters.local_server import DEFAULT_MODEL
    from reground.tools.tuning.models import LOCAL_SERVER

    llm = add_parser(subparsers, "llm")
    commands = llm.add_subparsers(dest="llm_command", metavar="COMMAND", required=True)
    serve = commands.add_parser("serve", help="start the local OpenAI-compatible server in the background")
    serve.add_argument("--model", default=DEFAULT_MODEL, help=f"model name or a .gguf path (default {DEFAULT_MODEL})")
    serve.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    n_ctx = LOCAL_SERVER.n_ctx
    serve.add_argument("--n-ctx", type=int, default=n_ctx, help=f"context window in tokens (default {n_ctx})")
    serve.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    serve.set_defaults(func=cmd_serve)
    status = commands.add_parser("status", help="show the server this data dir started")
    status.set_defaults(func=cmd_status)
    stop = commands.add_parser("stop", help="stop the server this data dir started")
    stop.set_defaults(func=cmd_stop)
    for sub in (serve, status, stop):
        sub.add_argument(
            "--data-dir",
            help="the data dir whose server this is (default: $REGROUND_DATA_DIR or ~/.local/share/reground); "
            "its record lives in <data dir>/run unless $REGROUND_STATE_DIR is set",
        )
    commands.add_parser("models", help="list the models reground can serve").set_defaults(func=cmd_models)
