"""The embedded engine: N reader threads turning splits into batches.

Threads, not processes: Parquet decoding and Arrow kernels release the GIL, and
batches then need no copy between workers and the consumer (see
benchmarks/RESULTS.md for the measurement that chose threads).

Memory is bounded: at most ``parallelism`` splits are in flight, and each has a
queue of at most ``queue_batches`` decoded batches; a slow consumer blocks the
readers (backpressure). With ``preserve_order`` batches come out in split order
(split i's batches all before split i+1's); otherwise as they are ready.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from icefloe.errors import DataFileError
from icefloe.reader.context import ReadContext
from icefloe.reader.split_reader import SplitReader
from icefloe.retry import NO_RETRY, RetryPolicy, is_transient
from icefloe.splits.split import FileSplit

log = logging.getLogger(__name__)

_DONE = object()


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


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


DEFAULT_RUN_SPLITS = 128
"""Most splits one reader thread claims as a run (read through one dataset scan)."""

_MIN_RUN = 4  # fewer small splits than this are read split by split (a scan's setup costs)


class _Progress:
    """What one split delivered so far (owned by the reader thread reading it).

    ``held`` is the last non-empty batch, kept back so the split's final item carries
    data; ``final`` the source-record offset after everything read (delivered, held or
    filtered out), from which a failed read resumes.
    """

    __slots__ = ("final", "held", "held_consumed")

    def __init__(self, resume_rows: int) -> None:
        self.held: pa.RecordBatch | None = None
        self.held_consumed = resume_rows
        self.final = resume_rows


def read_splits(
    splits: Iterable[FileSplit],
    context: ReadContext,
    parallelism: int = 2,
    preserve_order: bool = True,
    queue_batches: int = 4,
    reader_factory: Callable[[ReadContext], SplitReader] = SplitReader,
    retry: RetryPolicy = NO_RETRY,
    run_splits: int = DEFAULT_RUN_SPLITS,
) -> Iterator[SplitBatch]:
    """Read ``splits`` on ``parallelism`` threads; yield every batch as a :class:`SplitBatch`.

    Every split yields at least one item (the last, possibly empty), so a consumer can
    track split completion. Closing the iterator stops the readers. A reader error is
    raised from the iterator (in split order when ``preserve_order``).

    ``splits`` is iterated on a feeder thread (it may block, as a stream's source does).
    A reader thread claims the next split, and with it the consecutive splits already
    fed that :meth:`SplitReader.can_batch` (small whole files without deletes) as a
    *run* of at most ``run_splits`` splits and ``queue_batches * batch_size`` records
    (what one big split may buffer); a run is read through one dataset scan
    (:meth:`SplitReader.read_run`). Each split of a run still gets its own items, in
    split order, with its own offsets. ``run_splits=1`` reads split by split.

    A transient read error (:func:`icefloe.retry.is_transient`) re-reads the split from
    the last consumed record offset, after ``retry``'s backoff, so no row is delivered
    twice or skipped; ``retry.max_attempts`` consecutive failures without progress
    raise the last error. The default never retries. A run that fails continues split
    by split from the failed split's offset (the same retries and typed errors apply).
    """
    policy = retry
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")
    if run_splits < 1:
        raise ValueError(f"run_splits must be >= 1, got {run_splits}")
    lock = threading.Lock()
    stop = threading.Event()
    ordered: queue.Queue[queue.Queue[object] | object] = queue.Queue()
    shared: queue.Queue[object] = queue.Queue(maxsize=queue_batches * parallelism)
    feed: queue.Queue[object] = queue.Queue(maxsize=max(64, 2 * run_splits * parallelism))
    run_records = queue_batches * context.batch_size
    exhausted = [False]
    pushed_back: list[object] = []  # fed but not claimed (ended the previous run)

    def put(q: queue.Queue[object], item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def feeder() -> None:
        try:
            for split in splits:
                if not put(feed, split):
                    return
        except BaseException as exc:  # delivered to the consumer by the claiming reader
            put(feed, _Failure(exc))
            return
        put(feed, _DONE)

    def take(block: bool) -> object:
        """The next fed item (a split, a _Failure or _DONE); None when none is ready/stopped."""
        if pushed_back:
            return pushed_back.pop()
        while not stop.is_set():
            try:
                return feed.get(timeout=0.1) if block else feed.get_nowait()
            except queue.Empty:
                if not block:
                    return None
        return None

    def register() -> queue.Queue[object]:
        out: queue.Queue[object] = queue.Queue(maxsize=queue_batches) \
            if preserve_order else shared
        if preserve_order:
            ordered.put(out)
        return out

    def claim(reader: SplitReader) -> list[tuple[FileSplit, queue.Queue[object]]] | None:
        """The next split and the batchable splits right behind it (under the lock)."""
        with lock:
            if exhausted[0] or stop.is_set():
                return None
            item = take(block=True)
            if item is None or item is _DONE:
                exhausted[0] = True
                return None
            if isinstance(item, _Failure):
                exhausted[0] = True
                q: queue.Queue[object] = queue.Queue(maxsize=1)
                q.put(item)
                ordered.put(q) if preserve_order else shared.put(item)
                return None
            assert isinstance(item, FileSplit)
            claimed = [(item, register())]
            if run_splits == 1 or not reader.can_batch(item):
                return claimed
            # share what is fed between the readers; never wait for more
            limit = min(run_splits, max(_MIN_RUN, (feed.qsize() + 1) // parallelism))
            records = item.record_count
            while len(claimed) < limit:
                nxt = take(block=False)
                if nxt is None:
                    break
                if not isinstance(nxt, FileSplit) or not reader.can_batch(nxt) \
                        or records + nxt.record_count > run_records:
                    pushed_back.append(nxt)  # a _DONE / _Failure too: the next claim sees it
                    break
                records += nxt.record_count
                claimed.append((nxt, register()))
            return claimed

    def deliver(split: FileSplit, out: queue.Queue[object], progress: _Progress,
                batch: pa.RecordBatch, consumed: int) -> bool:
        progress.final = consumed
        if not batch.num_rows:
            return True
        if progress.held is not None and not put(
                out, SplitBatch(split, progress.held, progress.held_consumed, False)):
            return False
        progress.held, progress.held_consumed = batch, consumed
        return True

    def finish(split: FileSplit, out: queue.Queue[object], progress: _Progress) -> bool:
        last = progress.held if progress.held is not None else pa.RecordBatch.from_pylist(
            [], schema=context.arrow_schema)
        if not put(out, SplitBatch(split, last, progress.final, True)):
            return False
        return not preserve_order or put(out, _DONE)

    def read_one(reader: SplitReader, split: FileSplit, out: queue.Queue[object],
                 progress: _Progress) -> bool:
        """Read ``split`` from ``progress.final`` on, retrying transient errors; False if
        stopped. Raises the error that ends it."""
        attempt = 1
        while True:
            # a transient failure re-reads the split from the last consumed offset:
            # records before ``final`` were delivered, held or filtered out
            final = progress.final
            resumed = split if final == split.resume_rows else split.with_position(final)
            try:
                for batch, consumed in reader.read_progress(resumed):
                    if consumed > progress.final:
                        attempt = 1  # progress: count consecutive failures only
                    if not deliver(split, out, progress, batch, consumed):
                        return False
                return True
            except Exception as exc:
                if stop.is_set() or not is_transient(exc) or attempt >= policy.max_attempts:
                    raise
                log.warning("reading split %s failed (attempt %d of %d); re-reading "
                            "from record %d: %s: %s", split.split_id, attempt,
                            policy.max_attempts, progress.final, type(exc).__name__, exc)
                if stop.wait(policy.delay_s(attempt)):
                    return False
                attempt += 1

    def read_claimed(reader: SplitReader,
                     claimed: list[tuple[FileSplit, queue.Queue[object]]]) -> bool:
        """Read and deliver the claimed splits; False when the reader thread must end."""
        progress = [_Progress(split.resume_rows) for split, _ in claimed]
        run = [split for split, _ in claimed]
        i = 0
        batching = len(claimed) >= _MIN_RUN
        while i < len(claimed):
            cur = i
            try:
                if batching and len(claimed) - i >= _MIN_RUN:
                    yielded = False
                    try:
                        for k, batch, consumed in reader.read_run(run[i:]):
                            while cur < i + k:  # the splits before are complete
                                if not finish(*claimed[cur], progress[cur]):
                                    return False
                                cur += 1
                            yielded = True
                            if not deliver(*claimed[cur], progress[cur], batch, consumed):
                                return False
                        while cur < len(claimed):
                            if not finish(*claimed[cur], progress[cur]):
                                return False
                            cur += 1
                        return True
                    except Exception as exc:
                        if stop.is_set():
                            return False
                        level = logging.DEBUG if isinstance(
                            exc, OSError | pa.ArrowException | DataFileError) else logging.WARNING
                        log.log(level, "run of %d splits stopped at split %s (record %d); "
                                "reading on split by split: %s: %s", len(claimed) - i,
                                run[cur].split_id, progress[cur].final, type(exc).__name__, exc)
                        batching = yielded  # failed at once: no more runs of these splits
                        i = cur
                split, out = claimed[i]
                if not read_one(reader, split, out, progress[i]) \
                        or not finish(split, out, progress[i]):
                    return False
                i += 1
            except BaseException as exc:  # delivered to the consumer
                put(claimed[cur][1], _Failure(exc))
                if preserve_order:
                    put(claimed[cur][1], _DONE)
                return False
        return True

    def work() -> None:
        try:
            reader = reader_factory(context)
        except BaseException as exc:  # delivered to the consumer, never swallowed
            failure = _Failure(exc)
            if preserve_order:
                q: queue.Queue[object] = queue.Queue(maxsize=2)
                q.put(failure)
                q.put(_DONE)
                ordered.put(q)
            else:
                put(shared, failure)
                put(shared, _DONE)
            return
        while not stop.is_set():
            claimed = claim(reader)
            if claimed is None:
                break
            if not read_claimed(reader, claimed):
                return
        if not preserve_order:
            put(shared, _DONE)

    threading.Thread(target=feeder, name="icefloe-feeder", daemon=True).start()
    threads = [
        threading.Thread(target=work, name=f"icefloe-reader-{i}", daemon=True)
        for i in range(parallelism)
    ]
    for t in threads:
        t.start()
    if preserve_order:
        # a sentinel after the workers finish claiming
        def closer() -> None:
            for t in threads:
                t.join()
            ordered.put(_DONE)

        threading.Thread(target=closer, name="icefloe-reader-closer", daemon=True).start()
    try:
        if preserve_order:
            while True:
                split_queue = ordered.get()
                if split_queue is _DONE:
                    break
                assert isinstance(split_queue, queue.Queue)
                while True:
                    item = split_queue.get()
                    if item is _DONE:
                        break
                    if isinstance(item, _Failure):
                        raise item.exc
                    yield item
        else:
            finished = 0
            while finished < parallelism:
                item = shared.get()
                if item is _DONE:
                    finished += 1
                    continue
                if isinstance(item, _Failure):
                    raise item.exc
                yield item  # type: ignore[misc]
    finally:
        stop.set()


def read_batches(
    splits: Iterable[FileSplit], context: ReadContext, parallelism: int = 2,
    preserve_order: bool = True,
) -> Iterator[pa.RecordBatch]:
    """Non-empty batches of ``splits`` read on ``parallelism`` threads (bounded memory)."""
    for item in read_splits(splits, context, parallelism, preserve_order):
        if item.batch.num_rows:
            yield item.batch
