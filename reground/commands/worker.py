"""`reground worker start|status|stop`: a warm process that answers `reground ask` for one data dir.

A one-shot `reground ask` pays for its imports and for loading the models and the collection's search index before
its turn, seconds for a turn that takes a tenth of one once loaded. A worker keeps the graph, the models and the
opened collections loaded in a background process; `reground ask` hands it the question over a Unix socket in the
data dir's state dir and prints the reply it sends back, so the one-shot costs a small client process plus a warm
turn. Without a worker, or when it cannot serve the same run (another data dir, other REGROUND_* / OPENAI_*
variables, human review), `ask` runs the turn in its own process as before: the worker changes speed, never answers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from reground.commands import add_parser
from reground.commands.ask_worker import (
    REQUEST_OPTIONS,
    environment_fingerprint,
    messages,
    read_record,
    record_path,
    resolved_data_dir,
    send_message,
)
from reground.tools.tuning.models import ASK_WORKER

SOCKET = "ask-worker.sock"
LOG = "ask-worker.log"
WARM_UP_QUESTION = "What does this collection cover?"  # any question: the first turn loads what every turn needs
WARM_UP_THREAD = "reground-worker-warm-up"


# --- the worker process ---------------------------------------------------------------------------------------


class Worker:
    """The graph with its checkpointer, kept open; one request at a time (a turn uses both cores already)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def answer(self, request: Mapping[str, Any], send: Callable[[Mapping[str, Any]], None]) -> None:
        from reground.commands.conversation import _context, check_question, run_turn
        from reground.tools.errors import RegroundError

        args = argparse.Namespace(**{name: request.get(name) for name in REQUEST_OPTIONS}, review=None)
        try:
            context = _context(args)
            if context.review_mode != "off":
                send({"fallback": "review"})
                return
            check_question(args.question, context)
            result = run_turn(
                self.graph,
                context,
                str(args.thread),
                str(args.question),
                progress=lambda text: send({"progress": text}),
            )
        except RegroundError as exc:
            send({"error": {"class": type(exc).__name__, "message": str(exc)}})
            return
        except Exception as exc:  # a bug: the client reports it as one, the worker keeps serving
            send({"error": {"class": "", "message": f"{type(exc).__name__}: {exc}"}})
            return
        send({"result": result})

    def warm_up(self, collection: str, data: str) -> None:
        """One turn on a throwaway thread, so the first real question finds the models and the index loaded."""
        request = {"question": WARM_UP_QUESTION, "collection": collection, "data_dir": data, "thread": WARM_UP_THREAD}
        self.answer(request, lambda message: None)
        with contextlib.suppress(Exception):
            self.graph.checkpointer.delete_thread(WARM_UP_THREAD)


