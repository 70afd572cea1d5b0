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


ITEM_BYTES = 1024
"""What one item (a batch with its split) or sentinel counts for besides its Arrow bytes:
its Python and Arrow objects, so a budget of many tiny batches stays bounded too."""


def chunk_bytes(item: object) -> int:
    """The bytes a run queue's item counts for: a chunk (a list of items with a
    ``batch``), its batches' Arrow bytes plus :data:`ITEM_BYTES` each; a sentinel or a
    :class:`Failure`, :data:`ITEM_BYTES`."""
    if not isinstance(item, list):
        return ITEM_BYTES
    return sum(entry.batch.nbytes + ITEM_BYTES for entry in item)


class Lookahead:
    """The byte budget the ordered run queues share (the engine's ``lookahead``).

    The consumer drains one run queue at a time, the *head*; the queues behind it belong
    to runs read ahead by the other reader threads. Every queue's items are counted in
    :attr:`held` (:func:`chunk_bytes`); a queue behind the head admits a chunk only while
    :attr:`held` is below :attr:`budget`, and the head admits one while it holds fewer
    than its ``limit`` chunks (so the consumer's run always goes on). Sentinels and
    failures are always admitted (one per run, and every run has a chunk first, so no
    reader gets past a full budget with them). So the queues hold at most ``budget`` plus
    ``limit`` chunks plus one chunk and one sentinel per reader thread. One condition
    guards every queue of one engine.

    Args:
        budget: the bytes the queues may hold before the head's ``limit`` (>= 1).
    """

    def __init__(self, budget: int) -> None:
        if budget < 1:
            raise ValueError(f"lookahead budget must be >= 1 byte, got {budget}")
        self.budget = budget
        self.held = 0
        self.head: RunQueue | None = None
        self.cond = threading.Condition()


class RunQueue:
    """One run's queue under preserve_order (see :class:`Lookahead`).

    Filled by the run's reader thread (``put``), drained by the consumer (``get``): the
    first ``get`` makes it the head. Thread-safe.

    Args:
        lookahead: the budget shared with the engine's other run queues.
        limit: chunks the queue holds whatever the budget (the engine's ``queue_batches``).
    """

    __slots__ = ("items", "limit", "lookahead")

    def __init__(self, lookahead: Lookahead, limit: int) -> None:
        self.lookahead = lookahead
        self.limit = limit
        self.items: collections.deque[tuple[object, int]] = collections.deque()

    def _admits(self, chunk: bool) -> bool:
        la = self.lookahead
        if not chunk:
            return True
        if la.head is self:
            return len(self.items) < self.limit
        return la.held < la.budget

    def put(self, item: object, block: bool = True, timeout: float | None = None) -> None:
        """Add ``item``, waiting up to ``timeout`` for room (``queue.Full`` after it)."""
        size = chunk_bytes(item)
        chunk = isinstance(item, list)
        la = self.lookahead
        with la.cond:
            if not la.cond.wait_for(lambda: self._admits(chunk),
                                    timeout if block else 0):
                raise queue.Full
            self.items.append((item, size))
            la.held += size
            la.cond.notify_all()

    def get(self, block: bool = True, timeout: float | None = None) -> object:
        """The next item, waiting up to ``timeout`` (``queue.Empty`` after it); the
        queue is the head from the first call on."""
        la = self.lookahead
        with la.cond:
            if la.head is not self:
                la.head = self
                la.cond.notify_all()
            if not la.cond.wait_for(lambda: bool(self.items), timeout if block else 0):
                raise queue.Empty
            item, size = self.items.popleft()
            la.held -= size
            la.cond.notify_all()
            return item
