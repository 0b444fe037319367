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