def serve(data: str | None, collections: list[str], idle_s: float) -> int:
    """Serve `ask` requests on the state dir's socket until stopped or idle for idle_s (0: never)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from reground.graph.builder import build_graph

    root = resolved_data_dir(data)
    record_file = record_path(data)
    path = record_file.with_name(SOCKET)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(
        0o077
    )  # fact: a file mode; the socket answers from this user's documents: only this user may connect
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_umask)
    listener.listen()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        with SqliteSaver.from_conn_string(str(root / "threads.sqlite")) as saver:
            worker = Worker(build_graph(checkpointer=saver))
            for collection in collections:
                worker.warm_up(collection, str(root))
            record = {"pid": os.getpid(), "socket": str(path), "data_dir": str(root), "env": environment_fingerprint()}
            record_file.write_text(json.dumps(record) + "\n", encoding="utf-8")
            print(f"serving {root} on {path}", flush=True)
            listener.settimeout(idle_s or None)
            while True:
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    print(f"idle for {idle_s:g} s: stopping", flush=True)
                    return 0
                with conn:
                    conn.settimeout(None)
                    _handle(worker, conn)
    finally:
        listener.close()
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError, ValueError):
            if json.loads(record_file.read_text(encoding="utf-8")).get("pid") == os.getpid():
                record_file.unlink()


def _handle(worker: Worker, conn: socket.socket) -> None:
    def send(message: Mapping[str, Any]) -> None:
        with contextlib.suppress(OSError):
            send_message(conn, message)

    try:
        request = next(messages(conn), None)
    except (OSError, ValueError):
        return
    if request and isinstance(request.get("ask"), dict):
        worker.answer(request["ask"], send)


# --- the commands --------------------------------------------------------------------------------------------


def cmd_start(args: argparse.Namespace) -> int:
    """Start the worker in the background and wait until it serves (its warm-up turns done)."""
    from reground.tools.adapters.paths import state_dir
    from reground.tools.errors import InputError, ModelError

    running = read_record(args.data_dir)
    if running is not None:
        print(f"a worker already serves {running['data_dir']} (pid {running['pid']}); `reground worker stop` first")
        return 0
    if args.idle_minutes < 0:
        raise InputError(f"--idle-minutes must be 0 (never) or more, got {args.idle_minutes:g}")
    log = state_dir(args.data_dir) / LOG
    command = [sys.executable, "-m", "reground", "worker", "serve", "--idle-minutes", str(args.idle_minutes)]
    command += ["--data-dir", str(resolved_data_dir(args.data_dir))]
    for collection in args.collection or ():
        command += ["--collection", collection]
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + ASK_WORKER.start_timeout_s
    while time.monotonic() < deadline:
        record = read_record(args.data_dir)
        if record is not None and record.get("pid") == process.pid:
            print(f"worker serving {record['data_dir']} (pid {process.pid}, log {log}); `reground ask` uses it")
            return 0
        if process.poll() is not None:
            break
        time.sleep(ASK_WORKER.start_poll_s)
    if process.poll() is None:
        process.terminate()
    tail = " ".join(log.read_text(encoding="utf-8", errors="replace").split()[-ASK_WORKER.log_tail_words :])
    raise ModelError(f"the ask worker did not start (log {log}): {tail}")


def cmd_status(args: argparse.Namespace) -> int:
    record = read_record(args.data_dir)
    if record is None:
        print("no ask worker is running for this data dir (start one with `reground worker start`)")
        return 1
    same = record.get("env") == environment_fingerprint()
    note = "" if same else "; it serves other REGROUND_*/OPENAI_* settings than this shell's, so `ask` runs alone"
    print(f"worker serving {record['data_dir']} (pid {record['pid']}, socket {record['socket']}){note}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    record = read_record(args.data_dir)
    if record is None:
        print("no ask worker was running for this data dir")
        return 0
    pid = int(record["pid"])
    os.kill(pid, signal.SIGTERM)
    for _ in range(ASK_WORKER.stop_polls):
        try:
            os.kill(pid, 0)
        except OSError:
            break
        time.sleep(ASK_WORKER.stop_poll_s)
    print(f"stopped the ask worker (pid {pid})")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    return serve(args.data_dir, list(args.collection or ()), 60.0 * args.idle_minutes)  # fact: seconds a minute


def add_commands(subparsers: Any) -> None:
    worker = add_parser(subparsers, "worker")
    commands = worker.add_subparsers(dest="worker_command", metavar="COMMAND", required=True)
    start = commands.add_parser("start", help="start a warm worker for this data dir in the background")
    start.set_defaults(func=cmd_start)
    serve_ = commands.add_parser("serve", help="run the worker in the foreground (what `start` runs)")
    serve_.set_defaults(func=cmd_serve)
    for sub in (start, serve_):
        sub.add_argument(
            "--collection",
            action="append",
            help="load this collection before serving (repeatable): its first question is as fast as the next",
        )
        sub.add_argument(
            "--idle-minutes",
            type=float,
            default=ASK_WORKER.idle_minutes,
            help="stop after this long without a question (0: never)",
        )
    status = commands.add_parser("status", help="show the worker of this data dir")
    status.set_defaults(func=cmd_status)
    stop = commands.add_parser("stop", help="stop the worker of this data dir")
    stop.set_defaults(func=cmd_stop)
    for sub in (start, serve_, status, stop):
        sub.add_argument("--data-dir", help="store directory (default: $REGROUND_DATA_DIR or ~/.local/share/reground)")
