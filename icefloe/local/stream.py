"""The local continuous stream: an enumerator thread, N reader threads, acks, checkpoints.

Runs in the user's process. The enumerator thread polls the branch, hands splits
out in commit order and registers them with the ack tracker; reader threads
(:func:`icefloe.local.engine.read_splits`, order-preserving) turn them into
batches; the user's loop receives :class:`StreamItem` values and acks them. The
committed position advances only over acknowledged data, as a contiguous prefix,
and is written to the checkpoint store at most every ``checkpoint_interval_s``
seconds (0: on every ack) and on :meth:`LocalStream.close`.

Bounded memory: at most ``2 * parallelism`` splits wait for a reader and each reader
holds a few batches; a slow sink slows reading down (backpressure).

Delivery: each batch exactly once to the sink's eyes when nothing fails; after a
crash, a restart re-delivers only what was not acknowledged (at least once).
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from icefloe.crashpoints import crash_point
from icefloe.enumerator.continuous import ContinuousEnumerator, Limits, UnitEnd
from icefloe.errors import StreamClosedError
from icefloe.local.engine import SplitBatch, read_splits
from icefloe.reader.context import ReadContext
from icefloe.retry import RetryPolicy, call_with_retry
from icefloe.splits.split import FileSplit
from icefloe.state import AckTracker, CheckpointStore
from icefloe.state.position import Phase, Position
from icefloe.state.session import CheckpointSession

if TYPE_CHECKING:
    from icefloe.source import IcebergSource

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class StreamItem:
    """One batch of the stream. Call :meth:`ack` once the sink has it durably.

    Attributes:
        batch: the rows (at most ``batchSize``).
        split: the split the rows come from.
        consumed: source records of the split done after this batch (resume offset).
        last: True on the split's final batch.
    """

    batch: pa.RecordBatch
    split: FileSplit
    consumed: int
    last: bool
    _stream: LocalStream = field(repr=False)

    @property
    def split_id(self) -> str:
        return self.split.split_id

    @property
    def snapshot_id(self) -> int:
        return self.split.snapshot_id

    @property
    def sequence_number(self) -> int:
        return self.split.sequence_number

    _acked: bool = field(default=False, init=False, repr=False, compare=False)

    def ack(self) -> None:
        """Acknowledge this batch (and, cumulatively, the split's batches before it).

        Acknowledging the same item again is a no-op.

        Raises:
            StreamClosedError: the stream is closed (its final checkpoint is written; this
                batch will be delivered again by the next stream).
        """
        if self._acked:
            return
        self._stream._ack(self.split.split_id, None if self.last else self.consumed)
        object.__setattr__(self, "_acked", True)


@dataclass
class Lag:
    """How far the committed position is behind the branch head."""

    snapshots_behind: int = 0
    seconds_behind: float = 0.0
    head_snapshot_id: int | None = None


@dataclass
class Stats:
    rows: int = 0
    batches: int = 0
    splits: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def rows_per_second(self) -> float:
        return self.rows / max(time.monotonic() - self.started, 1e-9)


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_END = object()


class LocalStream:
    """A continuous read of one source on local threads (see the module docstring).

    Args:
        source: the IcebergSource (its options are checked for continuous mode).
        checkpoint: checkpoint directory or fsspec URI; None keeps progress in memory.
        parallelism: reader threads.
        available_now: process what exists at start (the head then), then end.
        checkpoint_interval_s: minimum seconds between checkpoint writes (0 = every ack).
    """

    def __init__(self, source: IcebergSource, checkpoint: str | None = None,
                 parallelism: int = 2, available_now: bool = False,
                 checkpoint_interval_s: float = 1.0) -> None:
        self.source = source
        self.options = source.options.for_mode("continuous")
        self.checkpoint_location = checkpoint
        self.parallelism = parallelism
        self.available_now = available_now
        self.checkpoint_interval_s = checkpoint_interval_s
        self.stats = Stats()
        self.retry = RetryPolicy.from_options(self.options)
        self.lag = Lag()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._work: queue.Queue[object] = queue.Queue(maxsize=2 * parallelism)
        self._started = False
        self._closed = False
        self._engine: Iterator[SplitBatch] | None = None
        self._thread: threading.Thread | None = None
        self._seen_at: dict[int, str] = {}  # snapshot id -> Nessie commit hash seen at

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> LocalStream:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Restore from the checkpoint (or resolve the start), start the threads."""
        if self._started:
            return
        self._started = True
        handle = self.source.handle
        opts = self.options
        self.enumerator = ContinuousEnumerator(handle, opts)
        self._session = CheckpointSession(handle, opts, self.checkpoint_location)
        self._session.last_write = time.monotonic()
        crash_point("during_restore")
        start = self._session.restore(self.enumerator)
        position = start.position
        self.tracker = start.tracker()
        self.write_checkpoint()  # a new start is durable at once (restore marked it dirty)
        schema = handle.metadata.schema()
        self.context = ReadContext.create(handle.metadata, handle.io, schema, opts)
        self._pinned_head: int | None = None
        if self.available_now:
            head = self.enumerator.head()
            self._pinned_head = head.snapshot_id if head else None
        self._thread = threading.Thread(target=self._enumerate_loop, args=(position,),
                                        name="icefloe-enumerator", daemon=True)
        self._thread.start()
        self._engine = read_splits(self._split_source(), self.context, self.parallelism,
                                   preserve_order=True, retry=self.retry)

    def close(self) -> None:
        """Stop the threads and write a final checkpoint of everything acknowledged."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._engine is not None:
            self._engine.close()  # type: ignore[attr-defined]
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._started:
            self.write_checkpoint()

    # -- enumeration thread --------------------------------------------------------

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._work.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _wait(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def _enumerate_loop(self, position: Position) -> None:
        opts = self.options
        limits = Limits.from_options(opts)
        try:
            if opts.initial_delay_ms:
                self._wait(opts.initial_delay_ms / 1000)
            first = True
            while not self._stop.is_set():
                if not first:
                    self.enumerator.refresh()  # retries transient faults itself
                first = False
                result = call_with_retry(
                    functools.partial(self.enumerator.enumerate, position, limits,
                                      self._pinned_head),
                    self.retry, f"enumeration of {self.source.handle.identifier}",
                    sleep=self._wait)
                if result.reset:
                    self._reset(result.from_position)
                commit_hash = self.enumerator.handle.commit_hash
                for item in result.items:
                    if commit_hash is not None:
                        self._seen_at.setdefault(item.snapshot_id, commit_hash)
                    if isinstance(item, UnitEnd):
                        self.tracker.unit_done(item.phase, item.snapshot_id,
                                               item.sequence_number)
                        continue
                    handed = self.tracker.register(item, *self._unit_hint(item, position))
                    if handed is None:  # acknowledged before the restart
                        continue
                    if not self._put(handed):
                        return
                position = result.to_position
                self._update_lag(position)
                if self.available_now and (self._pinned_head is None or (
                        position.is_unit_complete
                        and position.snapshot_id == self._pinned_head)):
                    self._put(_END)
                    return
                if not result.items:
                    self._wait(opts.poll_interval_ms / 1000)
        except BaseException as exc:  # delivered to the consumer in order
            self._put(_Failure(exc))

    def _unit_hint(self, split: FileSplit, position: Position) -> tuple[Phase, int]:
        """The phase and snapshot sequence number of the unit ``split`` belongs to."""
        phase: Phase = "scan" if (position.phase == "scan"
                                  and split.snapshot_id == position.snapshot_id) else "incremental"
        return phase, self.enumerator.handle.snapshot(split.snapshot_id).sequence_number or 0

    def _reset(self, position: Position) -> None:
        """A lineage strategy moved the position: wait for in-flight acks, restart tracking.

        The new start is checkpointed at once (as a first start is): a restart before the
        next ack must not resolve the strategy again, e.g. ``restartFromHead`` would skip
        whatever was committed in between.
        """
        while self.tracker.in_flight() and not self._stop.is_set():
            self._wait(0.05)
        with self._lock:
            self.tracker = AckTracker(position, (), ())
            self._session.mark_dirty()
        self.write_checkpoint()

    def _update_lag(self, position: Position) -> None:
        head = self.enumerator.head()
        if head is None:
            self.lag = Lag()
            return
        try:
            behind = self.enumerator._chain(position, head) if position.snapshot_id else []
        except Exception:
            behind = []
        oldest = behind[0].timestamp_ms if behind else None
        self.lag = Lag(
            snapshots_behind=len(behind),
            seconds_behind=max(0.0, time.time() - oldest / 1000) if oldest else 0.0,
            head_snapshot_id=head.snapshot_id,
        )

    def _split_source(self) -> Iterator[FileSplit]:
        while True:
            try:
                item = self._work.get(timeout=0.1)
            except queue.Empty:
                if self._stop.is_set():
                    return
                continue
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.exc
            assert isinstance(item, FileSplit)
            yield item

    # -- consumer side ---------------------------------------------------------------

    def __iter__(self) -> Iterator[StreamItem]:
        if not self._started:
            self.start()
        if self._closed or self._engine is None:
            raise StreamClosedError("the stream is closed; open a new one with source.stream()")
        for sb in self._engine:
            if sb.last and not sb.batch.num_rows:
                self._ack(sb.split.split_id, None)  # nothing to deliver: done
                self.stats.splits += 1
                continue
            self.stats.rows += sb.batch.num_rows
            self.stats.batches += 1
            self.stats.splits += 1 if sb.last else 0
            crash_point("after_emit")
            yield StreamItem(sb.batch, sb.split, sb.consumed, sb.last, self)

    def _ack(self, split_id: str, consumed: int | None) -> None:
        if self._closed:
            raise StreamClosedError(
                f"ack of split {split_id!r} after the stream was closed: the final checkpoint "
                "is written without it, and the next stream delivers it again")
        with self._lock:
            self.tracker.ack(split_id, consumed)
            self._session.mark_dirty()
        crash_point("after_ack")
        if self._session.due(self.checkpoint_interval_s):
            self.write_checkpoint()

    def committed(self) -> Position:
        """The committed (acknowledged, exclusive) position."""
        return self.tracker.committed()

    @property
    def store(self) -> CheckpointStore | None:
        """The checkpoint store (None: in memory); set to None to stop writing."""
        return self._session.store

    @store.setter
    def store(self, value: CheckpointStore | None) -> None:
        self._session.store = value

    def write_checkpoint(self) -> None:
        """Write the acknowledged state now (no-op without a store or new acks)."""
        with self._lock:
            self._session.write(self.tracker, self.enumerator.identity, self._hashes_from,
                                functools.partial(crash_point, "during_checkpoint_write"))

    def _hashes_from(self, position: Position) -> tuple[tuple[int, str], ...]:
        """Nessie hashes of the committed snapshot and later ones (older ones dropped)."""
        seq = position.sequence_number
        handle = self.enumerator.handle
        keep = []
        for snapshot_id, commit_hash in sorted(dict(self._seen_at).items()):
            snap = handle.metadata.snapshot_by_id(snapshot_id)
            if snap is None or (snap.sequence_number or 0) >= seq:
                keep.append((snapshot_id, commit_hash))
        return tuple(keep)

    def describe(self) -> dict[str, Any]:
        """Lag and throughput, for displays."""
        return {
            "committed": self.committed().describe(),
            "snapshots_behind": self.lag.snapshots_behind,
            "seconds_behind": round(self.lag.seconds_behind, 1),
            "rows": self.stats.rows,
            "rows_per_s": round(self.stats.rows_per_second),
        }
