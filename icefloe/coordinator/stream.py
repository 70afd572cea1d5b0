"""StreamBase: the one stream API of every engine (``for item in stream``, ``stop()``, ...).

The local stream and the Ray stream (driver mode) differ only in where batches come
from and where acks go; this class holds everything a consumer sees:

- iteration: :class:`~icefloe.coordinator.item.StreamItem` values in split order per
  reader; a split's empty final item is acknowledged here, never delivered;
- :meth:`StreamBase.stop` (also ``close`` and the context manager's exit): thread-safe
  and idempotent. Called from another thread while the consumer is handling an item,
  it waits (up to ``timeout_s``) for the consumer to come back for the next one, so the
  item's ack is in the final checkpoint; a consumer waiting for data is woken up and its
  loop ends. Then the engine stops and the final checkpoint is written. Items delivered
  and never acknowledged are counted (:attr:`Stats.unacked`) and logged as a warning;
- acks: idempotent per item; after :meth:`stop` they raise
  :class:`~icefloe.errors.StreamClosedError`;
- :attr:`lag`, :attr:`stats`, :meth:`committed`, :meth:`describe`, :meth:`metrics`
  (:class:`~icefloe.coordinator.metrics.StreamMetrics`) and, with ``metrics_port``, the
  Prometheus endpoint of :mod:`icefloe.metrics.prometheus` (``/metrics``, ``/healthz``)
  from :meth:`StreamBase.start` to :meth:`StreamBase.stop`;
- event time (``watermarkColumn``): :attr:`StreamBase.watermark` and every item's
  ``watermark``, never decreasing (the engine's :meth:`StreamBase._watermark`, kept
  monotonic here too).

- schemas: every item carries its ``schema_id``; the first item of a new schema
  (``onSchemaChange=evolve``) carries the change (``item.schema_change``) and
  :attr:`StreamBase.schema_id` follows it.

Subclasses supply :meth:`StreamBase._open` (which sets ``_base_schema_id``),
:meth:`StreamBase._batches`, :meth:`StreamBase._send_ack`, :meth:`StreamBase._shutdown`,
:meth:`StreamBase._schema_change`, :meth:`committed`, :attr:`lag` and :meth:`metrics`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from icefloe.coordinator.crash import crash_point
from icefloe.coordinator.item import Deliveries, Stats, StreamItem
from icefloe.coordinator.lag import Lag
from icefloe.coordinator.metrics import StreamMetrics
from icefloe.enumerator.schema_track import SchemaChange, table_schema_id
from icefloe.errors import StreamClosedError
from icefloe.splits.split import FileSplit
from icefloe.state.position import Position

log = logging.getLogger(__name__)

RawItem = tuple[pa.RecordBatch, FileSplit, int, bool, str]
"""``(batch, split, consumed, last, reader id)`` as an engine produces it."""


class StreamBase:
    """The consumer side of a continuous read (module docstring).

    Args:
        metrics_port: serve :meth:`metrics` in the Prometheus text format on this port
            (0: any free port, see :attr:`metrics_address`) while the stream runs; needs
            the ``icefloe[metrics]`` extra. None: no endpoint.
        metrics_host: the interface the endpoint listens on (``0.0.0.0``: every one).

    Raises:
        ImportError: ``metrics_port`` without the ``icefloe[metrics]`` extra installed.
        InvalidOptionError: from :meth:`start`, when ``metrics_port`` is taken (the
            stream is stopped again).
    """

    def __init__(self, metrics_port: int | None = None,
                 metrics_host: str = "127.0.0.1") -> None:
        if metrics_port is not None:
            from icefloe.metrics.prometheus import require_prometheus

            require_prometheus()
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self.metrics_server: Any = None
        self.stats = Stats()
        self._deliveries = Deliveries(self.stats)
        self._stopping = threading.Event()
        self._closed = False
        self._started = False
        self._stop_lock = threading.Lock()
        self._consumer = threading.Condition()
        self._holding: threading.Thread | None = None  # consumer thread handling an item
        self._items: Iterator[StreamItem] | None = None  # the one iteration (see __next__)
        self._base_schema_id: int | None = None  # the schema the readers started with
        self.schema_id: int | None = None
        """The schema of the last item delivered (before any: the start schema)."""
        self._schema_tag: int | None = None  # its tag (SCHEMA_EPOCH)
        self._last_watermark: int | None = None

    # -- what an engine supplies -----------------------------------------------------

    def _open(self) -> None:
        """Start the engine (restore the checkpoint, start enumerating and reading)."""
        raise NotImplementedError

    def _batches(self) -> Iterator[RawItem]:
        """The engine's items; returns soon after ``self._stopping`` is set."""
        raise NotImplementedError

    def _send_ack(self, split_id: str, consumed: int | None, wait: bool) -> None:
        """Record an ack with the coordinator."""
        raise NotImplementedError

    def _shutdown(self) -> None:
        """Stop the engine and write the final checkpoint."""
        raise NotImplementedError

    def _schema_change(self, schema_id: int) -> SchemaChange | None:
        """The change that led the stream to ``schema_id``."""
        raise NotImplementedError

    def committed(self) -> Position:
        """The committed (acknowledged, exclusive) position."""
        raise NotImplementedError

    _watermark_per_item = True
    """Ask :meth:`_watermark` for every item (False: for the first item of each split,
    where asking costs a remote call: Ray)."""

    def _watermark(self) -> int | None:
        """The engine's event-time watermark now (None: no ``watermarkColumn``)."""
        return None

    def _observe_watermark(self, value: int | None) -> int | None:
        last = self._last_watermark
        if value is not None and (last is None or value > last):
            self._last_watermark = last = value
        return last

    @property
    def watermark(self) -> int | None:
        """The stream's event-time watermark (``watermarkColumn``), milliseconds since the
        epoch: the smallest lower bound of the column among the splits not yet
        acknowledged, never decreasing (also across a restart from a checkpoint); None
        without the option or before anything is known. After :meth:`stop`, the last one
        seen."""
        if not self._started or self._closed:
            return self._last_watermark
        return self._observe_watermark(self._watermark())

    @property
    def lag(self) -> Lag:
        """How far the committed position is behind the branch head."""
        raise NotImplementedError

    def metrics(self) -> StreamMetrics:
        """The stream's metrics now (README "Metrics"); measures the lag."""
        raise NotImplementedError

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Restore from the checkpoint (or resolve the start) and start reading."""
        if self._started:
            return
        if self._closed:
            raise StreamClosedError("the stream is closed; open a new one")
        self._started = True
        self._open()
        self.schema_id = self._schema_tag = self._base_schema_id
        if self.metrics_port is not None:
            from icefloe.metrics.prometheus import MetricsServer

            try:
                self.metrics_server = MetricsServer(self.metrics, self.metrics_port,
                                                    self.metrics_host)
            except BaseException:
                self.stop()  # nothing left running behind the error
                raise

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """``(host, port)`` of the metrics endpoint while it serves (None: none)."""
        server = self.metrics_server
        return None if server is None else server.address

    def __enter__(self) -> StreamBase:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the stream and write the final checkpoint (thread-safe, idempotent).

        From another thread while the consumer handles an item, first wait up to
        ``timeout_s`` for the consumer to ask for the next item (its ack then makes the
        final checkpoint). Acks after this returns raise ``StreamClosedError``.
        """
        self._stopping.set()
        with self._stop_lock:
            if self._closed:
                return
            with self._consumer:
                self._consumer.wait_for(
                    lambda: self._holding in (None, threading.current_thread()), timeout_s)
            self._closed = True
            try:
                if self._started:
                    self._shutdown()
            finally:
                if self.metrics_server is not None:
                    self.metrics_server.close()
        if self.stats.unacked:
            log.warning("stream stopped with %d delivered items never acknowledged: they "
                        "are delivered again after a restart", self.stats.unacked)

    def close(self) -> None:
        """Same as :meth:`stop`."""
        self.stop()

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping.is_set()

    # -- the consumer -----------------------------------------------------------------

    def __iter__(self) -> Iterator[StreamItem]:
        """The stream is its own iterator: every ``iter(stream)`` (a second ``for`` loop, or
        ``next(iter(stream))`` twice) goes on where the last one stopped, over one engine
        run (an abandoned generator per ``iter()`` would strand the splits it held)."""
        return self

    def __next__(self) -> StreamItem:
        if self._items is None:
            self._items = self._generate()
        return next(self._items)

    def _generate(self) -> Iterator[StreamItem]:
        self.start()
        if self._stopping.is_set():
            raise StreamClosedError("the stream is stopped; open a new one")
        me = threading.current_thread()
        try:
            for batch, split, consumed, last, reader_id in self._batches():
                if self._stopping.is_set():
                    return
                if last and not batch.num_rows:
                    self._send_ack(split.split_id, None, False)  # nothing to deliver: done
                    self.stats.splits += 1
                    continue
                self.stats.rows += batch.num_rows
                self.stats.batches += 1
                self.stats.splits += 1 if last else 0
                index = self._deliveries.delivered(split.split_id)
                crash_point("after_emit")
                tag = split.schema_id if split.schema_id is not None \
                    else self._base_schema_id
                change = None
                if tag != self._schema_tag and tag is not None:
                    change = self._schema_change(tag)
                    self._schema_tag = tag
                    self.schema_id = table_schema_id(tag)
                watermark = self._observe_watermark(self._watermark()) \
                    if self._watermark_per_item or index == 1 else self._last_watermark
                item = StreamItem(batch, split, consumed, last, reader_id, index,
                                  None if tag is None else table_schema_id(tag), change,
                                  self._ack_item, watermark)
                with self._consumer:
                    self._holding = me
                yield item
                with self._consumer:
                    self._holding = None
                    self._consumer.notify_all()
                if self._stopping.is_set():
                    return
        finally:
            with self._consumer:
                self._holding = None
                self._consumer.notify_all()

    def _ack_item(self, item: StreamItem, wait: bool) -> None:
        if self._closed:
            raise StreamClosedError(
                f"ack of split {item.split_id!r} after the stream was stopped: the final "
                "checkpoint is written; the item is delivered again after a restart")
        if self._deliveries.acked(item):
            self._send_ack(item.split_id, None if item.last else item.consumed, wait)

    # -- display ----------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """Committed position, lag and throughput, for displays."""
        lag = self.lag
        return {
            "committed": self.committed().describe(),
            "snapshots_behind": lag.snapshots,
            "records_behind": lag.records,
            "seconds_behind": round(lag.seconds, 1),
            "rows": self.stats.rows,
            "rows_per_s": round(self.stats.rows_per_second),
            "unacked": self.stats.unacked,
        }
