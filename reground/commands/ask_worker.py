"""The client side of the ask worker (`reground worker`, reground/commands/worker.py): how `reground ask` finds the
data dir's worker and hands it the question. Only the standard library at import: `ask` stays a small process."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

RECORD = "ask-worker.json"  # in the state dir: the worker's pid, socket, data dir and environment fingerprint
# Variables that change what a turn does: a worker serves only clients whose values equal its own.
ENV_PREFIXES = ("REGROUND_", "OPENAI_", "LANGSMITH_", "LANGCHAIN_")
# What `ask` sends: its options that shape the turn (paths resolved by the client, whose working directory counts).
REQUEST_OPTIONS = ("question", "collection", "data_dir", "store", "model", "filter", "thread", "set")
CONNECT_TIMEOUT_S = 1.0  # a worker that does not accept within this is treated as gone


def environment_fingerprint(environ: Mapping[str, str] | None = None) -> str:
    """A digest of the variables that change a turn (their values never leave the process)."""
    env = os.environ if environ is None else environ
    items = sorted((k, v) for k, v in env.items() if k.startswith(ENV_PREFIXES))
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()


def resolved_data_dir(data: str | None) -> Path:
    from reground.tools.adapters.paths import data_dir

    return data_dir(data).resolve()


def record_path(data: str | None) -> Path:
    from reground.tools.adapters.paths import state_dir

    return state_dir(data) / RECORD


def read_record(data: str | None) -> dict[str, Any] | None:
    """The running worker's record for this data dir, or None (none recorded, or its process is gone)."""
    path = record_path(data)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        os.kill(int(record["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, dict) else None


def send_message(conn: socket.socket, message: Mapping[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def messages(conn: socket.socket) -> Iterator[dict[str, Any]]:
    with conn.makefile("r", encoding="utf-8") as stream:
        for line in stream:
            yield json.loads(line)


def ask_worker(args: argparse.Namespace, on_progress: Callable[[str], None] | None) -> dict[str, Any] | None:
    """The turn's result from the data dir's worker, or None when no worker can serve this run (the caller then
    runs the turn itself). A user error the worker raised is raised here as the same RegroundError class."""
    if getattr(args, "review", None):
        return None  # a reviewer answers on this terminal: the turn runs here
    data = str(resolved_data_dir(args.data_dir))
    record = read_record(args.data_dir)
    if record is None or record.get("data_dir") != data or record.get("env") != environment_fingerprint():
        return None
    request = {name: getattr(args, name, None) for name in REQUEST_OPTIONS}
    request["data_dir"] = data
    if request["store"] and str(request["store"]).startswith(("chroma:", "pgserver:")):
        scheme, _, rest = str(request["store"]).partition(":")
        request["store"] = f"{scheme}:{Path(rest).expanduser().resolve()}" if rest else request["store"]
    last: dict[str, Any] = {}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_TIMEOUT_S)
        conn.connect(str(record["socket"]))
        conn.settimeout(None)
        send_message(conn, {"ask": request})
        for message in messages(conn):
            if "progress" not in message:
                last = message
                break
            if on_progress is not None:
                on_progress(str(message["progress"]))
    except (OSError, ValueError):
        return None  # the worker went away (or never answered): the turn runs here
    finally:
        conn.close()
    if "error" in last:
        raise _error_of(last["error"])
    return dict(last["result"]) if "result" in last else None


def _error_of(error: Mapping[str, Any]) -> Exception:
    from reground.tools import errors

    kind = getattr(errors, str(error.get("class", "")), None)
    if isinstance(kind, type) and issubclass(kind, errors.RegroundError):
        return kind(str(error.get("message", "")))
    return RuntimeError(f"the ask worker failed: {error.get('message', '')}")
