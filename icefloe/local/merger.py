"""Merger: the runs' items back to the consumer, in split order or as they are ready.

With ``preserve_order`` each claimed run gets a queue of its own
(:class:`~icefloe.local.queues.RunQueue`), registered in claim order; the consumer drains
the run queues one after the other, so split i's items all come before split i+1's. The
queues share a byte budget
(:class:`~icefloe.local.queues.Lookahead`): the reader of a later run reads that far
ahead of the consumer, so with few splits the threads still read at once. Otherwise
every run shares one queue and the consumer takes chunks as they come (a run's own items
stay in split order).

Items travel in chunks (lists of :class:`~icefloe.local.engine.SplitBatch`); a
:class:`~icefloe.local.queues.Failure` is raised to the consumer after the items put
before it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, cast

from icefloe.local.queues import DONE, Failure, ItemQueue, Lookahead, RunQueue, get, put


class Merger:
    """Run queues and the consumer's iteration over them.

    Args:
        preserve_order: deliver in split order.
        parallelism: reader threads (unordered: the consumer waits for each one's DONE).
        queue_batches: chunks one run queue holds (the shared queue: times parallelism;
            ordered: the queue being drained, past the lookahead budget).
        stop: the engine's stop event (the consumer's iteration ends when it is set).
        lookahead_bytes: the bytes the ordered run queues may hold between them
            (:class:`~icefloe.local.queues.Lookahead`, >= 1; unordered: unused).
    """

    def __init__(self, preserve_order: bool, parallelism: int, queue_batches: int,
                 stop: threading.Event, lookahead_bytes: int = 1) -> None:
        self.preserve_order = preserve_order
        self.parallelism = parallelism
        self.queue_batches = queue_batches
        self.stop = stop
        self.lookahead = Lookahead(lookahead_bytes)
        self._ordered: queue.Queue[object] = queue.Queue()
        self._shared: queue.Queue[object] = queue.Queue(maxsize=queue_batches * parallelism)

    def run_queue(self) -> ItemQueue:
        """The queue of the run just claimed (called in claim order, under the claim lock)."""
        if not self.preserve_order:
            return self._shared
        out = RunQueue(self.lookahead, self.queue_batches)
        self._ordered.put(out)
        return out

    def fail(self, failure: Failure, worker_done: bool = False) -> None:
        """Deliver ``failure`` at this point of the order (``worker_done``: the worker
        that saw it ends too)."""
        if self.preserve_order:
            q = RunQueue(self.lookahead, 2)
            q.put(failure)
            if worker_done:
                q.put(DONE)
            self._ordered.put(q)
        else:
            put(self._shared, failure, self.stop)
            if worker_done:
                put(self._shared, DONE, self.stop)

    def worker_done(self) -> None:
        """A reader thread claims no more runs (unordered: its DONE)."""
        if not self.preserve_order:
            put(self._shared, DONE, self.stop)

    def all_claimed(self) -> None:
        """Every reader thread finished claiming (ordered: no run queue follows)."""
        if self.preserve_order:
            self._ordered.put(DONE)

    def items(self) -> Iterator[Any]:
        """The items of every run (raises a run's failure in its place); ends at the end
        of the runs or when the stop event is set."""
        if self.preserve_order:
            while True:
                run_queue = get(self._ordered, self.stop)
                if run_queue is DONE:
                    return
                assert isinstance(run_queue, RunQueue)
                while True:
                    chunk = get(run_queue, self.stop)
                    if chunk is DONE:
                        break
                    if isinstance(chunk, Failure):
                        raise chunk.exc
                    yield from cast("list[Any]", chunk)
                if self.stop.is_set():
                    return
        else:
            finished = 0
            while finished < self.parallelism:
                chunk = get(self._shared, self.stop)
                if chunk is DONE:
                    if self.stop.is_set():
                        return
                    finished += 1
                    continue
                if isinstance(chunk, Failure):
                    raise chunk.exc
                yield from cast("list[Any]", chunk)
