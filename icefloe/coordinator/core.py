"""Coordinator: the one core of a continuous read, driven by the local stream and Ray.

Flink's ``SourceCoordinator`` for icefloe. It owns, for one continuous read:

- the :class:`~icefloe.enumerator.continuous.ContinuousEnumerator` and its
  :class:`~icefloe.coordinator.loop.EnumerationLoop` thread (refresh, lineage
  checks, limits, retries, ``onLineageBreak`` resets);
- the :class:`~icefloe.coordinator.assigner.SplitAssigner` (pending splits to readers
  on request, a dead reader's splits handed out again);
- the :class:`~icefloe.state.AckTracker` (acks -> committed position, commit order) and
  the :class:`~icefloe.state.session.CheckpointSession` (restore, writes with the Nessie
  hashes of the committed snapshots);
- the :class:`~icefloe.coordinator.lag.Lag` of the committed position.

Drivers: :class:`icefloe.local.stream.LocalStream` runs it in the user's process and
feeds the local engine from :meth:`request_split`; the Ray ``EnumeratorActor`` runs it
in an actor and answers its reader actors with it. Every method is thread-safe.

Checkpoints are written: at :meth:`start` when the start was resolved now (a restart
must not resolve ``latest`` anew), at once after a lineage reset (a restart must not
resolve ``restartFromHead`` anew), on acks at most every ``checkpoint_interval_s``
seconds (0: every ack), and at :meth:`stop`.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from icefloe.coordinator.assigner import Assignment, SplitAssigner
from icefloe.coordinator.crash import crash_point
from icefloe.coordinator.lag import Lag, measure_lag
from icefloe.coordinator.loop import EnumerationLoop
from icefloe.enumerator.continuous import ContinuousEnumerator
from icefloe.errors import UnknownSplitError
from icefloe.reader.context import ReadContext
from icefloe.retry import RetryPolicy
from icefloe.state.acks import AckTracker
from icefloe.state.session import CheckpointSession

if TYPE_CHECKING:
    from icefloe.catalog.handle import TableHandle
    from icefloe.options import SourceOptions
    from icefloe.state.position import Position
    from icefloe.state.store import CheckpointStore

log = logging.getLogger(__name__)


class Coordinator:
    """Enumeration, assignment, acks and checkpoints of one continuous read.

    Args:
        handle: the table.
        options: options checked for continuous mode.
        checkpoint: checkpoint directory or fsspec URI; None keeps progress in memory.
        available_now: process what exists at start (the head then), then finish.
        max_pending: splits that may wait for a reader (backpressure on enumeration).
        max_in_flight_per_reader: unacknowledged splits one reader may hold (None: any).
        checkpoint_interval_s: minimum seconds between checkpoint writes on acks.
    """

    def __init__(self, handle: TableHandle, options: SourceOptions, checkpoint: str | None,
                 *, available_now: bool = False, max_pending: int = 4,
                 max_in_flight_per_reader: int | None = None,
                 checkpoint_interval_s: float = 1.0) -> None:
        self.handle = handle
        self.options = options
        self.available_now = available_now
        self.checkpoint_interval_s = checkpoint_interval_s
        self.retry = RetryPolicy.from_options(options)
        self.enumerator = ContinuousEnumerator(handle, options)
        self.session = CheckpointSession(handle, options, checkpoint)
        self.assigner = SplitAssigner(max_pending, max_in_flight_per_reader)
        self.stop_event = threading.Event()
        self._lock = threading.RLock()
        self._tracker: AckTracker | None = None
        self._loop: EnumerationLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._last_lag = Lag()

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> ReadContext:
        """Restore the checkpoint (or resolve the start), write a new start at once, start
        the enumeration thread; returns the read context of the table's current schema."""
        handle, opts = self.handle, self.options
        self.session.last_write = time.monotonic()
        crash_point("during_restore")
        start = self.session.restore(self.enumerator)
        with self._lock:
            self._tracker = start.tracker()
        self.write_checkpoint()  # a new start is durable at once (restore marked it dirty)
        context = ReadContext.create(handle.metadata, handle.io, handle.metadata.schema(), opts)
        pinned: int | None = None
        if self.available_now:
            head = self.enumerator.head()
            pinned = head.snapshot_id if head else None
        self._loop = EnumerationLoop(self, start.position, pinned, self.available_now)
        self._thread = threading.Thread(target=self._loop.run, name="icefloe-enumerator",
                                        daemon=True)
        self._thread.start()
        return context

    def stop(self) -> Position | None:
        """Stop enumerating and write the final checkpoint (idempotent); returns the
        committed position (None if never started)."""
        self.stop_event.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        if self._tracker is None:
            return None
        with self._lock:
            if not self._stopped:
                self._stopped = True
                self.write_checkpoint()
        return self.committed()

    # -- state shared with the loop ----------------------------------------------------

    @property
    def tracker(self) -> AckTracker:
        """The current ack tracker (replaced by a lineage reset)."""
        tracker = self._tracker
        if tracker is None:
            raise RuntimeError("the coordinator is not started")
        return tracker

    def reset_to(self, position: Position) -> bool:
        """A lineage strategy moved the position: wait for the in-flight acks, restart
        tracking at ``position`` and write that checkpoint at once (a restart before the
        next ack must not resolve the strategy again: ``restartFromHead`` would skip what
        was committed in between). False if stopped while waiting."""
        while self.tracker.in_flight():
            if self.stop_event.wait(0.05):
                return False
        with self._lock:
            self._tracker = AckTracker(position, (), ())
            self.session.mark_dirty()
        self.write_checkpoint()
        return True

    # -- readers ------------------------------------------------------------------------

    def request_split(self, reader_id: str, timeout_s: float = 0.0) -> Assignment:
        """The next split for ``reader_id`` (see :class:`SplitAssigner`); raises the
        enumeration error once the splits enumerated before it were handed out."""
        return self.assigner.request(reader_id, timeout_s)

    def reader_failed(self, reader_id: str) -> int:
        """Hand a dead reader's unacknowledged splits out again; returns how many."""
        return self.assigner.reader_failed(reader_id)

    def ack(self, split_id: str, consumed: int | None) -> None:
        """The sink has the split's first ``consumed`` source records (None: all of it).

        A late ack of a split already committed (a reassigned split acknowledged by the
        reader that was declared dead, say) is ignored. Writes the checkpoint when
        ``checkpoint_interval_s`` passed since the last write.
        """
        with self._lock:
            try:
                self.tracker.ack(split_id, consumed)
            except UnknownSplitError:
                log.debug("ignoring ack of committed split %s", split_id)
            self.assigner.acked(split_id, consumed)
            self.session.mark_dirty()
        crash_point("after_ack")
        if self.session.due(self.checkpoint_interval_s):
            self.write_checkpoint()

    # -- checkpoints and state ----------------------------------------------------------

    @property
    def store(self) -> CheckpointStore | None:
        """The checkpoint store (None: in memory); set to None to stop writing."""
        return self.session.store

    @store.setter
    def store(self, value: CheckpointStore | None) -> None:
        self.session.store = value

    def write_checkpoint(self) -> None:
        """Write the acknowledged state now (no-op without a store or new acks)."""
        hashes = self._loop.hashes_from if self._loop is not None else None
        with self._lock:
            if self._tracker is None:
                return
            self.session.write(self._tracker, self.enumerator.identity, hashes,
                               functools.partial(crash_point, "during_checkpoint_write"))

    def committed(self) -> Position:
        """The committed (acknowledged, exclusive) position."""
        return self.tracker.committed()

    def lag(self) -> Lag:
        """How far the committed position is behind the branch head (the last good
        measure while the table metadata is being replaced or the lineage is broken)."""
        try:
            self._last_lag = measure_lag(self.committed(), self.enumerator)
        except Exception as exc:  # a reset in progress: the loop deals with it
            log.debug("lag not measured: %s: %s", type(exc).__name__, exc)
        return self._last_lag

    def status(self) -> dict[str, Any]:
        """``committed``, ``in_flight`` / ``pending`` / ``handed`` splits, ``drained``
        (available-now enumeration done, nothing waits) and ``finished`` (drained and all
        acknowledged). Raises the enumeration error, if any."""
        self.assigner.raise_error()
        with self._lock:
            drained = self.assigner.drained
            in_flight = self.tracker.in_flight()
            return {
                "committed": self.tracker.committed(),
                "in_flight": in_flight,
                "pending": self.assigner.waiting,
                "handed": self.assigner.handed,
                "drained": drained,
                "finished": drained and in_flight == 0,
            }
