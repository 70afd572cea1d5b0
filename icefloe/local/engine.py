"""The embedded engine: N reader threads turning splits into batches.

Threads, not processes: Parquet decoding and Arrow kernels release the GIL, and
batches then need no copy between workers and the consumer (see
benchmarks/RESULTS.md for the measurement that chose threads).

Work is claimed in *runs*: a reader thread takes the next split and, behind it, the
splits already planned, up to ``run_splits`` splits and ``queue_batches * batch_size``
records (so a run of small files buffers no more than one big split does; on the local
disk at most :data:`LOCAL_RUN_RECORDS`). A run's
items reach the consumer through one queue, in chunks of about ``batch_size`` rows,
instead of one queue and a hand-off per split: with thousands of small files the
per-split hand-off (thread wake-ups, GIL switches) cost as much as reading them.

Memory is bounded: at most ``parallelism`` runs are read at a time; a slow consumer
blocks the readers (backpressure). With ``preserve_order`` batches come out in split
order (split i's batches all before split i+1's): the run queues hold up to a byte
budget between them (:func:`lookahead_bytes`: 64 MiB per reader thread by default, at
most 1 GiB), so the runs behind the one the consumer drains are read ahead by the other
threads and a read of as many splits as threads still reads them at once; past the
budget only the drained run's queue admits chunks, up to ``queue_batches``. Otherwise
batches come out as they are ready (a run's in split order) through one queue of
``queue_batches`` chunks per thread. On an object store, each reader's run fetches its
small files ahead (:mod:`icefloe.reader.prefetch`), and the files of the runs to be claimed
next are fetched before their claim, up to ``ioConcurrency`` files and 64 MiB
(:class:`~icefloe.reader.prefetch.FetchedAhead`).

The parts, one module each: :mod:`~icefloe.local.feeder` (iterates the split source on
a thread), :mod:`~icefloe.local.assigner` (claims runs), :mod:`~icefloe.local.worker`
(reader threads; :func:`~icefloe.local.worker.read_run` reads a run) and
:mod:`~icefloe.local.merger` (back to the consumer, in order or not).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa

from icefloe.local.assigner import RunAssigner
from icefloe.local.feeder import Feeder
from icefloe.local.merger import Merger
from icefloe.local.worker import BusyTime, SplitBatch, Worker
from icefloe.reader.context import ReadContext
from icefloe.reader.files import FileOpener
from icefloe.reader.prefetch import FetchedAhead, resolve_concurrency
from icefloe.reader.split_reader import SplitReader
from icefloe.retry import NO_RETRY, RetryListener, RetryPolicy
from icefloe.splits.split import FileSplit

__all__ = ["DEFAULT_QUEUE_BATCHES", "DEFAULT_RUN_SPLITS", "LOCAL_RUN_RECORDS",
           "LOOKAHEAD_BYTES_PER_READER",
           "MAX_LOOKAHEAD_BYTES", "SPLITS_PER_READER", "SplitBatch", "lookahead_bytes",
           "read_batches", "read_splits", "target_splits"]

DEFAULT_RUN_SPLITS = 256
"""Most splits one reader thread claims as a run."""

DEFAULT_QUEUE_BATCHES = 8
"""Chunks one run queue holds; a run holds at most this many ``batch_size``-row batches
of records (of files on the local disk, at most :data:`LOCAL_RUN_RECORDS`). In order, the
queue the consumer drains holds at most this many, and the queues behind it what the
lookahead budget allows (:func:`lookahead_bytes`); before session 14 each of those held
this many too, so the next run's reader ran only this far ahead of the consumer.
Was 4: with 1M-row files the next run's reader then stopped after 4 chunks while the
consumer drained the current file (benchmarks/RESULTS.md, the backfill section)."""

LOOKAHEAD_BYTES_PER_READER = 64 * 1024 * 1024
"""The default lookahead budget per reader thread (:func:`lookahead_bytes`), in Arrow
bytes (``RecordBatch.nbytes``). A 32 MB Parquet file of the defaults matrix decodes to
about 72 MB: with 2 threads the budget holds the second file while the first is
drained, as PyArrow's dataset reader reads fragments ahead (benchmarks/RESULTS.md,
"Session 14 (issue 30): the ordered hand-off")."""

LOCAL_RUN_RECORDS = 131072
"""Most records one run of files on the local file system holds (twice the default
``batch_size``; at most ``queue_batches * batch_size``). Longer runs cost CPU in the
kernel: a read's batches are allocated by Arrow's allocator (mimalloc), which hands
pages freed and not reused within its purge delay back to the kernel, and the kernel
zeroes them again at their next fault; with ordered reads the run behind the one being
delivered is read ahead whole and freed in one burst. Counted on the defaults matrix's
64 files of 40,000 rows (1 MB; runs of 13 files before, 3 now): 29-98 MB of fresh pages
faulted in per read before, 9-24 MB with this cap, PyArrow's dataset reader 4-15 MB
(benchmarks/RESULTS.md, "Session 15 (issue 30): the CPU of 1 MB local files"). On an
object store runs keep ``queue_batches * batch_size`` records: a run is also what
:mod:`icefloe.reader.prefetch` fetches ahead."""

MAX_LOOKAHEAD_BYTES = 1024 * 1024 * 1024
"""The default lookahead budget's ceiling, whatever the thread count."""


