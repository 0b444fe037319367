"""Start and stop the real servers the integration tests and benchmarks talk to, always by PID.

`langgraph dev` keeps thread state in `./.langgraph_api/` relative to its working directory, and
resolves file-form graph paths against it too; langgraph.json names the graphs in module form
(`reground.graph.builder:graph`), so the server runs from a temporary working directory and never
writes into the repository. Each server gets a free port picked here; the server's own log is
checked for that port because `langgraph dev` silently moves to another one when it is taken.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
from reground.tools.adapters.local_server import free_port, log_tail

REPO = Path(__file__).resolve().parents[2]
LANGGRAPH_CONFIG = REPO / "langgraph.json"
LOG_LINES = 40  # of a server's log, in the error when it did not start

# What keeps `langgraph dev` from phoning home (see shared/notes/offline-stack.md).
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}


def wait_ready(url: str, *, process: subprocess.Popen[bytes] | None, log: Path, timeout_s: float) -> float:
    """Poll `url` until it answers 200; fail early (with the log's tail) if the process died."""
    started = time.monotonic()
    last_error = ""
    while time.monotonic() - started < timeout_s:
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"server process {process.pid} exited with {process.returncode} "
                f"before {url} was ready; "
                f"log {log}:\n{log_tail(log, LOG_LINES)}"
            )
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError as exc:
            last_error = repr(exc)
        time.sleep(0.25)
    raise TimeoutError(
        f"{url} not ready after {timeout_s:.0f} s ({last_error}); log {log}:\n{log_tail(log, LOG_LINES)}"
    )


