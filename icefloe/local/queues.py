"""Queue plumbing shared by the local engine's parts: sentinels and a stoppable put.

Runs on the engine's threads. Every blocking call wakes up every 0.1 s to look at the
engine's stop event, so a stopped engine never leaves a thread blocked on a queue.
"""

from __future__ import annotations

import queue
import threading

DONE = object()
"""End of a queue's items."""

POLL_S = 0.1


class Failure:
    """An error travelling to the consumer in item order."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def put(q: queue.Queue[object], item: object, stop: threading.Event) -> bool:
    """Put ``item`` on ``q``, blocking while it is full; False once ``stop`` is set."""
    while not stop.is_set():
        try:
            q.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False


def get(q: queue.Queue[object], stop: threading.Event) -> object:
    """The next item of ``q``, blocking; DONE once ``stop`` is set."""
    while not stop.is_set():
        try:
            return q.get(timeout=POLL_S)
        except queue.Empty:
            continue
    return DONE
