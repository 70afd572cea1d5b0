"""Queue plumbing shared by the local engine's parts: sentinels, a stoppable put and get,
and the ordered run queues with their shared byte budget.

Runs on the engine's threads. Every blocking call wakes up every 0.1 s to look at the
engine's stop event, so a stopped engine never leaves a thread blocked on a queue.
"""

from __future__ import annotations

import collections
import queue
import threading
from typing import Any, Protocol

DONE = object()
"""End of a queue's items."""

POLL_S = 0.1


class Failure:
    """An error travelling to the consumer in item order."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class ItemQueue(Protocol):
    """What :func:`put` and :func:`get` need of a queue (``queue.Queue`` and
    :class:`RunQueue` both are one): ``put`` raises ``queue.Full`` and ``get``
    ``queue.Empty`` when ``timeout`` passes first."""

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None: ...

    def get(self, block: bool = True, timeout: float | None = None) -> Any: ...


def put(q: ItemQueue, item: object, stop: threading.Event) -> bool:
    """Put ``item`` on ``q``, blocking while it is full; False once ``stop`` is set."""
    while not stop.is_set():
        try:
            q.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False


def get(q: ItemQueue, stop: threading.Event) -> object:
    """The next item of ``q``, blocking; DONE once ``stop`` is set."""
    while not stop.is_set():
        try:
            return q.get(timeout=POLL_S)
        except queue.Empty:
            continue
    return DONE


def chunk_bytes(item: object) -> int:
    """The Arrow bytes of a chunk (a list of items with a ``batch``); 0 for a sentinel or
    a :class:`Failure`."""
    if not isinstance(item, list):
        return 0
    return sum(entry.batch.nbytes for entry in item)


class Lookahead:
    """The byte budget the ordered run queues share (the engine's ``lookahead_bytes``).

    The consumer drains one run queue at a time, the *head*; the queues behind it belong
    to runs read ahead by the other reader threads. Their chunks are counted in
    :attr:`ahead` (Arrow bytes, :func:`chunk_bytes`); a queue behind the head admits a
    chunk while it holds fewer than its ``limit`` chunks (the old per-queue bound) or
    while :attr:`ahead` is below :attr:`budget`. So the bytes held ahead of the consumer
    stay below ``budget`` plus one chunk per reader thread plus ``limit`` chunks per
    queue; the head queue holds at most ``limit`` chunks. One lock (a condition) guards
    every queue of one engine.

    Args:
        budget: the bytes the queues behind the head may hold (>= 0; 0: ``limit`` chunks
            per queue only).
    """

    def __init__(self, budget: int) -> None:
        if budget < 0:
            raise ValueError(f"lookahead budget must be >= 0 bytes, got {budget}")
        self.budget = budget
        self.ahead = 0
        self.peak = 0
        self.head: RunQueue | None = None
        self.cond = threading.Condition()


class RunQueue:
    """One run's queue under preserve_order (see :class:`Lookahead`).

    Filled by the run's reader thread (``put``), drained by the consumer (``get``): the
    first ``get`` makes it the head. Sentinels and failures are always admitted (one
    per run, no bytes). Thread-safe.

    Args:
        lookahead: the budget shared with the engine's other run queues.
        limit: chunks the queue holds whatever the budget (the engine's ``queue_batches``).
    """

    __slots__ = ("bytes", "items", "limit", "lookahead")

    def __init__(self, lookahead: Lookahead, limit: int) -> None:
        self.lookahead = lookahead
        self.limit = limit
        self.items: collections.deque[tuple[object, int]] = collections.deque()
        self.bytes = 0

    def _admits(self, size: int) -> bool:
        la = self.lookahead
        if not size or len(self.items) < self.limit:
            return True
        return la.head is not self and la.ahead < la.budget

    def put(self, item: object, block: bool = True, timeout: float | None = None) -> None:
        """Add ``item``, waiting up to ``timeout`` for room (``queue.Full`` after it)."""
        size = chunk_bytes(item) or (1 if isinstance(item, list) else 0)
        la = self.lookahead
        with la.cond:
            if not la.cond.wait_for(lambda: self._admits(size),
                                    timeout if block else 0):
                raise queue.Full
            self.items.append((item, size))
            self.bytes += size
            if la.head is not self:
                la.ahead += size
                la.peak = max(la.peak, la.ahead)
            la.cond.notify_all()

    def get(self, block: bool = True, timeout: float | None = None) -> object:
        """The next item, waiting up to ``timeout`` (``queue.Empty`` after it); the
        queue is the head from the first call on."""
        la = self.lookahead
        with la.cond:
            if la.head is not self:
                la.head = self
                la.ahead -= self.bytes
                la.cond.notify_all()
            if not la.cond.wait_for(lambda: bool(self.items), timeout if block else 0):
                raise queue.Empty
            item, size = self.items.popleft()
            self.bytes -= size
            la.cond.notify_all()
            return item
