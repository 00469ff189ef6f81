"""Whose turn it is to use the catalog: the pipeline's events, or the schedule's sweep.

The sweep works in slices and yields between them, so an event never waits for a whole sweep
(at 100,000 datasets it runs for minutes, past Kafka's ``max.poll.interval.ms``). Yielding
is not enough with a bare ``threading.Lock``: it is not fair, and a sweep thread releasing it
and taking it straight back starves the event waiting for it. Here a slice waits while any
event does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Turns:
    """One piece of work at a time; a waiting event goes before the sweep's next slice."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._busy = False
        self._events_waiting = 0

    @contextmanager
    def event(self) -> Iterator[None]:
        """The turn of one event: after the work under way, before any further slice."""
        with self._changed:
            self._events_waiting += 1
            try:
                self._changed.wait_for(lambda: not self._busy)
            finally:
                self._events_waiting -= 1
            self._busy = True
        try:
            yield
        finally:
            self._release()

    @contextmanager
    def slice(self) -> Iterator[None]:
        """The turn of one slice of a sweep: once no event is waiting."""
        with self._changed:
            self._changed.wait_for(lambda: not self._busy and not self._events_waiting)
            self._busy = True
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        with self._changed:
            self._busy = False
            self._changed.notify_all()
