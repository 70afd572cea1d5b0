"""The read pipeline composed for one data file: a split -> ``(batch, consumed)``. Runs on a worker.

:class:`FileReader` holds one reader thread's stages and runs them in order for a split
of a Parquet, ORC or Avro file:

1. open the file (:mod:`icefloe.reader.open_file`), fetched ahead or not;
2. load the split's deletes (:mod:`icefloe.reader.deletes`) and plan the file's columns
   against the read schema (:mod:`icefloe.reader.plan`), the equality keys included;
3. read the split's range (:mod:`icefloe.reader.ranges`; ORC stripes and Avro blocks:
   :mod:`icefloe.reader.units`), passing over what a resumed split delivered before;
4-6. per raw batch: deletes, residual filter, projection, metadata columns, cast
   (:class:`~icefloe.reader.process.BatchProcessor`).

:class:`~icefloe.reader.split_reader.SplitReader` composes it with the changelog and the
runs of small files; :mod:`icefloe.reader.groups`, :mod:`icefloe.reader.runs` and
:mod:`icefloe.reader.changelog` use its stages (its public attributes) directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from icefloe.errors import DataFileError
from icefloe.reader.context import ReadContext
from icefloe.reader.deletes import DeleteLoader
from icefloe.reader.files import FileOpener
from icefloe.reader.open_file import ParquetFile, open_format_file, open_parquet, read_failed
from icefloe.reader.plan import FilePlan, FilePlanner
from icefloe.reader.prefetch import Prefetcher, eligible, resolve_concurrency
from icefloe.reader.process import BatchProcessor
from icefloe.reader.ranged import MIN_SPLIT_BYTES, decoded_ahead, ranged_batches
from icefloe.reader.ranges import from_offset, parquet_batches, row_group_range
from icefloe.reader.units import FormatFile, select_units
from icefloe.splits.split import FileSplit

LOCAL_DECODE_AHEAD_BYTES = 256 * 1024 * 1024
"""A split read from a file (not in ranges) whose row groups hold at least this many bytes
decoded (Parquet's ``total_byte_size``) is decoded ahead of its reader thread
(:func:`icefloe.reader.ranged.decoded_ahead`): a split of one large row group is one
reader's, and without it Arrow's decode threads wait for the reader thread's processing
and hand-off between decode calls (256 MB x 1 row group: ~1.5 of 2 cores busy). Smaller
splits come many to a read, and the other readers keep the cores busy."""


def decodes_ahead(pf: Any, row_groups: list[int]) -> bool:
    """Whether a split reading ``row_groups`` of ``pf`` is decoded ahead
    (:data:`LOCAL_DECODE_AHEAD_BYTES`)."""
    md = pf.metadata
    total = 0
    for i in row_groups:
        total += md.row_group(i).total_byte_size
        if total >= LOCAL_DECODE_AHEAD_BYTES:
            return True
    return False


class FileReader:
    """Reads splits of data files of one read context. One instance per reader thread
    (its stages cache delete files, plans and casts; nothing in it is thread-safe but
    :attr:`files`).

    Args:
        context: the read's context.
    """

    def __init__(self, context: ReadContext) -> None:
        self.context = context
        self.files = FileOpener(context.io)
        """Stage 1: opens data files (and locates them on Arrow filesystems)."""
        self.prefetch = Prefetcher(self.files, resolve_concurrency(context.io_concurrency))
        """Stage 1: fetches the next small files of a run ahead on an object store (see
        :mod:`icefloe.reader.prefetch`)."""
        self.deletes = DeleteLoader(context.io)
        """Stage 4: the splits' delete files (cached)."""
        self.planner = FilePlanner(context)
        """Stage 2: the files' column plans (cached)."""
        self.processor = BatchProcessor(context)
        """Stages 4-6 for one raw batch."""

    def read_progress(self, split: FileSplit, use_threads: bool | None = None
                      ) -> Iterator[tuple[pa.RecordBatch, int]]:
        """``(batch, consumed)`` pairs of a data split (not a changelog split); ``batch``
        may be empty (all rows deleted or filtered).

        ``consumed`` counts source records of the split read so far, ``split.resume_rows``
        included; after the last pair it equals the split's total source records.
        ``use_threads``: a Parquet split's decode on Arrow's threads, as
        :meth:`read_parquet`'s (False for a split read in a run of several: the other
        reader threads keep the cores busy).

        Raises:
            DataFileError: a data or delete file is missing, unreadable or of an unknown
                format (icefloe reads Parquet, ORC and Avro).
        """
        if split.file_format != "PARQUET":
            yield from self._read_format(split)
            return
        ranged = split.length >= MIN_SPLIT_BYTES and self.prefetch.concurrency > 0
        # a small whole file on an object store read alone (not in a run): fetched whole,
        # open + one GET (2 round trips), not open, footer, column chunks (3)
        window = self.prefetch.window([split]) if not ranged and eligible(split) else None
        try:
            opened = open_parquet(self.files, split, window, footer_beside_head=ranged)
            try:
                yield from self.read_parquet(split, opened, use_threads)
            except DataFileError:
                raise
            except (OSError, pa.ArrowException) as exc:
                raise read_failed(split, exc) from exc
            finally:
                opened.close()
        finally:
            if window is not None:
                window.close()

    def read_parquet(self, split: FileSplit, opened: ParquetFile,
                     use_threads: bool | None = None) -> Iterator[tuple[pa.RecordBatch, int]]:
        """:meth:`read_progress` of a Parquet split whose file is ``opened`` (the caller
        closes it and translates I/O errors: see :func:`icefloe.reader.open_file.read_failed`).
        ``use_threads``: decode the file's columns in parallel on Arrow's threads (None:
        by the split's size, :func:`icefloe.reader.ranges.parquet_batches`; a large split
        on an object store read in ranges keeps that rule)."""
        pf = opened.reader
        selected = row_group_range(pf, split)
        if selected is None:
            return
        size = self.context.batch_size
        if opened.remote and split.length >= MIN_SPLIT_BYTES and self.prefetch.concurrency:
            def raw(plan: FilePlan) -> Iterator[pa.RecordBatch]:  # column chunks fetched ahead
                return ranged_batches(opened, selected.units, split, size, plan,
                                      self.prefetch)
        elif use_threads is None and decodes_ahead(pf, selected.units):
            def raw(plan: FilePlan) -> Iterator[pa.RecordBatch]:  # decoded ahead
                return decoded_ahead(parquet_batches(pf, selected.units, split, size, plan))
        else:
            def raw(plan: FilePlan) -> Iterator[pa.RecordBatch]:
                return parquet_batches(pf, selected.units, split, size, plan, use_threads)
        yield from self.read_file(split, pf.schema_arrow, raw, selected.first_position,
                                  selected.skip)

    def _read_format(self, split: FileSplit) -> Iterator[tuple[pa.RecordBatch, int]]:
        """:meth:`read_progress` of an ORC or Avro split."""
        opened = open_format_file(self.files, split.file_path, split.file_format,
                                  f"data file {split.file_path} (snapshot {split.snapshot_id})")
        try:
            yield from self._read_units(split, opened)
        except DataFileError:
            raise
        except Exception as exc:
            raise read_failed(split, exc) from exc
        finally:
            opened.close()

    def _read_units(self, split: FileSplit, opened: FormatFile
                    ) -> Iterator[tuple[pa.RecordBatch, int]]:
        selection = select_units(opened.units, split)
        if not selection.units:
            return
        size = self.context.batch_size
        yield from self.read_file(
            split, opened.schema_arrow,
            lambda plan: opened.iter_batches(size, selection.units,
                                             None if plan.all_columns else plan.columns),
            selection.first_position, selection.skip)

    def read_file(self, split: FileSplit, arrow_schema: pa.Schema,
                  raw_batches: Callable[[FilePlan], Iterable[pa.RecordBatch]],
                  first_position: int, skip: int) -> Iterator[tuple[pa.RecordBatch, int]]:
        """The split's rows of one open data file of any format, through stages 2 and 4-6.

        ``raw_batches(plan)`` yields the file's batches (of ``arrow_schema``, the columns
        ``plan`` needs) from file position ``first_position``; the first ``skip`` of
        those rows were delivered before (a resumed split) and are passed over. Yields
        ``(batch, consumed)`` as :meth:`read_progress` does.
        """
        deletes = self.deletes.for_split(split)
        plan = self.planner.plan(arrow_schema, deletes.equality_ids)
        missing = self.planner.missing_values(split, plan.missing_ids)
        process = self.processor.process
        consumed = split.resume_rows
        for raw, pos in from_offset(raw_batches(plan), first_position, skip):
            batch = process(raw, pos, split, plan, missing, deletes)
            consumed += raw.num_rows
            yield batch, consumed
