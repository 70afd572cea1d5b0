"""The embedded engine: N reader threads turning splits into batches.

Threads, not processes: Parquet decoding and Arrow kernels release the GIL, and
batches then need no copy between workers and the consumer (see
benchmarks/RESULTS.md for the measurement that chose threads).

Work is claimed in *runs*: a reader thread takes the next split and, behind it, the
splits already planned, up to ``run_splits`` splits and ``queue_batches * batch_size``
records (so a run of small files buffers no more than one big split does). A run's
items reach the consumer through one queue, in chunks of about ``batch_size`` rows,
instead of one queue and a hand-off per split: with thousands of small files the
per-split hand-off (thread wake-ups, GIL switches) cost as much as reading them.

Memory is bounded: at most ``parallelism`` runs are read at a time, and each has a
queue of at most ``queue_batches`` chunks; a slow consumer blocks the readers
(backpressure). With ``preserve_order`` batches come out in split order (split i's
batches all before split i+1's); otherwise as they are ready (a run's in split order).
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
from icefloe.reader.split_reader import MIN_RUN, SplitReader
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


DEFAULT_RUN_SPLITS = 256
"""Most splits one reader thread claims as a run."""


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


class _RunOutput:
    """The items of one run on their way to the consumer, in chunks (reader thread only).

    Items are collected into a list that is put on ``out`` once it holds ``chunk_rows``
    rows, and when the run ends or fails; ``put`` blocks while ``out`` is full and
    returns False once the engine stops.
    """

    def __init__(self, out: queue.Queue[object],
                 put: Callable[[queue.Queue[object], object], bool],
                 chunk_rows: int, empty: pa.RecordBatch) -> None:
        self.out = out
        self.put = put
        self.chunk_rows = chunk_rows
        self.empty = empty
        self.pending: list[SplitBatch] = []
        self.rows = 0

    def batch(self, split: FileSplit, progress: _Progress, batch: pa.RecordBatch,
              consumed: int) -> bool:
        """Take ``(batch, consumed)`` of ``split``: hold it and pass on the one held before."""
        progress.final = consumed
        if not batch.num_rows:
            return True
        held, held_consumed = progress.held, progress.held_consumed
        progress.held, progress.held_consumed = batch, consumed
        return held is None or self._add(SplitBatch(split, held, held_consumed, False))

    def finish(self, split: FileSplit, progress: _Progress) -> bool:
        """Pass on the split's final item (its held batch, or an empty one)."""
        last = progress.held if progress.held is not None else self.empty
        progress.held = None
        return self._add(SplitBatch(split, last, progress.final, True))

    def _add(self, item: SplitBatch) -> bool:
        self.pending.append(item)
        self.rows += item.batch.num_rows
        return self.rows < self.chunk_rows or self.flush()

    def flush(self) -> bool:
        """Put the collected items on the queue (False if the engine stopped)."""
        if not self.pending:
            return True
        chunk, self.pending, self.rows = self.pending, [], 0
        return self.put(self.out, chunk)


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
    raised from the iterator (in split order when ``preserve_order``), after the items
    read before it.

    ``splits`` is iterated on a feeder thread (it may block, as a stream's source does).
    A reader thread claims the next split and the splits already fed behind it as a run
    (see the module docstring; ``run_splits=1`` claims split by split, never waiting for
    more). Inside a run, consecutive splits that :meth:`SplitReader.can_batch` are read
    together through :meth:`SplitReader.read_run` when the reader reads runs
    (:attr:`SplitReader.batch_runs`), the others with :meth:`SplitReader.read_progress`.

    A transient read error (:func:`icefloe.retry.is_transient`) re-reads the split from
    the last consumed record offset, after ``retry``'s backoff, so no row is delivered
    twice or skipped; ``retry.max_attempts`` consecutive failures without progress
    raise the last error. The default never retries. A scanned run that fails goes on
    split by split from the failed split's offset (the same retries and typed errors).
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
    empty = pa.RecordBatch.from_pylist([], schema=context.arrow_schema)
    exhausted = [False]
    pushed_back: list[object] = []  # fed, not claimed: it did not fit the previous run

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
        """The next fed item (a split, _Failure or _DONE); None if none is ready / stopped."""
        if pushed_back:
            return pushed_back.pop()
        while not stop.is_set():
            try:
                return feed.get(timeout=0.1) if block else feed.get_nowait()
            except queue.Empty:
                if not block:
                    return None
        return None

    def claim() -> tuple[list[FileSplit], queue.Queue[object]] | None:
        """The next split and the splits fed right behind it, with their queue (locked)."""
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
            run = [item]
            # share what is fed between the readers; never wait for more
            limit = min(run_splits, max(MIN_RUN, (feed.qsize() + 1) // parallelism))
            records = item.record_count
            while len(run) < limit and records < run_records:
                nxt = take(block=False)
                if nxt is None:
                    break
                if not isinstance(nxt, FileSplit) or records + nxt.record_count > run_records:
                    pushed_back.append(nxt)  # a _DONE / _Failure too: the next claim sees it
                    break
                records += nxt.record_count
                run.append(nxt)
            out: queue.Queue[object] = queue.Queue(maxsize=queue_batches) \
                if preserve_order else shared
            if preserve_order:
                ordered.put(out)
            return run, out

    def read_one(reader: SplitReader, split: FileSplit, progress: _Progress,
                 output: _RunOutput) -> bool:
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
                    if not output.batch(split, progress, batch, consumed):
                        return False
                return True
            except Exception as exc:
                if stop.is_set() or not is_transient(exc) or attempt >= policy.max_attempts:
                    raise
                log.warning("reading split %s failed (attempt %d of %d); re-reading "
                            "from record %d: %s: %s", split.split_id, attempt,
                            policy.max_attempts, progress.final, type(exc).__name__, exc)
                if not output.flush() or stop.wait(policy.delay_s(attempt)):
                    return False
                attempt += 1

    def scan(reader: SplitReader, run: list[FileSplit], progress: list[_Progress],
             i: int, j: int, output: _RunOutput) -> tuple[bool, int]:
        """Read ``run[i:j]`` (all batchable) through :meth:`SplitReader.read_run`.

        Returns (go on, first split not finished): ``j`` when all are, else the split a
        scan error stopped in (to read on split by split); go on is False if stopped.
        """
        cur = i
        try:
            for k, batch, consumed in reader.read_run(run[i:j]):
                while cur < i + k:  # the splits before it are complete
                    if not output.finish(run[cur], progress[cur]):
                        return False, cur
                    cur += 1
                if not output.batch(run[cur], progress[cur], batch, consumed):
                    return False, cur
        except Exception as exc:
            if stop.is_set():
                return False, cur
            level = logging.DEBUG if isinstance(
                exc, OSError | pa.ArrowException | DataFileError) else logging.WARNING
            log.log(level, "scan of %d splits stopped in split %s (record %d); reading on "
                    "split by split: %s: %s", j - i, run[cur].split_id,
                    progress[cur].final, type(exc).__name__, exc)
            return True, cur
        while cur < j:
            if not output.finish(run[cur], progress[cur]):
                return False, cur
            cur += 1
        return True, j

    def read_run(reader: SplitReader, run: list[FileSplit], out: queue.Queue[object]) -> bool:
        """Read and deliver a claimed run; False when the reader thread must end."""
        output = _RunOutput(out, put, context.batch_size, empty)
        progress = [_Progress(split.resume_rows) for split in run]
        batchable = [reader.batch_runs and reader.can_batch(split) for split in run]
        i = 0
        scanning = True
        try:
            while i < len(run):
                j = i
                while j < len(run) and batchable[j]:
                    j += 1
                if scanning and j - i >= MIN_RUN:
                    go_on, stopped = scan(reader, run, progress, i, j, output)
                    if not go_on:
                        return False
                    if stopped == j:
                        i = j
                        continue
                    # read the split the scan stopped in on its own; scan the rest only if
                    # this scan got past its first split
                    scanning = stopped > i or progress[stopped].final > 0
                    i = stopped
                if not read_one(reader, run[i], progress[i], output) \
                        or not output.finish(run[i], progress[i]):
                    return False
                i += 1
            if not output.flush():
                return False
            return not preserve_order or put(out, _DONE)
        except BaseException as exc:  # delivered to the consumer, after what was read
            if output.flush():
                put(out, _Failure(exc))
            return False

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
            claimed = claim()
            if claimed is None:
                break
            if not read_run(reader, *claimed):
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
                run_queue = ordered.get()
                if run_queue is _DONE:
                    break
                assert isinstance(run_queue, queue.Queue)
                while True:
                    chunk = run_queue.get()
                    if chunk is _DONE:
                        break
                    if isinstance(chunk, _Failure):
                        raise chunk.exc
                    yield from chunk
        else:
            finished = 0
            while finished < parallelism:
                chunk = shared.get()
                if chunk is _DONE:
                    finished += 1
                    continue
                if isinstance(chunk, _Failure):
                    raise chunk.exc
                yield from chunk  # type: ignore[misc]
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
