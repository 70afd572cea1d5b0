"""The actors of a Ray stream: the coordinator's actor and the reader actors.

Runs in Ray actors (created by :class:`icefloe.ray.stream.RayStream` on the driver).
Everything crossing actors is picklable: the read context, split objects, Arrow
batches, the sink.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import ray

from icefloe.coordinator.core import Coordinator
from icefloe.coordinator.item import StreamItem
from icefloe.coordinator.lag import Lag
from icefloe.coordinator.metrics import StreamMetrics
from icefloe.enumerator.schema_track import SchemaChange
from icefloe.local.worker import BusyTime, SplitBatch, read_run
from icefloe.reader.context import ReadContext
from icefloe.reader.split_reader import SplitReader
from icefloe.retry import RetryPolicy
from icefloe.source import IcebergSource
from icefloe.splits.split import FileSplit
from icefloe.state.position import Position

log = logging.getLogger(__name__)

Sink = Callable[[StreamItem], Any] | Any
"""A picklable callable taking a :class:`StreamItem`, or an object with ``write(item)``.

An object sink may also define ``acked(item)``: the reader actor then waits for the
enumerator to record each batch's ack (and to write the checkpoint when due) and calls
it, in the reader actor, before it reads on (one round trip per batch)."""


# -- the enumerator actor ------------------------------------------------------------------


class EnumeratorActor:
    """The :class:`~icefloe.coordinator.Coordinator` of a Ray stream, in one Ray actor.

    Actor methods run one at a time in the order each caller submitted them (a
    reader's acks apply in order); the coordinator's enumeration loop runs on a thread
    of its own. Constructor arguments must pickle: the catalog travels as a name plus
    ``catalog.<prop>`` options and is opened here.
    """

    def __init__(self, table: str, catalog: str | None, options: Mapping[str, Any],
                 checkpoint: str | None, available_now: bool, max_in_flight_per_reader: int,
                 max_pending: int, checkpoint_interval_s: float,
                 metrics_interval_s: float = 0.0) -> None:
        source = IcebergSource(table, catalog=catalog, options=options)
        self.coordinator = Coordinator(
            source.handle, source.options.for_mode("continuous"), checkpoint,
            available_now=available_now, max_pending=max_pending,
            max_in_flight_per_reader=max_in_flight_per_reader,
            checkpoint_interval_s=checkpoint_interval_s, schema_barrier=True)
        self.exporter: Any = None
        if metrics_interval_s > 0:
            from icefloe.ray.metrics import RayMetricsExporter

            self.exporter = RayMetricsExporter(self.coordinator.metrics, metrics_interval_s)

    def start(self) -> tuple[ReadContext, int | None]:
        """Restore (or resolve the start), start enumerating; returns the read context
        and its schema id (the stream's start schema)."""
        context = self.coordinator.start()
        return context, self.coordinator.enumerator.base_schema_id

    def context_for(self, schema_id: int) -> ReadContext:
        """The read context of a stream schema a split names (``split.schema_id``)."""
        return self.coordinator.context_for(schema_id)

    def schema_change(self, schema_id: int) -> SchemaChange | None:
        """The change that led the stream to ``schema_id`` (None: the start schema)."""
        return self.coordinator.schema_change(schema_id)

    def request_split(self, reader_id: str, delivered: tuple[int, int, float] | None = None
                      ) -> tuple[str, FileSplit | None]:
        """The next split for ``reader_id``: ``("split", s)``, ``("wait", None)`` (nothing
        now, or the reader holds ``max_in_flight_per_reader`` unacked splits), ``("end",
        None)`` (the reader was declared failed: it must stop) or ``("done", None)``.
        ``delivered``: the reader's cumulative rows, batches and busy seconds (metrics)."""
        if delivered is not None:
            self.coordinator.readers_delivered(reader_id, *delivered)
        answer = self.coordinator.request_split(reader_id)
        return answer.kind, answer.split

    def ack(self, split_id: str, consumed: int | None) -> None:
        """The sink has the split's first ``consumed`` source records (None: all of it)."""
        self.coordinator.ack(split_id, consumed)

    def watermark(self) -> int | None:
        """The stream's event-time watermark across every reader (``watermarkColumn``)."""
        return self.coordinator.watermark()

    def retry_policy(self) -> RetryPolicy:
        """The stream's retry policy (``maxAttempts``, ``retryBackoffMs``): a reader
        re-reads a split after a transient fault by it."""
        return self.coordinator.retry

    def read_failed(self, error_type: str, retrying: bool) -> None:
        """A reader's attempt to read a split failed with ``error_type`` (metrics:
        ``retries`` / ``errors`` of operation ``read``)."""
        self.coordinator.recorder.count_failure("read", error_type, retrying)

    def reader_failed(self, reader_id: str) -> int:
        """Hand ``reader_id``'s unacknowledged splits out again first; returns how many."""
        return self.coordinator.reader_failed(reader_id)

    def status(self) -> dict[str, Any]:
        """See :meth:`Coordinator.status`."""
        return self.coordinator.status()

    def lag(self) -> Lag:
        """The committed position's lag behind the branch head."""
        return self.coordinator.lag()

    def metrics(self) -> StreamMetrics:
        """See :meth:`Coordinator.metrics` (deliveries as the readers last reported)."""
        return self.coordinator.metrics()

    def write_checkpoint(self) -> None:
        """Write the acknowledged state now (no-op without a store or new acks)."""
        self.coordinator.write_checkpoint()

    def close(self) -> Position | None:
        """Stop enumerating, write the final checkpoint; returns the committed position."""
        committed = self.coordinator.stop()
        if self.exporter is not None:
            self.exporter.close()
        return committed


# -- the reader actors ----------------------------------------------------------------------


class ReaderActor:
    """Pulls splits from the enumerator and reads them. Runs in a Ray actor.

    With a ``sink``, each non-empty batch is passed to it in this actor and acked when
    it returns. Without, batches wait in an outbox of ``outbox_batches`` for the
    driver's :meth:`poll` (a full outbox stops reading: backpressure).

    Counts the rows and batches it delivers (to the sink, or into the outbox) and the
    time it spends reading, and reports them with each split request (metrics). A
    transient read fault re-reads the split from the last record delivered, per the
    stream's retry policy; each failed attempt is reported to the enumerator (metrics).
    """

    def __init__(self, reader_id: str, enumerator: Any, context: ReadContext,
                 sink: Sink | None = None, outbox_batches: int = 4,
                 base_schema_id: int | None = None) -> None:
        self.reader_id = reader_id
        self.enumerator = enumerator
        self.context = context
        self.sink = sink
        self.base_schema_id = base_schema_id
        self._schema_id = base_schema_id  # of the last item given to the sink
        self._watermark: int | None = None  # the stream's, when the split was handed out
        self._outbox: queue.Queue[tuple[pa.RecordBatch, FileSplit, int, bool]] = \
            queue.Queue(maxsize=outbox_batches)
        self._stop = threading.Event()
        self._busy = False
        self._error: BaseException | None = None
        self.rows = 0
        self.batches = 0
        self.busy_time = BusyTime()
        self._thread = threading.Thread(target=self._loop, name=f"icefloe-{reader_id}",
                                        daemon=True)
        self._thread.start()

    def _deliver(self, item: tuple[pa.RecordBatch, FileSplit, int, bool]) -> bool:
        batch, split, consumed, last = item
        if batch.num_rows:
            self.rows += batch.num_rows
            self.batches += 1
        if self.sink is None:
            while not self._stop.is_set():
                try:
                    self._outbox.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False
        if not batch.num_rows:
            self.enumerator.ack.remote(split.split_id, None if last else consumed)
            return True
        schema_id = split.schema_id if split.schema_id is not None else self.base_schema_id
        change = None
        if schema_id != self._schema_id and schema_id is not None:
            change = ray.get(self.enumerator.schema_change.remote(schema_id))
            self._schema_id = schema_id
        ray_item = StreamItem(batch, split, consumed, last, self.reader_id,
                              schema_id=schema_id, schema_change=change,
                              watermark=self._watermark)
        write = getattr(self.sink, "write", None)
        write(ray_item) if write is not None else self.sink(ray_item)
        ack = self.enumerator.ack.remote(split.split_id, None if last else consumed)
        acked = getattr(self.sink, "acked", None)
        if acked is not None:
            ray.get(ack)
            acked(ray_item)
        return True

    def _read_failed(self, exc: BaseException, retrying: bool) -> None:
        self.enumerator.read_failed.remote(type(exc).__name__, retrying)  # no wait

    def _loop(self) -> None:
        reader = SplitReader(self.context, self._context_for)
        try:
            retry = ray.get(self.enumerator.retry_policy.remote())
            while not self._stop.is_set():
                self._busy = True
                delivered = (self.rows, self.batches, self.busy_time.seconds)
                kind, split = ray.get(self.enumerator.request_split.remote(self.reader_id,
                                                                           delivered))
                if kind == "end":
                    return
                if split is None:  # "wait", or "done" (a dead reader's splits may follow)
                    self._busy = False
                    self._stop.wait(0.05)
                    continue
                if self.sink is not None and split.watermark_ms is not None:
                    now = ray.get(self.enumerator.watermark.remote())
                    if now is not None and (self._watermark is None or now > self._watermark):
                        self._watermark = now
                for item in read_run(reader, [split], retry, self._stop, self.busy_time,
                                     self._read_failed):
                    if not isinstance(item, SplitBatch):
                        continue  # a retry's flush: every item is delivered as it comes
                    if not self._deliver((item.batch, split, item.consumed, item.last)):
                        return
                self._busy = False
        except BaseException as exc:
            log.exception("reader %s failed", self.reader_id)
            self._error = exc
        finally:
            self._busy = False

    def _context_for(self, schema_id: int) -> ReadContext:
        """A stream schema's read context, from the enumerator actor (once per schema:
        :meth:`SplitReader.for_schema` keeps the reader it builds)."""
        return ray.get(self.enumerator.context_for.remote(schema_id))

    def poll(self, max_items: int = 16, timeout_s: float = 0.2
             ) -> tuple[list[tuple[pa.RecordBatch, FileSplit, int, bool]], bool]:
        """Driver mode: ``(items, idle)``; ``idle``: no split being read, outbox empty."""
        if self._error is not None:
            raise self._error
        items = []
        try:
            items.append(self._outbox.get(timeout=timeout_s))
            while len(items) < max_items:
                items.append(self._outbox.get_nowait())
        except queue.Empty:
            pass
        idle = not self._busy and self._outbox.empty() and not items
        return items, idle

    def ping(self) -> bool:
        """Liveness; raises the reading error if the reader thread failed."""
        if self._error is not None:
            raise self._error
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
