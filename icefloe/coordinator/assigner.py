"""SplitAssigner: pending splits to readers on request, a dead reader's splits handed out again.

Runs where the coordinator runs (the local stream's process, the Ray enumerator actor);
every method takes one condition lock, so the enumeration thread, reader requests and
acks may come from any thread.

Order: splits go out in the order the enumeration loop offered them (commit order),
except that splits of a failed reader go out again first, resumed at their
acknowledged record offset. The committed position itself is the
:class:`~icefloe.state.AckTracker`'s business; the assigner only tracks who holds what.

Bounds: at most ``max_pending`` splits wait (:meth:`offer` blocks, backpressure on
enumeration), and a reader holds at most ``max_in_flight_per_reader`` unacknowledged
splits (None: no limit; the local engine bounds itself).
"""

from __future__ import annotations

import collections
import logging
import threading
from dataclasses import dataclass
from typing import Literal

from icefloe.splits.split import FileSplit

log = logging.getLogger(__name__)

Answer = Literal["split", "wait", "end", "done"]
"""``split``: here is one; ``wait``: nothing now; ``end``: this reader was declared failed
(it must stop); ``done``: enumeration finished and nothing is left to hand out."""


@dataclass(frozen=True, slots=True)
class Assignment:
    """The answer to a split request: ``kind`` and, for ``split``, the split."""

    kind: Answer
    split: FileSplit | None = None


class SplitAssigner:
    """Pending splits, their owners and acknowledged offsets (module docstring).

    Args:
        max_pending: splits that may wait for a reader before :meth:`offer` blocks.
        max_in_flight_per_reader: unacknowledged splits one reader may hold (None: any).
    """

    def __init__(self, max_pending: int, max_in_flight_per_reader: int | None = None) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending}")
        self.max_pending = max_pending
        self.max_in_flight = max_in_flight_per_reader
        self._cond = threading.Condition()
        self._pending: collections.deque[FileSplit] = collections.deque()
        self._reassigned: collections.deque[FileSplit] = collections.deque()
        self._owner: dict[str, str] = {}
        self._assigned: dict[str, FileSplit] = {}
        self._acked_rows: dict[str, int] = {}
        self._held: collections.Counter[str] = collections.Counter()
        self._failed: set[str] = set()
        self._finished = False
        self._error: BaseException | None = None
        self.handed = 0

    # -- the enumeration side ----------------------------------------------------------

    def offer(self, split: FileSplit, stop: threading.Event) -> bool:
        """Queue ``split`` for a reader; blocks while ``max_pending`` wait. False if
        ``stop`` was set first."""
        with self._cond:
            while len(self._pending) >= self.max_pending:
                if stop.is_set():
                    return False
                self._cond.wait(0.05)
            self._pending.append(split)
            self._cond.notify_all()
            return True

    def finish(self, error: BaseException | None = None) -> None:
        """No more splits will be offered; ``error`` (if any) is raised to the readers
        once the splits offered before it are handed out."""
        with self._cond:
            self._finished = True
            self._error = error
            self._cond.notify_all()

    # -- the reader side ----------------------------------------------------------------

    def request(self, reader_id: str, timeout_s: float = 0.0) -> Assignment:
        """The next split for ``reader_id``, waiting up to ``timeout_s`` for one.

        Raises:
            the enumeration loop's error, once nothing offered before it is left.
        """
        with self._cond:
            while True:
                answer = self._answer(reader_id)
                if answer.kind != "wait" or timeout_s <= 0:
                    return answer
                self._cond.wait(timeout_s)
                timeout_s = 0.0

    def _answer(self, reader_id: str) -> Assignment:
        if reader_id in self._failed:
            return Assignment("end")
        source = self._reassigned if self._reassigned else self._pending
        if not source:
            if self._error is not None:
                raise self._error
            return Assignment("done" if self._finished else "wait")
        if self.max_in_flight is not None and self._held[reader_id] >= self.max_in_flight:
            return Assignment("wait")
        split = source.popleft()
        self._owner[split.split_id] = reader_id
        self._assigned[split.split_id] = split
        self._held[reader_id] += 1
        self.handed += 1
        self._cond.notify_all()
        return Assignment("split", split)

    def acked(self, split_id: str, consumed: int | None) -> bool:
        """The sink has ``split_id``'s first ``consumed`` records (None: all of it).
        True when this ack finished a split a reader held."""
        with self._cond:
            if consumed is None:
                owner = self._owner.pop(split_id, None)
                if owner is not None:
                    self._held[owner] -= 1
                self._assigned.pop(split_id, None)
                self._acked_rows.pop(split_id, None)
                self._cond.notify_all()
                return owner is not None
            if split_id in self._assigned:
                self._acked_rows[split_id] = max(self._acked_rows.get(split_id, 0), consumed)
            return False

    def reader_failed(self, reader_id: str) -> int:
        """Hand ``reader_id``'s unacknowledged splits out again first (resumed at their
        acknowledged offset); returns how many. The reader's later requests get ``end``."""
        with self._cond:
            self._failed.add(reader_id)
            lost = [self._assigned[s] for s, owner in self._owner.items() if owner == reader_id]
            for split in reversed(lost):
                del self._owner[split.split_id]
                del self._assigned[split.split_id]
                done = self._acked_rows.pop(split.split_id, 0)
                self._reassigned.appendleft(split.with_position(max(split.resume_rows, done)))
            self._held.pop(reader_id, None)
            self._cond.notify_all()
        log.warning("reader %s failed: %d splits reassigned", reader_id, len(lost))
        return len(lost)

    # -- state ---------------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Splits waiting for a reader (reassigned ones included)."""
        with self._cond:
            return len(self._pending) + len(self._reassigned)

    def pending_totals(self) -> tuple[int, int, int]:
        """``(splits, records, bytes)`` waiting for a reader (at most ``max_pending`` plus
        the reassigned ones are summed: a metrics read, not a per-split cost)."""
        with self._cond:
            waiting = [*self._pending, *self._reassigned]
        return (len(waiting), sum(max(0, s.record_count - s.resume_rows) for s in waiting),
                sum(s.length for s in waiting))

    @property
    def assigned(self) -> int:
        """Splits held by readers, not fully acknowledged."""
        with self._cond:
            return len(self._assigned)

    @property
    def drained(self) -> bool:
        """Enumeration finished and no split waits for a reader."""
        with self._cond:
            return self._finished and not self._pending and not self._reassigned

    def raise_error(self) -> None:
        """Raise the enumeration loop's error, if it failed."""
        with self._cond:
            if self._error is not None:
                raise self._error