def lookahead_bytes(parallelism: int) -> int:
    """The default lookahead budget of an ordered read on ``parallelism`` threads: the
    bytes the run queues may hold between them (most of it the runs read ahead of the
    one the consumer drains)
    (:data:`LOOKAHEAD_BYTES_PER_READER` per thread, at most :data:`MAX_LOOKAHEAD_BYTES`).
    Before it the next run's reader stopped ``queue_batches`` chunks ahead, and a read of
    as many splits as threads was read by about one thread at a time."""
    return min(LOOKAHEAD_BYTES_PER_READER * max(parallelism, 1), MAX_LOOKAHEAD_BYTES)


SPLITS_PER_READER = 4
"""A bounded read without ``splitSize`` on this engine, of files on the local file system,
is cut into about this many splits per reader thread when its files would give fewer (the
adaptive split size: :meth:`icefloe.enumerator.bounded.BoundedPlan.adaptive_cut`). More
than one a thread because of the ordered hand-off: the reader of the next split runs only
the lookahead budget (:func:`lookahead_bytes`; before session 14, its run queue's
:data:`DEFAULT_QUEUE_BATCHES` chunks) ahead of the consumer, so a file in as many splits
as threads, each larger than the budget, is read by about one thread at a time for the
rest of it. Not on an object store:
there a split's own open costs round trips, and the cut read 256 MB files 0.75-0.86x as
fast at 30 ms (1.06-1.23x at 10 ms; benchmarks/RESULTS.md, "Session 13 (issue 30): the
adaptive split size")."""


def target_splits(parallelism: int) -> int:
    """The splits a bounded read on ``parallelism`` reader threads is cut into at least
    (:data:`SPLITS_PER_READER` per thread), where its files allow it."""
    return SPLITS_PER_READER * max(parallelism, 1)


def read_splits(
    splits: Iterable[FileSplit],
    context: ReadContext,
    parallelism: int = 2,
    preserve_order: bool = True,
    queue_batches: int = DEFAULT_QUEUE_BATCHES,
    reader_factory: Callable[[ReadContext], SplitReader] = SplitReader,
    retry: RetryPolicy = NO_RETRY,
    run_splits: int = DEFAULT_RUN_SPLITS,
    stop: threading.Event | None = None,
    busy: BusyTime | None = None,
    failures: RetryListener | None = None,
    lookahead: int | None = None,
) -> Iterator[SplitBatch]:
    """Read ``splits`` on ``parallelism`` threads; yield every batch as a :class:`SplitBatch`.

    Every split yields at least one item (the last, possibly empty), so a consumer can
    track split completion. Closing the iterator stops the readers, and so does setting
    ``stop`` (from any thread: the iterator then ends within ~0.1 s, without raising).
    A reader error is raised from the iterator (in split order when ``preserve_order``),
    after the items read before it.

    ``splits`` is iterated on a feeder thread (it may block, as a stream's source does).
    A reader thread claims the next split and the splits already fed behind it as a run
    (see the module docstring; ``run_splits=1`` claims split by split, never waiting for
    more), read by :func:`icefloe.local.worker.read_run`.

    A transient read error (:func:`icefloe.retry.is_transient`) re-reads the split from
    the last consumed record offset, after ``retry``'s backoff, so no row is delivered
    twice or skipped; ``retry.max_attempts`` consecutive failures without progress
    raise the last error. The default never retries. A scanned run that fails goes on
    split by split from the failed split's offset (the same retries and typed errors).
    With ``busy``, the reader threads add the time they spend reading to it; ``failures``
    hears of every failed attempt to read a split (``(error, retrying)``).

    With ``preserve_order``, the run queues hold up to ``lookahead`` bytes between them
    (Arrow bytes plus 1 KiB per batch; None: :func:`lookahead_bytes`), plus one chunk
    per thread, plus ``queue_batches`` chunks of the run being delivered, which alone is
    admitted past the budget (:class:`~icefloe.local.queues.Lookahead`).
    """
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")
    if run_splits < 1:
        raise ValueError(f"run_splits must be >= 1, got {run_splits}")
    stop = stop if stop is not None else threading.Event()
    feeder = Feeder(splits, max(64, 2 * run_splits * parallelism), stop)
    if lookahead is not None and lookahead < 1:
        raise ValueError(f"lookahead must be >= 1 byte, got {lookahead}")
    merger = Merger(preserve_order, parallelism, queue_batches, stop,
                    lookahead_bytes(parallelism) if lookahead is None else lookahead)
    # small files fed next, fetched before their claim (object stores)
    ahead = FetchedAhead(FileOpener(context.io), resolve_concurrency(context.io_concurrency))
    assigner = RunAssigner(feeder, merger, parallelism, run_splits,
                           queue_batches * context.batch_size,
                           min(queue_batches * context.batch_size, LOCAL_RUN_RECORDS), ahead)
    feeder.start()
    threads = [
        threading.Thread(
            target=Worker(context, assigner, merger, reader_factory, retry, stop, busy,
                          failures).run,
            name=f"icefloe-reader-{i}", daemon=True)
        for i in range(parallelism)
    ]
    for t in threads:
        t.start()

    def closer() -> None:  # ordered: a sentinel after the workers finish claiming
        for t in threads:
            t.join()
        merger.all_claimed()

    threading.Thread(target=closer, name="icefloe-reader-closer", daemon=True).start()
    try:
        yield from merger.items()
    finally:
        stop.set()
        ahead.close()


def read_batches(
    splits: Iterable[FileSplit], context: ReadContext, parallelism: int = 2,
    preserve_order: bool = True,
) -> Iterator[pa.RecordBatch]:
    """Non-empty batches of ``splits`` read on ``parallelism`` threads (bounded memory)."""
    for item in read_splits(splits, context, parallelism, preserve_order):
        if item.batch.num_rows:
            yield item.batch
