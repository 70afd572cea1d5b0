"""Worker: one reader thread of the local engine, and the read of one run of splits.

:func:`read_run` is the one call from the engine into :mod:`icefloe.reader` for a
claimed run: it yields every split's items (``SplitBatch``, the last of each split
flagged and possibly empty) and is also what a Ray reader actor reads a split with.
:class:`Worker` claims runs, reads them with :func:`read_run` and puts their items on
the run's queue in chunks of about ``batch_size`` rows (one queue hand-off per chunk,
not per split: with thousands of small files the per-split hand-off cost as much as
reading them).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

import pyarrow as pa

from icefloe.errors import DataFileError
from icefloe.local.assigner import RunAssigner
from icefloe.local.merger import Merger
from icefloe.local.queues import DONE, Failure, ItemQueue, put
from icefloe.reader.context import ReadContext
from icefloe.reader.split_reader import MIN_RUN, SplitReader, run_decode_threads
from icefloe.retry import RetryListener, RetryPolicy, is_transient
from icefloe.splits.split import FileSplit

log = logging.getLogger(__name__)

FLUSH = object()
"""Yielded by :func:`read_run` before a retry's backoff: deliver what was read so far."""


class BusyTime:
    """Seconds readers spent inside :func:`read_run` (reading and decoding), summed over
    the threads that add to it (thread-safe; one add per item read)."""

    __slots__ = ("_lock", "seconds")

    def __init__(self) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds


def _timed(items: Generator[SplitBatch | object, None, None],
           busy: BusyTime) -> Generator[SplitBatch | object, None, None]:
    """``items``, adding the time spent producing each to ``busy`` (not the time the
    consumer holds it)."""
    clock = time.perf_counter
    try:
        while True:
            started = clock()
            try:
                item = next(items)
            except StopIteration:
                return
            finally:
                busy.add(clock() - started)
            yield item
    finally:
        items.close()


@dataclass(frozen=True, slots=True)
class SplitBatch:
    """One batch of one split, with the split's progress after it.

    ``consumed`` is the source-record offset to resume the split after this batch;
    ``last`` is True on the split's final item (its batch may be empty).
    """

    split: FileSplit
    batch: pa.RecordBatch
    consumed: int
    last: bool


class _Progress:
    """What one split delivered so far.

    ``held`` is the last non-empty batch, kept back so the split's final item carries
    data; ``final`` the source-record offset after everything read (delivered, held or
    filtered out), from which a failed read resumes.
    """

    __slots__ = ("final", "held", "held_consumed", "split")

    def __init__(self, split: FileSplit) -> None:
        self.split = split
        self.held: pa.RecordBatch | None = None
        self.held_consumed = split.resume_rows
        self.final = split.resume_rows

    def take(self, batch: pa.RecordBatch, consumed: int) -> SplitBatch | None:
        """Hold ``(batch, consumed)``; returns the item held before it, if any."""
        self.final = consumed
        if not batch.num_rows:
            return None
        held, held_consumed = self.held, self.held_consumed
        self.held, self.held_consumed = batch, consumed
        return None if held is None else SplitBatch(self.split, held, held_consumed, False)

    def finish(self, empty: pa.RecordBatch) -> SplitBatch:
        """The split's final item (its held batch, or ``empty``)."""
        last = self.held if self.held is not None else empty
        self.held = None
        return SplitBatch(self.split, last, self.final, True)