def stop_pid(pid: int, *, grace_s: float = 10.0) -> None:
    """SIGTERM `pid` (its group if it leads one: servers run in their own session), then KILL."""

    def send(sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)

    send(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    send(signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return finished == 0


class _ServerProcess:
    """What every server a test starts shares: spawned in its own session, logged, stopped by PID."""

    process: subprocess.Popen[bytes] | None
    log_path: Path
    _log: IO[bytes] | None

    @property
    def pid(self) -> int:
        assert self.process is not None, "server not started"
        return self.process.pid

    def _spawn(self, command: list[str], *, cwd: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the process's lifetime
        self.process = subprocess.Popen(
            command, cwd=cwd, env=dict(env), stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        return self.process

    def start(self, timeout_s: float) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop_pid(self.process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self, timeout_s: float = 90.0) -> Any:
        """Stop and start again on the same port and paths (so the same saved state)."""
        self.stop()
        return self.start(timeout_s)

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""


@dataclass
class LanggraphDev(_ServerProcess):
    """One `langgraph dev` process: its URL, PID, working directory (its state) and log."""

    port: int
    workdir: Path
    env: dict[str, str]
    config: Path = LANGGRAPH_CONFIG
    n_jobs_per_worker: int = 10
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)
    startup_s: float = 0.0
    _log: IO[bytes] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.log_path = self.workdir / "langgraph-dev.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 90.0) -> LanggraphDev:
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = [
            str(Path(sys.executable).with_name("langgraph")),
            "dev",
            "--no-browser",
            "--no-reload",  # others edit the repo while tests run: never restart mid-test
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--config",
            str(self.config),
            "--n-jobs-per-worker",
            str(self.n_jobs_per_worker),
        ]
        self._spawn(command, cwd=self.workdir, env=self.env)
        assert self.process is not None
        self.startup_s = wait_ready(f"{self.url}/ok", process=self.process, log=self.log_path, timeout_s=timeout_s)
        announced = re.findall(r"API: \S*?http://127\.0\.0\.1:(\d+)", log_tail(self.log_path, 400))
        if announced and int(announced[-1]) != self.port:
            self.stop()
            raise RuntimeError(f"langgraph dev moved to port {announced[-1]} (asked for {self.port})")
        return self


def langgraph_env(extra: Mapping[str, str] | None = None, *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the caller's, the offline switches, then `extra`."""
    env = dict(os.environ if base is None else base)
    env.update(OFFLINE_ENV)
    env.update(extra or {})
    return env


def start_langgraph_dev(
    workdir: Path,
    extra_env: Mapping[str, str] | None = None,
    *,
    port: int | None = None,
    **kwargs: Any,
) -> LanggraphDev:
    """Start `langgraph dev` serving this repo's langgraph.json; `workdir` holds its state."""
    server = LanggraphDev(port=port or free_port(), workdir=workdir, env=langgraph_env(extra_env), **kwargs)
    return server.start()


@dataclass
class LocalLLM:
    """The local llama.cpp server started through reground's own launcher."""

    url: str
    pid: int
    model: str

    def stop(self) -> None:
        if self.pid:  # 0: a server someone else started (not ours to stop)
            stop_pid(self.pid)


def start_local_llm(model: str, state_dir: Path, *, timeout_s: float = 120.0) -> LocalLLM:
    """Start the local LLM server for `model`; its run state goes to `state_dir`, not the user's."""
    previous = os.environ.get("REGROUND_STATE_DIR")
    os.environ["REGROUND_STATE_DIR"] = str(state_dir)
    try:
        from reground.tools.adapters.local_server import serve

        info = serve(model, port=free_port())
    finally:
        if previous is None:
            os.environ.pop("REGROUND_STATE_DIR", None)
        else:
            os.environ["REGROUND_STATE_DIR"] = previous
    url = openai_base(str(info.url))
    wait_ready(url + "/models", process=None, log=state_dir / "llm.log", timeout_s=timeout_s)
    return LocalLLM(url=url, pid=int(info.pid), model=model)


def openai_base(url: str) -> str:
    """The OpenAI-style base URL (ending in /v1) that REGROUND_LOCAL_LLM_URL expects."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


@dataclass
class Postgres:
    """A throwaway Postgres cluster (initdb + postgres) on a free port, trust auth, local only."""

    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?sslmode=disable"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop_pid(self.process.pid)  # SIGTERM = postgres "smart" shutdown; SIGKILL after the grace
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)


def postgres_binaries() -> Path | None:
    """The directory holding initdb and postgres, if this machine has them."""
    import shutil

    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return candidates[-1].parent if candidates else None


def start_postgres(root: Path, *, timeout_s: float = 60.0) -> Postgres:
    """initdb into `root` and start postgres in the foreground (its PID is ours to stop).

    Postgres refuses to run as root: as root, the cluster runs as the `postgres` user (our direct
    child still, so its PID is the postmaster's).
    """
    bindir = postgres_binaries()
    if bindir is None:
        raise FileNotFoundError("initdb not found: install postgresql (apt-get install postgresql)")
    root.mkdir(parents=True, exist_ok=True)
    as_user: dict[str, Any] = {}
    if os.geteuid() == 0:
        import shutil

        shutil.chown(root, user="postgres")
        as_user = {"user": "postgres", "group": "postgres", "extra_groups": []}
    data = root / "data"
    log = root / "postgres.log"
    with open(log, "ab") as out:
        subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
            check=True,
            cwd=root,
            **as_user,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Postgres(root=root, port=free_port())
    command = [
        str(bindir / "postgres"),
        "-D",
        str(data),
        "-p",
        str(server.port),
        "-k",
        str(root),
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "fsync=off",
    ]
    server.process = subprocess.Popen(
        command,
        cwd=root,
        stdout=open(log, "ab"),  # noqa: SIM115 - the child keeps it
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **as_user,
    )
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"postgres exited with {server.process.returncode}; log {log}:\n{log_tail(log, LOG_LINES)}"
            )
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", server.port)) == 0:
                return server
        time.sleep(0.1)
    server.stop()
    raise TimeoutError(f"postgres not accepting connections on {server.port}; log {log}:\n{log_tail(log, LOG_LINES)}")


# Chroma's product telemetry switch (read by chromadb's Settings, so by the CLI and the client).
CHROMA_OFFLINE_ENV = {"ANONYMIZED_TELEMETRY": "False"}


@dataclass
class ChromaServer(_ServerProcess):
    """One `chroma run` process (the Rust server, in its own session): URL, PID, data path and log."""

    path: Path
    port: int
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    startup_s: float = 0.0
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def heartbeat_url(self) -> str:
        return f"{self.url}/api/v2/heartbeat"

    def start(self, timeout_s: float = 60.0) -> ChromaServer:
        # `chroma run` on a taken port logs "Address ... is not available" but keeps running, and the
        # heartbeat would then be answered by whoever holds the port: refuse up front instead.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                raise RuntimeError(f"port {self.port} is already in use; not starting chroma (log {self.log_path})")
        self.path.mkdir(parents=True, exist_ok=True)
        command = [
            str(Path(sys.executable).with_name("chroma")),
            "run",
            "--path",
            str(self.path),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        self._spawn(command, cwd=self.path.parent, env=self.env)
        assert self.process is not None
        try:
            self.startup_s = wait_ready(
                self.heartbeat_url, process=self.process, log=self.log_path, timeout_s=timeout_s
            )
        except BaseException:
            self.stop()
            raise
        if f"{self.port} is not available" in log_tail(self.log_path, 400):
            self.stop()
            raise RuntimeError(
                f"chroma could not bind port {self.port}; log {self.log_path}:\n{log_tail(self.log_path, LOG_LINES)}"
            )
        return self


def start_chroma(
    path: Path,
    *,
    port: int | None = None,
    log_path: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> ChromaServer:
    """Start `chroma run --path <path>` on 127.0.0.1 and a free port; ready once its heartbeat answers."""
    env = dict(os.environ)
    env.update(CHROMA_OFFLINE_ENV)
    env.update(extra_env or {})
    server = ChromaServer(
        path=path,
        port=port or free_port(),
        env=env,
        log_path=log_path or path.parent / f"{path.name}-chroma.log",
    )
    return server.start(timeout_s)
