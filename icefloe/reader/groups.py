"""Stage 7 of the read pipeline, second half: small files read one by one, processed together.

Runs on a worker.

A small Parquet file (a few hundred rows) costs a reader thread about as much Python
work per file as decoding it: the batch's columns wrapped, the cast of each string
column to the output's ``large_string``, the relabelled batch built. Under the GIL, with
two reader threads, that per-file work is what limits a read of thousands of small files.
:func:`read_group` composes the stages of a
:class:`~icefloe.reader.file_reader.FileReader`: each file is opened
(:func:`~icefloe.reader.open_file.open_parquet`: no Parquet pre-buffering on local disks)
and planned (:class:`~icefloe.reader.plan.FilePlanner`) as alone, then read whole (one
``read_all``); the raw batches of consecutive small files that share a plan are
gathered, concatenated once, converted with one cast per column
(:meth:`~icefloe.reader.process.BatchProcessor.fast`), and each file's rows handed back
as a zero-copy slice of the result.

Only files whose projection is a plain relabel-and-cast (the fast path: no filter, no
metadata or partition-value columns) are gathered; every other file of the run goes
through :meth:`FileReader.read_parquet` as it would alone, except that every file of a
run decodes on the reader's own thread (``use_threads=False``): with a run's many files
the engine's other reader threads keep the cores busy, and Arrow's per-column tasks on
its pool (a thread hand-off per column and batch) cost more CPU and time than they save
(benchmarks/RESULTS.md, "Defaults matrix", session 13: per-file CPU). The contract is
:meth:`SplitReader.read_run`'s: items in split order, every split with records complete
before the next one starts; on an error nothing of the gathered, unsent files was
delivered, so the caller resumes split by split at the first split it has not finished.

On an object store the next files of the run are fetched whole while one decodes
(:mod:`icefloe.reader.prefetch`); a file's fetch error is raised when its turn comes, as
its own open error would be.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from icefloe.reader.file_reader import FileReader
from icefloe.reader.open_file import open_parquet, read_failed
from icefloe.reader.plan import FilePlan, column_indices
from icefloe.reader.runs import check_complete
from icefloe.splits.split import FileSplit

if TYPE_CHECKING:
    from icefloe.reader.prefetch import PrefetchWindow

GROUP_MAX_FILE_ROWS = 8192
"""Files with more records than this are read on their own (their per-file cost is small
next to decoding them, and gathering would copy their rows)."""


def read_group(reader: FileReader, splits: Sequence[FileSplit]
               ) -> Iterator[tuple[int, pa.RecordBatch, int]]:
    """``(index, batch, consumed)`` for ``splits`` (each :func:`icefloe.reader.runs.can_batch`),
    with :meth:`icefloe.reader.split_reader.SplitReader.read_run`'s contract, through
    ``reader``'s stages. Runs on the reader's thread.

    Raises:
        DataFileError: a file is missing, unreadable, or yields more or fewer records than
            its split (typed, naming the file).
    """
    window = reader.prefetch.window(splits)  # the next files fetched ahead (object stores)
    if window is None:  # local files: no generator in between
        return _read(reader, splits, None)
    return _closing(_read(reader, splits, window), window)


def _closing(items: Iterator[tuple[int, pa.RecordBatch, int]], window: PrefetchWindow
             ) -> Iterator[tuple[int, pa.RecordBatch, int]]:
    """``items``, then (also when the consumer stops early or fails) ``window`` closed."""
    try:
        yield from items
    finally:
        window.close()


def _read(reader: FileReader, splits: Sequence[FileSplit], window: PrefetchWindow | None
          ) -> Iterator[tuple[int, pa.RecordBatch, int]]:
    limit = reader.context.batch_size
    planner, processor = reader.planner, reader.processor
    pending: list[tuple[int, int, list[pa.RecordBatch]]] = []  # (index, records, raws)
    pending_plan: FilePlan | None = None
    pending_rows = 0

    def flush() -> Iterator[tuple[int, pa.RecordBatch, int]]:
        nonlocal pending, pending_plan, pending_rows
        if not pending:
            return
        group, plan = pending, pending_plan
        pending, pending_plan, pending_rows = [], None, 0
        assert plan is not None and plan.fast is not None
        raws = [raw for _, _, batches in group for raw in batches]
        combined = raws[0] if len(raws) == 1 else pa.concat_batches(raws)
        out = processor.fast(combined, plan)
        offset = 0
        for index, n, _ in group:
            yield index, out.slice(offset, n), n
            offset += n

    for index, split in enumerate(splits):
        opened = open_parquet(reader.files, split, window, index)
        try:
            pf = opened.reader
            plan = planner.plan(pf.schema_arrow, frozenset())
            if split.record_count > GROUP_MAX_FILE_ROWS or plan.fast is None \
                    or plan.missing_ids:
                yield from flush()
                consumed = 0
                # on this thread: Arrow's column tasks cost more than they save here
                for batch, consumed in reader.read_parquet(split, opened, use_threads=False):
                    yield index, batch, consumed
                check_complete(split, consumed)
                continue
            try:
                batches = pf.read_all(column_indices(pf, plan), use_threads=False).to_batches()
            except (OSError, pa.ArrowException) as exc:
                raise read_failed(split, exc) from exc
        finally:
            opened.close()
        check_complete(split, sum(b.num_rows for b in batches))
        batches = [b for b in batches if b.num_rows]
        if not batches:
            continue  # no records: complete without an item (as a run scan does)
        if any(not b.schema.equals(plan.direct_source) for b in batches):
            yield from flush()  # a raw schema the fast path was not learned on
            pos = 0  # first record of ``raw``
            for raw in batches:
                batch = processor.process(raw, pos, split, plan, {})
                pos += raw.num_rows
                yield index, batch, pos
            continue
        if plan is not pending_plan:
            yield from flush()
            pending_plan = plan
        pending.append((index, split.record_count, batches))
        pending_rows += split.record_count
        if pending_rows >= limit:
            yield from flush()
    yield from flush()
