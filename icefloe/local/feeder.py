"""Feeder: iterates the engine's split source on a thread of its own into a bounded queue.

The source may block (a stream's coordinator hands splits out as they are planned). Its
error travels behind the splits before it, as a :class:`~icefloe.local.queues.Failure`,
and its end as :data:`~icefloe.local.queues.DONE`.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Iterable

from icefloe.local.queues import DONE, POLL_S, Failure, put
from icefloe.splits.split import FileSplit


class Feeder:
    """The fed splits, taken (and peeked at) by the run assigner (which holds its lock
    meanwhile).

    Args:
        splits: the split source.
        maxsize: fed splits that may wait.
        stop: the engine's stop event.
    """

    def __init__(self, splits: Iterable[FileSplit], maxsize: int,
                 stop: threading.Event) -> None:
        self.splits = splits
        self.stop = stop
        self.queue: queue.Queue[object] = queue.Queue(maxsize=maxsize)
        self._pushed_back: list[object] = []  # taken, not claimed: it did not fit a run
        self._peeked: deque[object] = deque()  # out of the queue by :meth:`peek`, in order

    def start(self) -> None:
        threading.Thread(target=self._run, name="icefloe-feeder", daemon=True).start()

    def _run(self) -> None:
        try:
            for split in self.splits:
                if not put(self.queue, split, self.stop):
                    return
        except BaseException as exc:  # delivered to the consumer by the claiming reader
            put(self.queue, Failure(exc), self.stop)
            return
        put(self.queue, DONE, self.stop)

    def take(self, block: bool) -> object:
        """The next fed item (a split, Failure or DONE); None if none is ready / stopped."""
        if self._pushed_back:
            return self._pushed_back.pop()
        if self._peeked:
            return self._peeked.popleft()
        while not self.stop.is_set():
            try:
                return self.queue.get(timeout=POLL_S) if block else self.queue.get_nowait()
            except queue.Empty:
                if not block:
                    return None
        return None

    def push_back(self, item: object) -> None:
        """Return a taken item: the next :meth:`take` gives it again."""
        self._pushed_back.append(item)

    def peek(self, n: int) -> list[FileSplit]:
        """The splits among the next ``n`` fed items :meth:`take` will give, without taking
        them (never waits; at most ``n`` items are held out of the bounded queue)."""
        while len(self._peeked) < n:
            try:
                self._peeked.append(self.queue.get_nowait())
            except queue.Empty:
                break
        ahead = [*reversed(self._pushed_back), *self._peeked][:n]
        return [item for item in ahead if isinstance(item, FileSplit)]

    def waiting(self) -> int:
        """Splits fed and not taken (approximately)."""
        return self.queue.qsize() + len(self._peeked)