def read_run(reader: SplitReader, run: list[FileSplit], retry: RetryPolicy,
             stop: threading.Event, busy: BusyTime | None = None,
             failures: RetryListener | None = None
             ) -> Generator[SplitBatch | object, None, None]:
    """Every item of ``run``'s splits in order, and :data:`FLUSH` before a retry's wait.

    Consecutive splits that :meth:`SplitReader.can_batch` are read together through
    :meth:`SplitReader.read_run` when the reader reads runs; a scan that fails goes on
    split by split from the split it stopped in. A transient error
    (:func:`icefloe.retry.is_transient`) re-reads the split from the last consumed
    record after ``retry``'s backoff (no row twice, none skipped); ``retry.max_attempts``
    consecutive failures without progress raise the last error. Ends early (without
    raising) when ``stop`` is set during a backoff. Splits of a stream's other schemas
    (``split.schema_id``) are read by :meth:`SplitReader.for_schema`, a run of consecutive
    splits of one schema at a time. With ``busy``, the time spent producing items is
    added to it (a stream's ``reader_busy_seconds``). ``failures`` hears of every failed
    attempt to read a split (``(error, retrying)``: a stream's ``retries`` / ``errors`` of
    operation ``read``), not of an error after ``stop``.
    """
    if busy is not None:
        yield from _timed(read_run(reader, run, retry, stop, None, failures), busy)
        return
    if any(split.schema_id is not None for split in run):
        for schema_id, group in itertools.groupby(run, key=lambda s: s.schema_id):
            if not (yield from _read_run(reader.for_schema(schema_id), list(group), retry,
                                         stop, failures)):
                return
        return
    yield from _read_run(reader, run, retry, stop, failures)


def _read_run(reader: SplitReader, run: list[FileSplit], retry: RetryPolicy,
              stop: threading.Event, failures: RetryListener | None = None
              ) -> Generator[SplitBatch | object, None, bool]:
    """:func:`read_run` of splits of one schema; False when it ended early."""
    empty = pa.RecordBatch.from_pylist([], schema=reader.context.arrow_schema)
    progress = [_Progress(split) for split in run]
    batchable = [reader.batch_runs and reader.can_batch(split) for split in run]
    threads = run_decode_threads(len(run))  # a claim's runs are capped in records: small
    i = 0
    scanning = True
    while i < len(run):
        j = i
        while j < len(run) and batchable[j]:
            j += 1
        if scanning and j - i >= MIN_RUN:
            stopped = yield from _scan(reader, progress, i, j, empty, stop)
            if stopped is None:
                return False
            if stopped == j:
                i = j
                continue
            # read the split the scan stopped in on its own; scan the rest only if this
            # scan got past its first split
            scanning = stopped > i or progress[stopped].final > 0
            i = stopped
        if not (yield from _read_one(reader, progress[i], retry, stop, failures, threads)):
            return False
        yield progress[i].finish(empty)
        i += 1
    return True


def _scan(reader: SplitReader, progress: list[_Progress], i: int, j: int,
          empty: pa.RecordBatch, stop: threading.Event
          ) -> Generator[SplitBatch | object, None, int | None]:
    """Read splits ``i..j`` (all batchable) through :meth:`SplitReader.read_run`; returns
    ``j`` when all are done, else the split a scan error stopped in (None if stopped)."""
    cur = i
    try:
        for k, batch, consumed in reader.read_run([p.split for p in progress[i:j]]):
            while cur < i + k:  # the splits before it are complete
                yield progress[cur].finish(empty)
                cur += 1
            out = progress[cur].take(batch, consumed)
            if out is not None:
                yield out
    except Exception as exc:
        if stop.is_set():
            return None
        level = logging.DEBUG if isinstance(
            exc, OSError | pa.ArrowException | DataFileError) else logging.WARNING
        log.log(level, "scan of %d splits stopped in split %s (record %d); reading on "
                "split by split: %s: %s", j - i, progress[cur].split.split_id,
                progress[cur].final, type(exc).__name__, exc)
        return cur
    while cur < j:
        yield progress[cur].finish(empty)
        cur += 1
    return j


