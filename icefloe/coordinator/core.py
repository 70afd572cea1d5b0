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
- the :class:`~icefloe.coordinator.lag.Lag` of the committed position, and the read's
  :class:`~icefloe.coordinator.metrics.StreamMetrics` (:meth:`Coordinator.metrics`: the
  :class:`~icefloe.coordinator.recorder.MetricsRecorder`'s counters, the assigner's
  pending splits, the lag; what the readers report of their deliveries).

Drivers: :class:`icefloe.local.stream.LocalStream` runs it in the user's process and
feeds the local engine from :meth:`request_split`; the Ray ``EnumeratorActor`` runs it
in an actor and answers its reader actors with it. Every method is thread-safe.

Checkpoints are written: at :meth:`start` when the start was resolved now (a restart
must not resolve ``latest`` anew), at once after a lineage reset (a restart must not
resolve ``restartFromHead`` anew), on acks at most every ``checkpoint_interval_s``
seconds (0: every ack), and at :meth:`stop`. Each holds the stream schema at the
committed position (``onSchemaChange``, :mod:`icefloe.enumerator.schema_track`).

Schema switches (``evolve``): the loop hands a
:class:`~icefloe.enumerator.continuous.SchemaSwitch` to :meth:`schema_switched` before the
splits read in the new schema; the read context of every schema is served by
:meth:`context_for` (reader threads and actors build their reader from it, by the
split's ``schema_id``) and the change by :meth:`schema_change`. With ``schema_barrier``
(Ray, whose readers deliver out of split order) the switch waits until every split
before it is acknowledged, so no batch of the old schema follows the first one of the new.
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
from icefloe.coordinator.metrics import StreamMetrics
from icefloe.coordinator.recorder import MetricsRecorder
from icefloe.coordinator.watermark import WatermarkTracker
from icefloe.enumerator.continuous import ContinuousEnumerator, SchemaSwitch
from icefloe.enumerator.schema_track import SchemaChange, StreamSchema
from icefloe.errors import UnknownSplitError
from icefloe.reader.context import ReadContext
from icefloe.retry import RetryPolicy, observe_retries
from icefloe.state.acks import AckTracker
from icefloe.state.session import CheckpointSession

if TYPE_CHECKING:
    from icefloe.catalog.handle import TableHandle
    from icefloe.options import SourceOptions
    from icefloe.state.position import Position
    from icefloe.state.store import CheckpointStore

log = logging.getLogger(__name__)


KEPT_SCHEMAS = 16
"""Read contexts of schemas switched to that a coordinator keeps besides the start one."""


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
        schema_barrier: a schema switch waits for every earlier split's ack (readers
            that deliver out of split order: Ray).
    """

    def __init__(self, handle: TableHandle, options: SourceOptions, checkpoint: str | None,
                 *, available_now: bool = False, max_pending: int = 4,
                 max_in_flight_per_reader: int | None = None,
                 checkpoint_interval_s: float = 1.0, schema_barrier: bool = False) -> None:
        self.handle = handle
        self.options = options
        self.available_now = available_now
        self.checkpoint_interval_s = checkpoint_interval_s
        self.retry = RetryPolicy.from_options(options)
        self.recorder = MetricsRecorder(options.poll_interval_ms / 1000, self.retry)
        self._deliveries: dict[str, tuple[int, int, float]] = {}
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
        self.schema_barrier = schema_barrier
        self._contexts: dict[int, ReadContext] = {}
        self._changes: dict[int, SchemaChange] = {}
        self._base_schema: StreamSchema | None = None
        self._switches: list[tuple[Position, StreamSchema]] = []  # in position order
        self._start_key: int | None = None  # the start schema's context key (kept)
        self.watermarks = WatermarkTracker()
        """Event time (``watermarkColumn``): the stream's watermark across its readers."""

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> ReadContext:
        """Restore the checkpoint (or resolve the start), write a new start at once, start
        the enumeration thread; returns the read context of the table's current schema."""
        handle, opts = self.handle, self.options
        self.session.last_write = time.monotonic()
        crash_point("during_restore")
        start = self.session.restore(self.enumerator)
        restored = StreamSchema(*start.schema) if start.schema is not None else None
        self._base_schema = self.enumerator.start_schema(restored)
        if restored is not None and restored != self._base_schema:
            log.info("stream schema %d (checkpoint) -> %d at the restart of %s",
                     restored.schema_id, self._base_schema.schema_id, handle.identifier)
            self.session.mark_dirty()
        with self._lock:
            self._tracker = start.tracker()
            self.watermarks = WatermarkTracker(start.watermark_ms)
        self.write_checkpoint()  # a new start is durable at once (restore marked it dirty)
        context = ReadContext.create(handle.metadata, handle.io, self.enumerator.read_schema(),
                                     opts, self.enumerator.names)
        self._contexts[self._base_schema.schema_id] = context
        self._start_key = self._base_schema.schema_id
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

    def reset_to(self, position: Position, schema_reset: SchemaSwitch | None = None) -> bool:
        """A lineage strategy moved the position: wait for the in-flight acks, restart
        tracking at ``position`` and write that checkpoint at once (a restart before the
        next ack must not resolve the strategy again: ``restartFromHead`` would skip what
        was committed in between). False if stopped while waiting.

        ``schema_reset`` (the reset moved onto a re-created table): the stream schema
        starts again in the new table; the old table's read contexts are dropped (every
        split of it was acknowledged) and the new one is keyed by the switch's tag.
        """
        while self.tracker.in_flight():
            if self.stop_event.wait(0.05):
                return False
        context = None
        if schema_reset is not None:
            metadata = self.handle.metadata
            schema = metadata.schema_by_id(schema_reset.schema.schema_id) or metadata.schema()
            context = ReadContext.create(metadata, self.handle.io, schema, self.options,
                                         self.enumerator.names)
        with self._lock:
            self._tracker = AckTracker(position, (), ())
            if schema_reset is not None and context is not None:
                self._contexts = {schema_reset.key: context}
                self._start_key = schema_reset.key
                self._changes = {schema_reset.key: schema_reset.change}
                self._base_schema = schema_reset.schema
                self._switches = []
            self.watermarks.reset()
            self.session.mark_dirty()
        self.write_checkpoint()
        return True

    # -- schemas --------------------------------------------------------------------------

    def schema_switched(self, switch: SchemaSwitch) -> bool:
        """The loop met an ``evolve`` switch: make its read context available, remember
        where it applies (for checkpoints), and with ``schema_barrier`` first wait until
        every split before it is acknowledged. False if stopped while waiting."""
        while self.schema_barrier and self.tracker.in_flight():
            if self.stop_event.wait(0.05):
                return False
        schema_id = switch.schema.schema_id
        key = switch.key
        metadata = self.handle.metadata
        new = metadata.schema_by_id(schema_id)
        if new is None:
            raise RuntimeError(f"schema {schema_id} is not in the metadata")
        # the names the options typed, by field id: a renamed column keeps its place
        context = ReadContext.create(metadata, self.handle.io, new, self.options,
                                     self.enumerator.names)
        with self._lock:
            self._contexts.setdefault(key, context)
            self._changes[key] = switch.change
            self._switches.append((switch.position, switch.schema))
            # a stream lives for months: keep the start schema's context and the last
            # KEPT_SCHEMAS ones (readers are never that many schemas behind: a switch
            # waits for nothing, but every schema's splits are read in split order)
            while len(self._contexts) > KEPT_SCHEMAS + 1:
                oldest = next(k for k in self._contexts if k != self._start_key)
                del self._contexts[oldest]
                self._changes.pop(oldest, None)
        return True

    def context_for(self, schema_id: int) -> ReadContext:
        """The read context of ``schema_id`` (a split's ``schema_id``; thread-safe).

        Raises:
            KeyError: a schema the stream never switched to.
        """
        return self._contexts[schema_id]

    def schema_change(self, schema_id: int) -> SchemaChange | None:
        """The change that led the stream to ``schema_id`` (None: its start schema)."""
        return self._changes.get(schema_id)

    def schema_at(self, position: Position) -> StreamSchema | None:
        """The stream schema at ``position`` (the last switch at or before it); drops the
        switches older than that one. Caller holds the lock."""
        current = self._base_schema
        keep_from = 0
        key = position.sort_key()
        for i, (where, schema) in enumerate(self._switches):
            if where.sort_key() <= key:
                current, keep_from = schema, i
        del self._switches[:keep_from]
        return current

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
            if self.assigner.acked(split_id, consumed):
                self.recorder.split_finished()
            if consumed is None:
                self.watermarks.acked(split_id)
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
            schema = self.schema_at(self._tracker.committed())
            started = time.monotonic()
            counted: list[BaseException] = []  # failures the store's retries reported

            def failed(exc: BaseException, retrying: bool) -> None:
                self.recorder.failed("checkpoint", exc, retrying)
                counted.append(exc)

            with observe_retries(failed):
                try:
                    written = self.session.write(
                        self._tracker, self.enumerator.identity, hashes,
                        functools.partial(crash_point, "during_checkpoint_write"),
                        None if schema is None else (schema.schema_id, schema.since),
                        self.watermarks.current())
                except Exception as exc:
                    if not any(exc is seen for seen in counted):  # a local store's error
                        self.recorder.failed("checkpoint", exc, False)
                    raise
            if written:
                self.recorder.checkpoint_written(time.monotonic() - started,
                                                 self.session.last_bytes)

    def committed(self) -> Position:
        """The committed (acknowledged, exclusive) position."""
        return self.tracker.committed()

    def watermark(self) -> int | None:
        """The event-time watermark (``watermarkColumn``), milliseconds since the epoch:
        never decreasing, also across restarts (:mod:`icefloe.coordinator.watermark`);
        None without the option or before anything is known."""
        return self.watermarks.current()

    def lag(self) -> Lag:
        """How far the committed position is behind the branch head (the last good
        measure while the table metadata is being replaced or the lineage is broken)."""
        try:
            self._last_lag = measure_lag(self.committed(), self.enumerator)
        except Exception as exc:  # a reset in progress: the loop deals with it
            log.debug("lag not measured: %s: %s", type(exc).__name__, exc)
        return self._last_lag

    def readers_delivered(self, reader_id: str, rows: int, batches: int,
                          busy_s: float) -> None:
        """What reader ``reader_id`` delivered so far (cumulative rows, batches and
        seconds busy reading); :meth:`metrics` sums the readers' last reports."""
        self._deliveries[reader_id] = (rows, batches, busy_s)

    def metrics(self, delivered: tuple[int, int, float] | None = None) -> StreamMetrics:
        """The read's metrics now (:class:`StreamMetrics`; measures the lag).

        Args:
            delivered: ``(rows, batches, reader busy seconds)`` counted by the driver
                (the local stream); None sums what the readers reported
                (:meth:`readers_delivered`: Ray's reader actors).
        """
        if delivered is None:
            reports = list(self._deliveries.values())
            delivered = (sum(r[0] for r in reports), sum(r[1] for r in reports),
                         sum(r[2] for r in reports))
        lag = self.lag()
        pending, records, nbytes = self.assigner.pending_totals()
        committed = self._tracker.committed() if self._tracker is not None else None
        return StreamMetrics(
            table=self.handle.identifier,
            lag_snapshots=lag.snapshots, lag_records=lag.records, lag_files=lag.files,
            lag_bytes=lag.bytes, lag_seconds=lag.seconds,
            head_snapshot_id=lag.head_snapshot_id,
            committed_snapshot_id=None if committed is None else committed.snapshot_id,
            pending_splits=pending, pending_records=records, pending_bytes=nbytes,
            assigned_splits=self.assigner.assigned,
            rows=delivered[0], batches=delivered[1], reader_busy_seconds=delivered[2],
            **self.recorder.values(),  # type: ignore[arg-type]
        )

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
