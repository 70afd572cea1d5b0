"""Stage 7 of the read pipeline, second half: small whole files read by one Arrow dataset scan.

Runs on a worker.

Reading small Parquet files one at a time costs more than decoding them: each file is
opened, its footer parsed and a reader set up on the worker thread, holding the GIL
between the short decodes. A run of such splits goes through one
``pyarrow.dataset`` scan instead: Arrow opens, pre-buffers and decodes the next files
(fragment readahead) on its own threads while the worker projects the batches it has.

Every scanned batch is tagged with its fragment (its file), so it is attributed to its
split, and each batch goes through the same stages as any other read (a
:class:`~icefloe.reader.file_reader.FileReader`'s plan and
:class:`~icefloe.reader.process.BatchProcessor`; see :meth:`RunScanner.read_run`); the
scan replaces stages 1 and 3 (opening and reading the file). A split qualifies
(:func:`can_batch`) when it is a whole Parquet file of at most
:data:`RUN_MAX_SPLIT_BYTES`, has no delete files and no resume offset; everything else
keeps the per-split path.

Schemas: a scan reads every file with one Arrow schema and would silently cast or
null-fill the columns of a file written with another one (a renamed column would read
as nulls). So each fragment's physical schema (field ids included) is compared with the
scan's; at the first file that differs, the scan stops and a new one starts at that
file with its schema.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from pyarrow.fs import FileSystem

from icefloe.errors import DataFileError
from icefloe.reader.file_reader import FileReader
from icefloe.reader.open_file import BINARY_TYPE, LIST_TYPE
from icefloe.splits.split import FileSplit

log = logging.getLogger(__name__)

RUN_MAX_SPLIT_BYTES = 8 * 1024 * 1024
"""Largest split read in a run (bigger files amortise their own open; they decode threaded)."""

FRAGMENT_READAHEAD = 8
"""Files of a run opened and decoded ahead of the one being consumed."""


def can_batch(split: FileSplit) -> bool:
    """Whether ``split`` may be read in a run (cheap: looks at the split only).

    Whole Parquet files up to :data:`RUN_MAX_SPLIT_BYTES` with no delete files (no
    position / equality deletes, no deletion vectors), no resume offset, and not a
    changelog split.
    """
    return (split.file_format == "PARQUET" and not split.delete_files and not split.changes
            and split.resume_rows == 0 and split.is_whole_file
            and split.length <= RUN_MAX_SPLIT_BYTES)


def check_complete(split: FileSplit, read: int) -> None:
    """Raise :class:`DataFileError` unless a run read all ``split.record_count`` records
    (``read``) of the split's file."""
    if read != split.record_count:
        raise DataFileError(
            f"data file {split.file_path} of snapshot {split.snapshot_id} returned {read} "
            f"of its {split.record_count} records in a run")


def same_fields(a: pa.Schema, b: pa.Schema) -> bool:
    """Same fields (names, types, nullability, field metadata such as Parquet field ids).

    Schema-level metadata is ignored (pandas metadata differs from file to file).
    """
    if a.equals(b, check_metadata=True):
        return True
    return len(a) == len(b) and all(
        x.equals(y, check_metadata=True) for x, y in zip(a, b, strict=True))


