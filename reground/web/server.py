"""Start `langgraph dev` serving reground's graphs and the chat page, offline, and stop it by its process id.

`reground ui` uses this; it writes its own langgraph.json (the same graphs and custom app as the repository's,
tests/unit/test_web_app.py checks that) into the server's working directory, so it works from an installed
package as well as from a checkout, and the server's threads (`.langgraph_api/`) live in that directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from reground.tools.adapters.local_server import free_port, log_tail
from reground.tools.errors import RegroundError
from reground.tools.tuning.web import CHAT_PAGE
from reground.web.origin import ORIGINS_ENV

GRAPHS = {"reground": "reground.graph.builder:graph", "ingest": "reground.graph.ingest_graph:graph"}
CUSTOM_APP = "reground.web.app:app"
# What keeps `langgraph dev` from phoning home (shared/notes/offline-stack.md; docs/deployment.md).
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}
DEFAULT_PORT = CHAT_PAGE.default_port
START_TIMEOUT_S = CHAT_PAGE.start_timeout_s
POLL_S = CHAT_PAGE.poll_s
STOP_GRACE_S = CHAT_PAGE.stop_grace_s
LOG_LINES = CHAT_PAGE.log_lines


class ServerStartError(RegroundError, RuntimeError):
    """`langgraph dev` exited or did not answer; the message carries its log's tail."""


def langgraph_config(origins: Sequence[str] = ()) -> dict[str, object]:
    """The langgraph.json `reground ui` serves: reground's graphs plus the chat page. CORS names the allowed other
    origins only (none by default): langgraph-api's default is `*` (any site's page may read the answers)."""
    cors: dict[str, object] = {"allow_origins": list(origins)}
    if origins:  # the listed origins may send what the page sends (JSON writes, any method it uses)
        cors.update(allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"], allow_headers=["*"])
    http = {"app": CUSTOM_APP, "cors": cors}
    return {"dependencies": ["."], "graphs": dict(GRAPHS), "http": http, "python_version": "3.11"}


def pick_port(wanted: int | None) -> int:
    """`wanted` when given (the server fails clearly if it is taken), else DEFAULT_PORT if free, else a free one."""
    if wanted:
        return wanted
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        taken = sock.connect_ex(("127.0.0.1", DEFAULT_PORT)) == 0
    return free_port() if taken else DEFAULT_PORT


@dataclass
class PageServer:
    """A running `langgraph dev` with the chat page: its process, URL and log."""

    process: subprocess.Popen[bytes]
    host: str
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def page_url(self) -> str:
        return f"{self.url}/chat"

    def stop(self) -> None:
        """SIGTERM the server's process group (it runs in a session of its own), then SIGKILL after a grace."""
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_GRACE_S)


def start_page_server(
    workdir: Path,
    *,
    port: int,
    env: Mapping[str, str],
    host: str = "127.0.0.1",
    timeout_s: float = START_TIMEOUT_S,
    origins: Sequence[str] = (),
) -> PageServer:
    """Start `langgraph dev` in `workdir` (its threads are kept there) and wait until /ok answers on `port`;
    `origins`: other web origins allowed to use the API besides the page's own."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "langgraph.json"
    config.write_text(json.dumps(langgraph_config(origins), indent=2) + "\n", encoding="utf-8")
    if origins:
        env = {**env, ORIGINS_ENV: ",".join(origins)}
    log = workdir / "langgraph-dev.log"
    command = [
        str(Path(sys.executable).with_name("langgraph")),
        "dev", "--no-browser", "--no-reload",
        "--host", host, "--port", str(port), "--config", str(config),
    ]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env={**os.environ, **OFFLINE_ENV, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = PageServer(process=process, host=host, port=port, log=log)
    try:
        _wait_ready(server, timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: PageServer, timeout_s: float) -> None:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if server.process.poll() is not None:
            raise ServerStartError(
                f"langgraph dev exited with {server.process.returncode}; log {server.log}:\n"
                f"{log_tail(server.log, LOG_LINES)}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/ok", timeout=2.0).status_code == httpx.codes.OK:
                # `langgraph dev` moves to another port in silence when its own is taken: read what it announced.
                announced = re.findall(
                    r"API: \S*?http://[\d.]+:(\d+)", log_tail(server.log, CHAT_PAGE.log_search_lines)
                )
                if announced and int(announced[-1]) != server.port:
                    raise ServerStartError(f"port {server.port} is taken (langgraph dev moved to {announced[-1]})")
                return
        time.sleep(POLL_S)
    raise ServerStartError(f"langgraph dev did not answer within {timeout_s:.0f} s; log {server.log}")
