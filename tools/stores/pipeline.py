"""Stages in threads of their own, items in order: what lets ingest chunk, flag and embed the next part of a document
while it writes the one before (tools/stores/ingest.py)."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any

from reground.tools.tuning.stores import INGEST

_DONE = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def pipeline(items: Iterable[Any], stages: Sequence[Callable[[Any], Any]], *, depth: int) -> Generator[Any, None, None]:
    """Yield `stages[-1](...stages[0](item))` for each item, in order, each stage in its own thread; the items are
    read by a thread of their own too, as the first stage takes them (a generator that chunks lazily).

    A stage's (or the items') exception is raised here; closing the generator early (the consumer failed) stops the
    workers.
    """
    stop = threading.Event()
    queues: list[queue.Queue[Any]] = [queue.Queue(maxsize=depth) for _ in range(len(stages) + 1)]

    def put(target: queue.Queue[Any], value: Any) -> bool:
        while not stop.is_set():
            try:
                target.put(value, timeout=INGEST.queue_poll_s)
                return True
            except queue.Full:
                continue
        return False

    def work(stage: Callable[[Any], Any], source: queue.Queue[Any], sink: queue.Queue[Any]) -> None:
        while not stop.is_set():
            value = source.get()
            if value is _DONE or isinstance(value, _Failed):
                put(sink, value)
                return
            try:
                result = stage(value)
            except BaseException as error:  # handed to the consumer, which raises it
                put(sink, _Failed(error))
                return
            if not put(sink, result):
                return

    def feed() -> None:
        try:
            for item in items:
                if not put(queues[0], item):
                    return
        except BaseException as error:  # handed to the consumer, which raises it
            put(queues[0], _Failed(error))
            return
        put(queues[0], _DONE)

    threads = [threading.Thread(target=feed, name="ingest-feed", daemon=True)]
    threads += [
        threading.Thread(target=work, args=(stage, queues[i], queues[i + 1]), name=f"ingest-stage-{i}", daemon=True)
        for i, stage in enumerate(stages)
    ]
    for thread in threads:
        thread.start()
    try:
        while True:
            value = queues[-1].get()
            if value is _DONE:
                return
            if isinstance(value, _Failed):
                raise value.error
            yield value
    finally:
        stop.set()
        for source in queues[:-1]:  # unblock workers waiting on an empty source
            with contextlib.suppress(queue.Full):
                source.put_nowait(_DONE)
        for thread in threads:
            thread.join(timeout=INGEST.join_timeout_s)


def batches(items: Iterable[Any], *, size: int, idle_s: float) -> Generator[list[Any], None, None]:
    """The items in lists of up to `size`, read by a thread of their own: a list is handed on when full, when no
    item has come for `idle_s` seconds (a slow file holds up none read before it), and at the end. The items'
    exception is raised here, after the items read before it."""
    source: queue.Queue[Any] = queue.Queue(maxsize=max(1, size) * 2)
    stop = threading.Event()

    def feed() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        source.put(item, timeout=INGEST.queue_poll_s)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
        except BaseException as error:  # handed to the consumer, which raises it
            source.put(_Failed(error))
            return
        source.put(_DONE)

    thread = threading.Thread(target=feed, name="ingest-read", daemon=True)
    thread.start()
    batch: list[Any] = []
    try:
        while True:
            try:
                value = source.get(timeout=idle_s) if batch else source.get()
            except queue.Empty:
                yield batch
                batch = []
                continue
            if value is _DONE or isinstance(value, _Failed):
                if batch:
                    yield batch
                if isinstance(value, _Failed):
                    raise value.error
                return
            batch.append(value)
            if len(batch) >= size:
                yield batch
                batch = []
    finally:
        stop.set()
        thread.join(timeout=INGEST.join_timeout_s)
