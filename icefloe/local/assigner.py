"""RunAssigner: hands the local engine's reader threads runs of fed splits.

A reader thread claims the next split and, behind it, the splits already fed, up to
``run_splits`` splits and ``run_records`` records (so a run of small files buffers no
more than one big split does; ``local_run_records`` when the run's first file is on the
local file system), and never more than its share of what is fed (the others get
theirs). It never waits for more splits than the first. Claims are serialized by one
lock, so run queues are registered with the merger in claim order.
The small files fed next can be fetched before their claim
(:class:`~icefloe.reader.prefetch.FetchedAhead` asks :meth:`RunAssigner.next_splits`), so
the next claim's reader finds them fetched instead of starting its run with their round
trips.
"""

from __future__ import annotations

import threading

from icefloe.enumerator.bounded import is_local
from icefloe.local.feeder import Feeder
from icefloe.local.merger import Merger
from icefloe.local.queues import DONE, Failure, ItemQueue
from icefloe.reader.prefetch import FetchedAhead
from icefloe.reader.split_reader import MIN_RUN
from icefloe.splits.split import FileSplit


class RunAssigner:
    """Claims of runs (module docstring).

    Args:
        feeder: the fed splits.
        merger: registers each run's queue in claim order.
        parallelism: reader threads sharing the fed splits.
        run_splits: most splits one run holds.
        run_records: most records one run holds (soft: the first split always fits).
        local_run_records: most records one run of files on the local file system holds
            (its first split's; None: ``run_records``).
        ahead: fetches the small files fed next, asking :meth:`next_splits` (None: none).
    """

    def __init__(self, feeder: Feeder, merger: Merger, parallelism: int, run_splits: int,
                 run_records: int, local_run_records: int | None = None,
                 ahead: FetchedAhead | None = None) -> None:
        self.feeder = feeder
        self.merger = merger
        self.parallelism = parallelism
        self.run_splits = run_splits
        self.run_records = run_records
        self.local_run_records = run_records if local_run_records is None \
            else local_run_records
        self.ahead = ahead
        if ahead is not None:
            ahead.next_splits = self.next_splits
        self._lock = threading.Lock()
        self._exhausted = False

    def claim(self) -> tuple[list[FileSplit], ItemQueue] | None:
        """The next run and its queue; None when the splits are exhausted or stopped (a
        feeder failure is delivered at its place in the order first)."""
        feeder = self.feeder
        with self._lock:
            if self._exhausted or feeder.stop.is_set():
                return None
            item = feeder.take(block=True)
            if item is None or item is DONE:
                self._exhausted = True
                return None
            if isinstance(item, Failure):
                self._exhausted = True
                self.merger.fail(item)
                return None
            assert isinstance(item, FileSplit)
            run = [item]
            # share what is fed between the readers; never wait for more
            limit = min(self.run_splits,
                        max(MIN_RUN, (feeder.waiting() + 1) // self.parallelism))
            most = self.local_run_records if is_local(item.file_path) else self.run_records
            records = item.record_count
            while len(run) < limit and records < most:
                nxt = feeder.take(block=False)
                if nxt is None:
                    break
                if not isinstance(nxt, FileSplit) or records + nxt.record_count > most:
                    feeder.push_back(nxt)  # a DONE / Failure too: the next claim sees it
                    break
                records += nxt.record_count
                run.append(nxt)
            return run, self.merger.run_queue()

    def next_splits(self, n: int) -> list[FileSplit]:
        """The fed splits among the next ``n`` items the next claims will take (any
        thread); [] while a claim is under way (never waits for it: a claim may wait for
        planning)."""
        if not self._lock.acquire(blocking=False):
            return []
        try:
            return self.feeder.peek(n)
        finally:
            self._lock.release()