class RunScanner:
    """Reads runs of splits for one reader thread (same thread, same caches).

    Args:
        reader: the file reader whose stages (plans, batch processing) are used.
    """

    def __init__(self, reader: FileReader) -> None:
        self.reader = reader
        self._format = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(
            binary_type=BINARY_TYPE, list_type=LIST_TYPE))  # as open_parquet's
        self._schema: pa.Schema | None = None  # of the last scan: the next run likely shares it

    def filesystem(self, split: FileSplit) -> tuple[FileSystem, str] | None:
        """The Arrow filesystem and path of the split's file, or None (no run possible:
        only a :class:`~pyiceberg.io.pyarrow.PyArrowFileIO` exposes Arrow filesystems)."""
        return self.reader.files.locate(split.file_path)

    def read_run(self, splits: Sequence[FileSplit]) -> Iterator[tuple[int, pa.RecordBatch, int]]:
        """``(index, batch, consumed)`` for the batches of ``splits`` (all :func:`can_batch`).

        ``index`` points into ``splits``; items come in split order, a split's batches in
        file order. ``batch`` (possibly empty: all rows filtered) and ``consumed`` (source
        records of the split read so far) mean what they mean in
        :meth:`SplitReader.read_progress`. Every split with records yields at least one
        item, and when the run moves on to split ``i + 1`` (or ends), split ``i`` has
        yielded exactly its ``record_count`` records: otherwise :class:`DataFileError`.

        On any error the split of the last item may be incomplete: the caller resumes it
        at its last ``consumed`` with :meth:`SplitReader.read_progress`, which also names
        a broken file in a typed error, and may start a new run after it.

        Raises:
            DataFileError: a file yields more or fewer records than its split records.
            OSError, pyarrow.ArrowException: the scan failed (untranslated: see above).
        """
        located: list[tuple[FileSystem, str]] = []
        for split in splits:
            where = self.filesystem(split)
            if where is None:
                raise DataFileError(f"data file {split.file_path} is not on an Arrow filesystem")
            located.append(where)
        lo = 0
        while lo < len(splits):
            # a segment: consecutive files on one filesystem, no file twice
            fs = located[lo][0]
            seen = {located[lo][1]}
            hi = lo + 1
            while hi < len(splits) and located[hi][0] is fs and located[hi][1] not in seen:
                seen.add(located[hi][1])
                hi += 1
            yield from self._read_segment(splits, [p for _, p in located], lo, hi, fs)
            lo = hi

    def _read_segment(self, splits: Sequence[FileSplit], paths: list[str], lo: int, hi: int,
                      fs: FileSystem) -> Iterator[tuple[int, pa.RecordBatch, int]]:
        start: int | None = lo
        while start is not None and start < hi:
            if self._schema is None:
                self._schema = self._format.inspect(paths[start], fs)
            start = yield from self._scan(splits, paths, start, hi, fs, self._schema)

    def _scan(self, splits: Sequence[FileSplit], paths: list[str], lo: int, hi: int,
              fs: FileSystem, schema: pa.Schema
              ) -> Generator[tuple[int, pa.RecordBatch, int], None, int | None]:
        """Scan ``splits[lo:hi]`` with ``schema``; return None when done, or the index of
        the first file of another schema (``self._schema`` is then that file's schema)."""
        reader = self.reader
        plan = reader.planner.plan(schema, frozenset())
        dataset = ds.FileSystemDataset.from_paths(paths[lo:hi], schema=schema,
                                                  format=self._format, filesystem=fs)
        scanner = dataset.scanner(columns=plan.columns, batch_size=reader.context.batch_size,
                                  fragment_readahead=FRAGMENT_READAHEAD, use_threads=True)
        cur: int | None = None  # split of the current fragment
        pos = 0  # its records read so far
        missing: dict[int, Any] = {}
        tagged_batches = iter(scanner.scan_batches())
        while True:
            try:
                tagged = next(tagged_batches)
            except StopIteration:
                break
            except (OSError, pa.ArrowException) as exc:
                # a file of another schema may fail the scan's cast: rescan from it
                nxt = self._next_with_schema(splits, paths, cur, pos, lo, hi, fs, schema)
                if nxt is None:
                    raise
                log.debug("run scan stopped at %s (%s); it has another schema",
                          paths[nxt], exc)
                return nxt
            fragment = tagged.fragment
            if cur is None or fragment.path != paths[cur]:
                nxt = lo if cur is None else self._complete(splits[cur], pos, cur)
                while nxt < hi and paths[nxt] != fragment.path:  # files without records
                    nxt = self._complete(splits[nxt], 0, nxt)
                if nxt >= hi:
                    raise DataFileError(f"a run scan returned a batch of {fragment.path}, "
                                        "not of a file of the run")
                theirs = fragment.physical_schema
                if not same_fields(theirs, schema):
                    self._schema = theirs
                    return nxt
                cur, pos = nxt, 0
                missing = reader.planner.missing_values(splits[cur], plan.missing_ids)
            raw = tagged.record_batch
            batch = reader.processor.process(raw, pos, splits[cur], plan, missing)
            pos += raw.num_rows
            yield cur, batch, pos
        nxt = lo if cur is None else self._complete(splits[cur], pos, cur)
        while nxt < hi:  # trailing files without records
            nxt = self._complete(splits[nxt], 0, nxt)
        return None

    def _next_with_schema(self, splits: Sequence[FileSplit], paths: list[str], cur: int | None,
                          pos: int, lo: int, hi: int, fs: FileSystem,
                          schema: pa.Schema) -> int | None:
        """After a scan error: the next file when the current one is complete and the next
        has another schema (``self._schema`` becomes it), else None (a real error)."""
        if cur is not None and pos != splits[cur].record_count:
            return None
        nxt = lo if cur is None else cur + 1
        if nxt >= hi:
            return None
        try:
            theirs = self._format.inspect(paths[nxt], fs)
        except (OSError, pa.ArrowException):
            return None
        if same_fields(theirs, schema):
            return None
        self._schema = theirs
        return nxt

    @staticmethod
    def _complete(split: FileSplit, read: int, index: int) -> int:
        """Check that ``split`` (at ``index``) yielded all its records; the next index."""
        check_complete(split, read)
        return index + 1
