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


def read_splits(
    splits: Iterable[FileSplit],
    context: ReadContext,
    parallelism: int = 2,
    preserve_order: bool = True,
    queue_batches: int = 4,
    reader_factory: Callable[[ReadContext], SplitReader] = SplitReader,
    retry: RetryPolicy = NO_RETRY,
) -> Iterator[SplitBatch]:
    """Read ``splits`` on ``parallelism`` threads; yield every batch as a :class:`SplitBatch`.

    Every split yields at least one item (the last, possibly empty), so a consumer can
    track split completion. Closing the iterator stops the readers. A reader error is
    raised from the iterator (in split order when ``preserve_order``).

    A transient read error (:func:`icefloe.retry.is_transient`) re-reads the split from
    the last consumed record offset, after ``retry``'s backoff, so no row is delivered
    twice or skipped; ``retry.max_attempts`` consecutive failures without progress
    raise the last error. The default never retries.
    """
    policy = retry
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")
    source = iter(splits)
    lock = threading.Lock()
    stop = threading.Event()
    ordered: queue.Queue[queue.Queue[object] | object] = queue.Queue()
    shared: queue.Queue[object] = queue.Queue(maxsize=queue_batches * parallelism)
    exhausted = [False]

    def put(q: queue.Queue[object], item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def claim() -> tuple[FileSplit, queue.Queue[object]] | None:
        with lock:
            if exhausted[0] or stop.is_set():
                return None
            try:
                split = next(source)
            except StopIteration:
                exhausted[0] = True
                return None
            except BaseException as exc:
                exhausted[0] = True
                q: queue.Queue[object] = queue.Queue(maxsize=1)
                q.put(_Failure(exc))
                ordered.put(q) if preserve_order else shared.put(_Failure(exc))
                return None
            out: queue.Queue[object] = queue.Queue(maxsize=queue_batches) \
                if preserve_order else shared
            if preserve_order:
                ordered.put(out)
            return split, out

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
            split, out = claimed
            try:
                held: pa.RecordBatch | None = None
                held_consumed = split.resume_rows
                final = split.resume_rows
                attempt = 1
                while True:
                    # a transient failure re-reads the split from the last consumed offset:
                    # records before ``final`` were delivered, held or filtered out
                    resumed = split if final == split.resume_rows else split.with_position(final)
                    try:
                        for batch, consumed in reader.read_progress(resumed):
                            if consumed > final:
                                attempt = 1  # progress: count consecutive failures only
                            final = consumed
                            if not batch.num_rows:
                                continue
                            if held is not None and not put(
                                    out, SplitBatch(split, held, held_consumed, False)):
                                return
                            held, held_consumed = batch, consumed
                        break
                    except Exception as exc:
                        if stop.is_set() or not is_transient(exc) \
                                or attempt >= policy.max_attempts:
                            raise
                        log.warning("reading split %s failed (attempt %d of %d); re-reading "
                                    "from record %d: %s: %s", split.split_id, attempt,
                                    policy.max_attempts, final, type(exc).__name__, exc)
                        if stop.wait(policy.delay_s(attempt)):
                            return
                        attempt += 1
                last = held if held is not None else pa.RecordBatch.from_pylist(
                    [], schema=context.arrow_schema)
                if not put(out, SplitBatch(split, last, final, True)):
                    return
                if preserve_order and not put(out, _DONE):
                    return
            except BaseException as exc:  # delivered to the consumer
                put(out, _Failure(exc))
                if preserve_order:
                    put(out, _DONE)
                return
        if not preserve_order:
            put(shared, _DONE)

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
                    yield item  # type: ignore[misc]
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