def _read_one(reader: SplitReader, progress: _Progress, retry: RetryPolicy,
              stop: threading.Event, failures: RetryListener | None = None,
              use_threads: bool | None = None
              ) -> Generator[SplitBatch | object, None, bool]:
    """Read one split from ``progress.final`` on, retrying transient errors; returns
    False if stopped during a backoff. Raises the error that ends it. ``use_threads``
    as :meth:`SplitReader.read_progress`'s."""
    split = progress.split
    attempt = 1
    while True:
        # a transient failure re-reads the split from the last consumed offset: records
        # before ``final`` were delivered, held or filtered out
        final = progress.final
        resumed = split if final == split.resume_rows else split.with_position(final)
        try:
            for batch, consumed in reader.read_progress(resumed, use_threads):
                if consumed > progress.final:
                    attempt = 1  # progress: count consecutive failures only
                out = progress.take(batch, consumed)
                if out is not None:
                    yield out
            return True
        except Exception as exc:
            if stop.is_set():
                raise
            retrying = is_transient(exc) and attempt < retry.max_attempts
            if failures is not None:
                failures(exc, retrying)
            if not retrying:
                raise
            log.warning("reading split %s failed (attempt %d of %d); re-reading from "
                        "record %d: %s: %s", split.split_id, attempt, retry.max_attempts,
                        progress.final, type(exc).__name__, exc,
                        extra={"split": split.split_id, "snapshot": split.snapshot_id,
                               "error_type": type(exc).__name__})
            yield FLUSH
            if stop.wait(retry.delay_s(attempt)):
                return False
            attempt += 1


class Worker:
    """One reader thread: claims runs and delivers their items in chunks.

    Args:
        context: the read context (``batch_size`` is the chunk size in rows).
        assigner: where runs are claimed.
        merger: where a reader that cannot start reports its error.
        reader_factory: builds the thread's :class:`SplitReader`.
        retry: the transient-error policy.
        stop: the engine's stop event.
        busy: where the time spent reading is added (None: not measured).
        failures: told of every failed attempt to read a split (see :func:`read_run`).
    """

    def __init__(self, context: ReadContext, assigner: RunAssigner, merger: Merger,
                 reader_factory: Callable[[ReadContext], SplitReader], retry: RetryPolicy,
                 stop: threading.Event, busy: BusyTime | None = None,
                 failures: RetryListener | None = None) -> None:
        self.context = context
        self.assigner = assigner
        self.merger = merger
        self.reader_factory = reader_factory
        self.retry = retry
        self.stop = stop
        self.busy = busy
        self.failures = failures

    def run(self) -> None:
        """The thread's body: claim and deliver runs until none is left or stopped."""
        try:
            reader = self.reader_factory(self.context)
        except BaseException as exc:  # delivered to the consumer, never swallowed
            self.merger.fail(Failure(exc), worker_done=True)
            return
        reader.prefetch.ahead = self.assigner.ahead  # files fetched before their claim
        while not self.stop.is_set():
            claimed = self.assigner.claim()
            if claimed is None:
                break
            if not self._deliver(reader, *claimed):
                return
        self.merger.worker_done()

    def _deliver(self, reader: SplitReader, run: list[FileSplit],
                 out: ItemQueue) -> bool:
        """Read a claimed run onto ``out``; False when the thread must end."""
        chunk: list[SplitBatch] = []
        rows = 0
        items = read_run(reader, run, self.retry, self.stop, self.busy, self.failures)
        try:
            for item in items:
                if item is FLUSH:
                    if chunk and not put(out, chunk, self.stop):
                        return False
                    chunk, rows = [], 0
                    continue
                assert isinstance(item, SplitBatch)
                chunk.append(item)
                rows += item.batch.num_rows
                if rows >= self.context.batch_size:
                    if not put(out, chunk, self.stop):
                        return False
                    chunk, rows = [], 0
            if self.stop.is_set():
                return False
            if chunk and not put(out, chunk, self.stop):
                return False
            return not self.merger.preserve_order or put(out, DONE, self.stop)
        except BaseException as exc:  # delivered to the consumer, after what was read
            if not chunk or put(out, chunk, self.stop):
                put(out, Failure(exc), self.stop)
            return False
        finally:
            items.close()
