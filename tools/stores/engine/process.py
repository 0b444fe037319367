"""The search engine's server: the bundled PostgreSQL + pgvector process (`pgserver:<dir>`), started on first use
and left running for every process that opens the same spec, and the connection URI a store spec names.

Nothing here reads or writes a collection: that is the store's job (`tools/stores/postgres.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reground.tools.stores.vector_store import StoreError
from reground.tools.tuning.stores import ENGINE

ENGINE_EXTRA = "pip install 'reground[engine]'"


class EngineError(StoreError):
    """The engine cannot be reached or refused a request; the message names it and what to do."""


def local_engine_dir(data_dir: str | Path) -> Path:
    """The directory a `pgserver:<dir>` spec names; an empty one is <the data dir>/engine."""
    if not str(data_dir).strip():
        from reground.tools.adapters.paths import data_dir as default_data_dir

        return default_data_dir(None) / "engine"
    return Path(data_dir).expanduser()


def local_engine_dir_of(spec: str) -> Path:
    """The directory of a `pgserver:<dir>` spec; any other spec is an EngineError (its server is not ours to run)."""
    scheme, _, rest = spec.strip().partition(":")
    if scheme != "pgserver":
        raise EngineError(
            f"{safe_uri(spec)!r} is not a bundled engine (pgserver:<dir>): a PostgreSQL server reground did not start "
            "is started and stopped by whoever runs it"
        )
    return local_engine_dir(rest).resolve()


@dataclass(frozen=True)
class EngineStatus:
    """A running bundled engine, as its postmaster.pid describes it."""

    data_dir: Path
    pid: int
    port: int
    socket_dir: str
    state: str  # PostgreSQL's own word: "starting", "ready", "stopping"

    def describe(self) -> str:
        return (
            f"PostgreSQL in {self.data_dir}: {self.state} (pid {self.pid}, port {self.port}, socket {self.socket_dir})"
        )


def local_engine_status(data_dir: str | Path) -> EngineStatus | None:
    """The bundled engine running in data_dir, or None when none runs (no postmaster.pid, or its process is gone)."""
    path = Path(data_dir).expanduser().resolve()
    if not (path / "postmaster.pid").is_file():
        return None
    try:
        import psutil  # noqa: F401  (installed with the engine extra; _postmaster_alive reads the process with it)
    except ImportError as exc:
        raise EngineError(f"the bundled engine is not installed: {ENGINE_EXTRA}") from exc
    if not _postmaster_alive(path):
        return None
    lines = (path / "postmaster.pid").read_text(encoding="utf-8", errors="replace").splitlines()
    # postmaster.pid: pid, data dir, start time, port, socket dir, listen address, shared memory key, status
    field = dict(enumerate(line.strip() for line in lines))
    port = field.get(3, "")  # fact: postmaster.pid's line numbers (PostgreSQL's file format)
    return EngineStatus(
        data_dir=path,
        pid=int(field[0]),
        port=int(port) if port.isdigit() else 0,
        socket_dir=field.get(4, ""),  # fact: postmaster.pid's line numbers
        state=field.get(7, "") or "starting",  # fact: postmaster.pid's line numbers
    )


def local_engine_uri(data_dir: str | Path) -> str:
    """Start (or find running) the bundled PostgreSQL + pgvector server in data_dir; its connection URI.

    The server outlives this process (other processes opening the same spec share it)."""
    try:
        import pgserver
    except ImportError as exc:
        raise EngineError(f"the bundled engine is not installed: {ENGINE_EXTRA}") from exc
    path = local_engine_dir(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        from pgserver.postgres_server import PostgresServer

        # pgserver keeps one handle per directory per process, and trusts a postmaster.pid whose process exists: a
        # server that died (killed, crashed) but was not reaped yet is a zombie with that pid. Its handle and pid file
        # are dropped, so this call starts the server again (it recovers from its write-ahead log).
        if (path / "postmaster.pid").is_file() and not _postmaster_alive(path):
            PostgresServer._instances.pop(path.resolve(), None)
            (path / "postmaster.pid").unlink(missing_ok=True)
            for lock in path.glob(".s.PGSQL.*.lock"):  # the socket's lock names the dead pid too
                lock.unlink(missing_ok=True)
                Path(str(lock).removesuffix(".lock")).unlink(missing_ok=True)
        server = pgserver.get_server(path.resolve(), cleanup_mode=None)
        return str(server.get_uri())
    except Exception as exc:
        raise EngineError(f"cannot start the bundled engine in {path}: {exc}") from exc


def _postmaster_alive(path: Path) -> bool:
    """Whether the postmaster named in data_dir's postmaster.pid runs (a zombie does not)."""
    import psutil

    try:
        pid = int((path / "postmaster.pid").read_text().splitlines()[0])
        proc = psutil.Process(pid)
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except (OSError, ValueError, IndexError, psutil.Error):
        return False


def stop_local_engine(data_dir: str | Path) -> bool:
    """Stop the bundled server of data_dir (fast shutdown); False if none was running."""
    import os
    import subprocess

    from pgserver import _commands

    pg_ctl: Any = _commands.__dict__["pg_ctl"]  # made at import, one function per bundled binary

    path = Path(data_dir).expanduser().resolve()
    if not (path / "postmaster.pid").is_file():
        return False
    user = "pgserver" if os.geteuid() == 0 else None  # as root, pgserver runs the server as this user
    try:
        pg_ctl(["-m", "fast", "-w", "stop"], pgdata=path, user=user, timeout=ENGINE.stop_timeout_s)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return False
    return True


def engine_uri(spec: str) -> str:
    """The connection URI a spec names: a `postgres(ql)://` URI as given, `pgserver:<dir>` started locally."""
    scheme, _, rest = spec.strip().partition(":")
    if scheme == "pgserver":
        return local_engine_uri(rest)
    if scheme in ("postgresql", "postgres"):
        return spec.strip()
    raise EngineError(f"not an engine spec: {spec!r} (use postgresql://... or pgserver:<dir>)")


def safe_uri(uri: str) -> str:
    """The URI without its password (what an error message may show)."""
    return re.sub(r"(//[^:/@]+):[^@]*@", r"\1:***@", uri)
