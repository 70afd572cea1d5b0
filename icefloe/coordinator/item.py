"""The values a stream's consumer receives: :class:`StreamItem` and :class:`Stats`.

One item type for every engine (the local stream, Ray in driver mode and in a reader
actor's sink), and :class:`Deliveries`, the consumer-side ledger that makes acks
idempotent and counts what was delivered but never acknowledged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from icefloe.enumerator.schema_track import SchemaChange
from icefloe.splits.split import FileSplit


@dataclass(frozen=True)
class StreamItem:
    """One batch of a stream. Call :meth:`ack` once the sink has it durably.

    Acks are cumulative within a split (acking a batch acknowledges the split's batches
    before it) and idempotent (acking an item again, or an earlier item of an acked
    split, does nothing). An item of a stream that was stopped cannot be acked
    (:class:`~icefloe.errors.StreamClosedError`). Items handed to a Ray ``sink`` in a
    reader actor need no ack: the reader acks each when the sink returns.

    Attributes:
        batch: the rows (at most ``batchSize``).
        split: the split the rows come from.
        consumed: source records of the split done after this batch (resume offset).
        last: True on the split's final batch.
        reader_id: the reader that read it (a Ray reader actor; ``local`` otherwise).
        index: 1-based number of this item among its split's delivered items.
        schema_id: the table schema the batch is in (the stream schema of its snapshot;
            ``onSchemaChange``).
        schema_change: on the first item of a new schema (``onSchemaChange=evolve``), what
            changed (:class:`~icefloe.enumerator.schema_track.SchemaChange`: ``added``,
            ``renamed``, ... and ``snapshot_id``); None on every other item. In a Ray
            reader actor's sink it is set on that reader's first item of the schema.
        watermark: event time (``watermarkColumn``): the stream's watermark when the item
            was delivered, milliseconds since the epoch: the smallest lower bound of the
            column among the splits not yet acknowledged (this item's split is one of
            them, so its rows are not older than its file's bound, which is at least
            this). Never decreasing from item to item, also across a restart from a
            checkpoint; the same across Ray's reader actors (one coordinator computes
            it). None without the option. In a Ray reader actor's sink: the watermark
            when its split was handed out.
    """

    batch: pa.RecordBatch
    split: FileSplit
    consumed: int
    last: bool
    reader_id: str = ""
    index: int = 0
    schema_id: int | None = None
    schema_change: SchemaChange | None = None
    _acker: Callable[[StreamItem, bool], None] | None = field(
        default=None, repr=False, compare=False)
    watermark: int | None = None

    @property
    def split_id(self) -> str:
        return self.split.split_id

    @property
    def snapshot_id(self) -> int:
        return self.split.snapshot_id

    @property
    def sequence_number(self) -> int:
        return self.split.sequence_number

    def ack(self, wait: bool = False) -> None:
        """Acknowledge this batch (and, cumulatively, the split's batches before it).

        Args:
            wait: Ray only: return once the enumerator actor recorded the ack (and wrote
                the checkpoint, when ``checkpoint_interval_s`` is due). Without it the ack
                is sent and not awaited: a crash right after may lose it, and the batch is
                then delivered again after the restart (at least once). Local acks are
                always recorded before ``ack`` returns.

        Raises:
            StreamClosedError: the stream was stopped (its final checkpoint is written).
        """
        if self._acker is not None:
            self._acker(self, wait)


@dataclass
class Stats:
    """Throughput and acknowledgement counts of a stream (updated as it runs).

    Attributes:
        rows / batches: delivered to the consumer.
        splits: splits delivered completely.
        unacked: delivered items not acknowledged (by themselves or a later item of
            their split); a stream that stops with some logs a warning.
    """

    rows: int = 0
    batches: int = 0
    splits: int = 0
    unacked: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def rows_per_second(self) -> float:
        return self.rows / max(time.monotonic() - self.started, 1e-9)


class Deliveries:
    """Which delivered items are acknowledged, per split (consumer side, thread-safe)."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self._lock = threading.Lock()
        self._open: dict[str, list[int]] = {}  # split id -> [delivered, acked through]

    def delivered(self, split_id: str) -> int:
        """Count one more item of ``split_id``; returns its 1-based index."""
        with self._lock:
            entry = self._open.setdefault(split_id, [0, 0])
            entry[0] += 1
            self.stats.unacked += 1
            return entry[0]

    def acked(self, item: StreamItem) -> bool:
        """Record ``item``'s ack; False when it was acknowledged already (do nothing)."""
        with self._lock:
            entry = self._open.get(item.split_id)
            if entry is None or item.index <= entry[1]:
                return False
            self.stats.unacked -= item.index - entry[1]
            entry[1] = item.index
            if item.last:
                del self._open[item.split_id]
            return True
