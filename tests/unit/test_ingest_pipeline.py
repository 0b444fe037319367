"""The ingest pipeline: stages run in their own threads, results come in order, failures surface, workers stop."""

from __future__ import annotations

import threading
import time

import pytest
from reground.tools.stores.pipeline import pipeline


def test_items_pass_every_stage_in_order_while_stages_overlap() -> None:
    running: set[str] = set()
    overlapped = threading.Event()
    lock = threading.Lock()

    def stage(name: str, delay: float):  # type: ignore[no-untyped-def]
        def run(value: int) -> int:
            with lock:
                running.add(name)
                if len(running) > 1:
                    overlapped.set()
            time.sleep(delay)
            with lock:
                running.discard(name)
            return value * 10 if name == "a" else value + 1

        return run

    out = list(pipeline(range(20), [stage("a", 0.005), stage("b", 0.005)], depth=2))
    assert out == [n * 10 + 1 for n in range(20)]
    assert overlapped.is_set()  # the second stage worked on one item while the first worked on the next


def test_a_stage_failure_is_raised_to_the_consumer_and_the_workers_stop() -> None:
    before = threading.active_count()

    def fails_on_three(value: int) -> int:
        if value == 3:
            raise ValueError("bad item 3")
        return value

    seen: list[int] = []
    with pytest.raises(ValueError, match="bad item 3"):
        for value in pipeline(range(10), [fails_on_three, lambda v: v], depth=1):
            seen.append(value)
    assert seen == [0, 1, 2]
    time.sleep(0.3)
    assert threading.active_count() <= before


def test_a_consumer_that_stops_early_stops_the_workers() -> None:
    before = threading.active_count()
    calls: list[int] = []
    stream = pipeline(range(1000), [lambda v: calls.append(v) or v], depth=2)
    assert next(stream) == 0
    stream.close()
    time.sleep(0.3)
    assert threading.active_count() <= before
    assert len(calls) < 50  # bounded queues: the worker did not run through the whole input
