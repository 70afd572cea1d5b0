"""SplitReader: one split -> Arrow RecordBatches. Runs on a worker.

The composer of the read pipeline (README, "Layout"): a data split goes through the
stages of :class:`~icefloe.reader.file_reader.FileReader` (open the file, plan its
columns, read the split's range, apply deletes and the residual filter, project and
cast, add metadata columns, batch); a changelog split through
:class:`~icefloe.reader.changelog.ChangeReader` (the same stages under a plain read of
the data context); runs of small whole files through :mod:`icefloe.reader.groups`
(default) or :mod:`icefloe.reader.runs` (one dataset scan), which use the same stages.

Progress: :meth:`SplitReader.read_progress` pairs each batch with the number of
source records of the split (before deletes and filters) consumed after it, the
value :meth:`FileSplit.with_position` takes to resume.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from icefloe.errors import SplitError
from icefloe.reader.changelog import ChangeReader, net_of
from icefloe.reader.context import ReadContext
from icefloe.reader.deletes import DeleteLoader
from icefloe.reader.file_reader import FileReader
from icefloe.reader.files import FileOpener
from icefloe.reader.groups import read_group
from icefloe.reader.prefetch import Prefetcher
from icefloe.reader.runs import RunScanner, can_batch
from icefloe.splits.split import FileSplit

log = logging.getLogger(__name__)

MIN_RUN = 4
"""Fewer consecutive small whole files than this are read split by split (a run's set-up)."""


def run_decode_threads(run_length: int) -> bool | None:
    """``use_threads`` (:meth:`SplitReader.read_progress`) for the splits of a run of
    ``run_length`` read one by one: False for a run of several, whose small files decode
    on the calling thread as a run read together does (the other readers keep the cores
    busy); None for a split alone (by its size)."""
    return None if run_length < 2 else False


class SplitReader:
    """Reads splits of one plan. One instance per worker thread (it caches delete files,
    plans and casts).

    Args:
        context: the plan's shared read context.
        contexts: a stream's read context of another schema, by id (splits with a
            ``schema_id``, ``onSchemaChange=evolve``; see :meth:`for_schema`). Called on
            the reading thread; it must be thread-safe.
    """

    def __init__(self, context: ReadContext,
                 contexts: Callable[[int], ReadContext] | None = None) -> None:
        self.context = context
        self.contexts = contexts
        self.file_reader = FileReader(context)
        """The pipeline's stages for data splits (and runs of them)."""
        self._by_schema: dict[int, SplitReader] = {}
        self._runs: RunScanner | None = None
        self._changes: ChangeReader | None = None

    @property
    def files(self) -> FileOpener:
        """Opens this reader's data files (the file reader's)."""
        return self.file_reader.files

    @property
    def prefetch(self) -> Prefetcher:
        """Fetches the next small files of a run ahead on an object store (see
        :mod:`icefloe.reader.prefetch`)."""
        return self.file_reader.prefetch

    @property
    def deletes(self) -> DeleteLoader:
        """This reader's delete files (cached)."""
        return self.file_reader.deletes

    def for_schema(self, schema_id: int | None) -> SplitReader:
        """The reader of splits read in ``schema_id`` (None: this one), built once from
        ``contexts`` and kept.

        Raises:
            SplitError: a split of another schema and no ``contexts`` to build it from.
        """
        if schema_id is None:
            return self
        reader = self._by_schema.get(schema_id)
        if reader is None:
            if self.contexts is None:
                raise SplitError(f"a split read in schema {schema_id} reached a reader "
                                 "without the stream's schemas (a bug in the engine adapter)")
            reader = type(self)(self.contexts(schema_id))
            self._by_schema[schema_id] = reader
        return reader

    batch_runs = True
    """Whether the local engine reads runs of :meth:`can_batch` splits (small whole files)
    with :meth:`read_run` instead of split by split."""

    scan_runs = False
    """Whether :meth:`read_run` reads a run through one ``pyarrow.dataset`` scan
    (:mod:`icefloe.reader.runs`) instead of file by file, processed in groups
    (:mod:`icefloe.reader.groups`). Off: on local files the dataset scanner costs more CPU
    per small file than this reader (benchmarks/RESULTS.md, "Backfill throughput"); it may
    pay where opening a file is slow (object stores)."""

    def can_batch(self, split: FileSplit) -> bool:
        """Whether ``split`` may be read with others in :meth:`read_run` (cheap; any thread)."""
        return can_batch(split)

    def read_run(self, splits: Sequence[FileSplit]) -> Iterator[tuple[int, pa.RecordBatch, int]]:
        """``(index, batch, consumed)`` of ``splits`` (each :meth:`can_batch`): see
        :meth:`icefloe.reader.runs.RunScanner.read_run` for the contract (split order; on
        error, resume the last item's split per split). Read file by file with small
        files processed in groups (:func:`icefloe.reader.groups.read_group`), or through
        one Arrow dataset scan when :attr:`scan_runs`."""
        if not self.scan_runs:
            return read_group(self.file_reader, splits)
        if self._runs is None:
            self._runs = RunScanner(self.file_reader)
        return self._runs.read_run(splits)

    def read_many(self, splits: Iterable[FileSplit]) -> Iterator[pa.RecordBatch]:
        """Non-empty batches of ``splits``, in order, on the calling thread (a Spark or Ray
        read task; the local engine has its own runs, see :func:`icefloe.local.engine.read_splits`).

        Runs of at least :data:`MIN_RUN` consecutive :meth:`can_batch` splits (small whole
        files) go through :meth:`read_run` when :attr:`batch_runs`; the others through
        :meth:`read`. If a run fails, its splits are read on one by one from where it
        stopped (the split it stopped in from its last offset): nothing is repeated or
        skipped, and a broken file raises :meth:`read`'s typed error.

        Raises:
            DataFileError: a data or delete file is missing, unreadable or of an unknown
                format (icefloe reads Parquet, ORC and Avro).
        """
        if self.context.net_changes:  # the whole plan, collapsed (one task reads it all)
            yield from net_of(self.context, self._read_many(splits))
            return
        yield from self._read_many(splits)

    def _read_many(self, splits: Iterable[FileSplit]) -> Iterator[pa.RecordBatch]:
        """:meth:`read_many` without the netting of a ``netChanges`` changelog."""
        run: list[FileSplit] = []
        for split in splits:
            if self.batch_runs and self.can_batch(split):
                run.append(split)
                continue
            yield from self._read_run_or_each(run)
            run = []
            yield from self.read(split)
        yield from self._read_run_or_each(run)

    def _read_run_or_each(self, run: list[FileSplit]) -> Iterator[pa.RecordBatch]:
        consumed = [0] * len(run)
        last = 0  # split of the last item: the ones before it are complete
        if len(run) >= MIN_RUN:
            try:
                for index, batch, offset in self.read_run(run):
                    last, consumed[index] = index, offset
                    if batch.num_rows:
                        yield batch
                return
            except Exception as exc:  # read on split by split: typed errors, or success
                log.debug("run of %d splits stopped in split %s (record %d); reading on "
                          "split by split: %s: %s", len(run), run[last].split_id,
                          consumed[last], type(exc).__name__, exc)
        threads = run_decode_threads(len(run))
        for split, offset in zip(run[last:], consumed[last:], strict=True):
            yield from self.read(split.with_position(offset) if offset else split, threads)

    def read(self, split: FileSplit, use_threads: bool | None = None
             ) -> Iterator[pa.RecordBatch]:
        """Non-empty batches of ``split`` (from ``split.resume_rows`` on); ``use_threads``
        as :meth:`read_progress`'s."""
        for batch, _ in self.read_progress(split, use_threads):
            if batch.num_rows:
                yield batch

    def read_progress(self, split: FileSplit, use_threads: bool | None = None
                      ) -> Iterator[tuple[pa.RecordBatch, int]]:
        """``(batch, consumed)`` pairs; ``batch`` may be empty (all rows deleted/filtered).

        ``consumed`` counts source records of the split read so far, ``split.resume_rows``
        included; after the last pair it equals the split's total source records (a
        changelog split counts what :class:`~icefloe.reader.changelog.ChangeReader` says).
        ``use_threads``: decode a Parquet data split's columns on Arrow's threads (None:
        by its size, :meth:`FileReader.read_parquet`; False for a split of a run of
        several small files read one by one, which decode on the calling thread as a
        run read together does, :mod:`icefloe.reader.groups`).

        Raises:
            DataFileError: a data or delete file is missing, unreadable or of an unknown
                format (icefloe reads Parquet, ORC and Avro).
        """
        if split.changes:  # a changelog split: icefloe.reader.changelog
            if self._changes is None:
                self._changes = ChangeReader(self.context)
            yield from self._changes.read_progress(split)
            return
        yield from self.file_reader.read_progress(split, use_threads)
