"""Fresh `reground` processes for the startup and one-shot benchmarks: the command a user runs, one timed process,
and a stub OpenAI-compatible endpoint that counts the LLM calls a turn makes (the extract default makes none)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

STARTUP_TIMEOUT_S = 600  # one `reground` process at most (a loaded 2-core machine takes tens of seconds)


class StubHandler(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that lists one model and refuses (and counts) every call: the extract default
    must answer without one."""

    calls = 0
    lock = threading.Lock()

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "stub", "object": "model"}]}).encode()
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        with self.lock:
            type(self).calls += 1
        self.send_response(HTTPStatus.SERVICE_UNAVAILABLE)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def stub_llm() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def timed_process(command: Sequence[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds user + sys, stdout) of one fresh process; a failure is an error naming it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=STARTUP_TIMEOUT_S, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:2])} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def reground_command() -> list[str]:
    """The installed console script beside this interpreter (what a user runs), else `python -m reground`."""
    script = Path(sys.executable).with_name("reground")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "reground"]
