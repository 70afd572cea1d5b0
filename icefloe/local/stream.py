"""The local continuous stream: the coordinator in the user's process, N reader threads.

A thin driver of :class:`~icefloe.coordinator.Coordinator`: the coordinator's
enumeration thread plans splits in commit order and registers them with its ack
tracker; the local engine (:func:`icefloe.local.engine.read_splits`, order-preserving)
requests them as one reader and turns them into batches; the user's loop receives
:class:`~icefloe.coordinator.item.StreamItem` values and acks them
(:class:`~icefloe.coordinator.stream.StreamBase` holds that API, shared with Ray). The
committed position advances only over acknowledged data, as a contiguous prefix, and
is written to the checkpoint store at most every ``checkpoint_interval_s`` seconds
(0: on every ack), at once after a lineage reset, and on :meth:`LocalStream.stop`.

Bounded memory: at most ``2 * parallelism`` splits wait in the coordinator and the
readers hold at most the engine's lookahead budget between them
(:func:`icefloe.local.engine.lookahead_bytes`: 64 MiB of batches per reader thread) plus
a few batches; a slow sink slows reading down (backpressure).

Delivery: each batch exactly once to the sink's eyes when nothing fails; after a
crash, a restart re-delivers only what was not acknowledged (at least once).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from icefloe.coordinator.core import Coordinator
from icefloe.coordinator.item import Stats, StreamItem
from icefloe.coordinator.lag import Lag
from icefloe.coordinator.metrics import StreamMetrics
from icefloe.coordinator.stream import RawItem, StreamBase
from icefloe.enumerator.schema_track import SchemaChange
from icefloe.local.engine import read_splits
from icefloe.local.worker import BusyTime
from icefloe.reader.context import ReadContext
from icefloe.reader.split_reader import SplitReader
from icefloe.splits.split import FileSplit
from icefloe.state.position import Position
from icefloe.state.store import CheckpointStore

if TYPE_CHECKING:
    from icefloe.source import IcebergSource

__all__ = ["Lag", "LocalStream", "Stats", "StreamItem"]

READER_ID = "local"


class LocalStream(StreamBase):
    """A continuous read of one source on local threads (see the module docstring).

    Args:
        source: the IcebergSource (its options are checked for continuous mode).
        checkpoint: checkpoint directory or fsspec URI; None keeps progress in memory.
        parallelism: reader threads.
        available_now: process what exists at start (the head then), then end.
        checkpoint_interval_s: minimum seconds between checkpoint writes (0 = every ack).
        metrics_port / metrics_host: the Prometheus endpoint
            (:class:`~icefloe.coordinator.stream.StreamBase`; None: none).
    """

    def __init__(self, source: IcebergSource, checkpoint: str | None = None,
                 parallelism: int = 2, available_now: bool = False,
                 checkpoint_interval_s: float = 1.0, metrics_port: int | None = None,
                 metrics_host: str = "127.0.0.1") -> None:
        super().__init__(metrics_port, metrics_host)
        self.source = source
        self.options = source.options.for_mode("continuous")
        self.checkpoint_location = checkpoint
        self.parallelism = parallelism
        self.available_now = available_now
        self.checkpoint_interval_s = checkpoint_interval_s
        self.coordinator = Coordinator(
            source.handle, self.options, checkpoint, available_now=available_now,
            max_pending=2 * parallelism, checkpoint_interval_s=checkpoint_interval_s)
        self._engine_stop = threading.Event()
        self._busy = BusyTime()
        self.context: ReadContext | None = None

    # -- the engine ------------------------------------------------------------------

    def _open(self) -> None:
        self.context = self.coordinator.start()
        self._base_schema_id = self.coordinator.enumerator.base_schema_id

    def _split_source(self) -> Iterator[FileSplit]:
        """The coordinator's splits for the engine, until enumeration ends or stop."""
        while not self._engine_stop.is_set():
            answer = self.coordinator.request_split(READER_ID, timeout_s=0.1)
            if answer.kind == "split":
                assert answer.split is not None
                yield answer.split
            elif answer.kind in ("done", "end"):
                return

    def _batches(self) -> Iterator[RawItem]:
        assert self.context is not None
        contexts = self.coordinator.context_for
        for sb in read_splits(self._split_source(), self.context, self.parallelism,
                              preserve_order=True,
                              reader_factory=lambda c: SplitReader(c, contexts),
                              retry=self.coordinator.retry, stop=self._engine_stop,
                              busy=self._busy,
                              failures=functools.partial(self.coordinator.recorder.failed,
                                                         "read")):
            yield sb.batch, sb.split, sb.consumed, sb.last, READER_ID

    def _send_ack(self, split_id: str, consumed: int | None, wait: bool) -> None:
        self.coordinator.ack(split_id, consumed)

    def _schema_change(self, schema_id: int) -> SchemaChange | None:
        return self.coordinator.schema_change(schema_id)

    def _shutdown(self) -> None:
        self._engine_stop.set()
        self.coordinator.stop()

    # -- state -----------------------------------------------------------------------

    def committed(self) -> Position:
        """The committed (acknowledged, exclusive) position."""
        return self.coordinator.committed()

    def _watermark(self) -> int | None:
        return self.coordinator.watermark()

    @property
    def lag(self) -> Lag:
        """How far the committed position is behind the branch head (snapshots, records,
        seconds), measured now."""
        return self.coordinator.lag()

    def metrics(self) -> StreamMetrics:
        """The stream's metrics now (:class:`StreamMetrics`; measures the lag): rows and
        batches delivered to this stream's consumer, the reader threads' busy time."""
        return self.coordinator.metrics(
            (self.stats.rows, self.stats.batches, self._busy.seconds))

    @property
    def store(self) -> CheckpointStore | None:
        """The checkpoint store (None: in memory); set to None to stop writing."""
        return self.coordinator.store

    @store.setter
    def store(self, value: CheckpointStore | None) -> None:
        self.coordinator.store = value

    def write_checkpoint(self) -> None:
        """Write the acknowledged state now (no-op without a store or new acks)."""
        self.coordinator.write_checkpoint()
