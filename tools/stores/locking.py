"""An inter-process, inter-thread lock per collection: writers into one collection go one at a time.

`fcntl.flock` on a lock file beside the embedded store. The kernel drops the lock when its holder dies
(even by `kill -9`), so a crashed ingest never blocks the next one. Each acquisition opens the file
anew: flock locks belong to the open file, so two threads of one process exclude each other too.
The holder writes its pid into the file, so a waiting writer can say whom it waits for.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from reground.tools.tuning.stores import LOCKS

WaitNotice = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def notify_waiting(on_wait: WaitNotice | None, collection: str, holder: str) -> None:
    """Tell `on_wait` (default: stderr) that a writer waits for `holder` (e.g. "pid 4242"), once, before it waits:
    every store's write lock says it the same way."""
    (on_wait or _stderr)(f"waiting for another ingest into {collection} ({holder})…")


def lock_timeout(collection: str, holder: str, timeout_s: float) -> TimeoutError:
    """The error of a writer that waited `timeout_s` for another one's lock."""
    return TimeoutError(f"another ingest into {collection} ({holder}) held its lock for over {timeout_s:.0f} s")


def lock_path(data_dir: Path, collection: str, chroma_url: str = "") -> Path:
    """`<data_dir>/locks/<collection>.lock` beside the embedded store.

    A Chroma server's collection gets a per-user lock in the temp dir, named by server URL: a client of a
    server writes nothing into its data dir, and the lock only serialises this machine's writers anyway.
    """
    if not chroma_url:
        return data_dir / "locks" / f"{collection}.lock"
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", chroma_url)[: LOCKS.url_chars]
    name = f"{safe}-{hashlib.sha256(chroma_url.encode()).hexdigest()[:8]}-{collection}"  # fact: the lock name format
    return Path(tempfile.gettempdir()) / f"reground-locks-{os.getuid()}" / f"{name}.lock"


def _holder(handle: int) -> str:
    """The pid the current holder wrote, or '?' (it may be between open and write)."""
    with contextlib.suppress(OSError, ValueError):
        os.lseek(handle, 0, os.SEEK_SET)
        raw = os.read(handle, 32).decode().strip()  # fact: a pid has at most 20 digits
        return str(int(raw)) if raw else "?"
    return "?"


@contextlib.contextmanager
def collection_lock(
    path: Path,
    collection: str,
    *,
    on_wait: WaitNotice | None = None,
    timeout_s: float | None = None,
) -> Iterator[float]:
    """Hold the collection's write lock; yields the seconds spent waiting for another writer.

    When another writer holds it, `on_wait` (default: stderr) hears once who, then this blocks until
    the lock is free (or `timeout_s` passes: TimeoutError).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # fact: rw-r--r--
    started = time.monotonic()
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            notify_waiting(on_wait, collection, f"pid {_holder(handle)}")
            if timeout_s is None:
                fcntl.flock(handle, fcntl.LOCK_EX)
            else:
                while True:
                    try:
                        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() - started > timeout_s:
                            raise lock_timeout(collection, f"pid {_holder(handle)}", timeout_s) from None
                        time.sleep(LOCKS.poll_s)
        waited = time.monotonic() - started
        os.ftruncate(handle, 0)
        os.pwrite(handle, f"{os.getpid()}\n".encode(), 0)
        try:
            yield waited
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(handle, 0)
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        os.close(handle)


def try_collection_lock(path: Path) -> int | None:
    """The lock taken without waiting (an fd to pass to `release`), or None if another writer holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # fact: rw-r--r--
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(handle)
        return None
    return handle


def release(handle: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.flock(handle, fcntl.LOCK_UN)
    os.close(handle)


@contextlib.contextmanager
def store_init_lock(data_dir: Path) -> Iterator[None]:
    """Held briefly while a process opens the embedded store's database (its first open creates it)."""
    path = data_dir / "locks" / "store-open.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # fact: rw-r--r--
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(handle, fcntl.LOCK_UN)
        os.close(handle)
