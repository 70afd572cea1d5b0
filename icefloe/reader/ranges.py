"""Stage 3 of the read pipeline: read the split's range of an open file. Runs on a worker.

A split ``[start, end)`` of a data file owns the read units whose first byte lies in its
range: Parquet row groups (:func:`row_group_range`), ORC stripes and Avro blocks
(:func:`icefloe.reader.units.select_units`). Consecutive splits of a file so read every
unit exactly once, whatever their boundaries. A split resumed at a record offset
(``resume_rows``) passes over whole units without decoding them, and the rest of the
offset within the first unit it decodes (:func:`from_offset`).

Raw batches come out in the file's schema restricted to the columns a
:class:`~icefloe.reader.plan.FilePlan` names, each with its position in the file (the
first row's), which position deletes, ``_pos`` and row lineage need.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import pyarrow as pa
from pyarrow._parquet import ParquetReader

from icefloe.reader.batches import decode_rows, sliced
from icefloe.reader.plan import FilePlan, column_indices
from icefloe.splits.split import FileSplit

THREADED_DECODE_BYTES = 1024 * 1024
"""Below this many bytes a split decodes on the calling thread: for small files Arrow's
per-column thread tasks cost more than they save (the engine already runs readers in
parallel). A run of small files (:mod:`icefloe.reader.groups`) decodes every file on the
calling thread, whatever its size (up to the runs' 8 MiB): the other reader threads keep
the cores busy with the run's neighbours; so does a run of several splits too short to be
read together, split by split (:meth:`icefloe.reader.split_reader.SplitReader.read_progress`'s
``use_threads``: the local engine's runs of 3 of the matrix's 1 MB files; a profile showed
their reader threads waiting on Arrow's pool; the effect on their read time is within the
spread of a same-round A/B, benchmarks/RESULTS.md, "Session 21")."""


class Range(NamedTuple):
    """The units a split reads (indices, in file order), the file position of the first
    one's first row, and how many of the records from there were delivered before."""

    units: list[int]
    first_position: int
    skip: int


def row_group_start(rg: Any) -> int:
    """The first byte of a Parquet row group (its first column chunk's dictionary or data
    page): a split whose byte range holds it reads the row group."""
    col = rg.column(0)
    offsets = [col.data_page_offset]
    if col.has_dictionary_page and col.dictionary_page_offset:
        offsets.append(col.dictionary_page_offset)
    return int(min(offsets))


def row_group_range(pf: ParquetReader, split: FileSplit) -> Range | None:
    """The row groups of ``pf`` that ``split`` reads from its ``resume_rows`` on, or None
    when it reads none (an empty range, or everything delivered)."""
    md = pf.metadata
    skip = split.resume_rows
    if split.is_whole_file and not skip:  # every row group, from position 0
        selected = list(range(md.num_row_groups))
        return Range(selected, 0, 0) if selected else None
    selected = []
    first_position = None
    position = 0
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        rows = rg.num_rows
        if split.is_whole_file or split.start <= row_group_start(rg) < split.end:
            if skip >= rows and first_position is None:
                skip -= rows
            else:
                if first_position is None:
                    first_position = position
                selected.append(i)
        position += rows
    if not selected or first_position is None:
        return None
    return Range(selected, first_position, skip)


def parquet_batches(pf: ParquetReader, row_groups: list[int], split: FileSplit,
                    batch_size: int, plan: FilePlan, use_threads: bool | None = None
                    ) -> Iterator[pa.RecordBatch]:
    """The raw batches (at most ``batch_size`` rows; zero-copy slices of larger decodes)
    of ``row_groups``, in ``plan``'s columns; decoded on Arrow's threads (its columns in
    parallel) when ``use_threads``, None: only for splits of at least
    :data:`THREADED_DECODE_BYTES`."""
    if use_threads is None:
        use_threads = split.length >= THREADED_DECODE_BYTES
    return sliced(pf.iter_batches(decode_rows(batch_size), row_groups, column_indices(pf, plan),
                                  use_threads=use_threads),
                  batch_size)


def from_offset(raw_batches: Iterable[pa.RecordBatch], first_position: int, skip: int
                ) -> Iterator[tuple[pa.RecordBatch, int]]:
    """``(raw, position)`` of ``raw_batches`` (read from file position ``first_position``)
    without their first ``skip`` rows (delivered before); ``position`` is the file
    position of ``raw``'s first row."""
    pos = first_position
    for raw in raw_batches:
        n = raw.num_rows
        if skip:
            if skip >= n:
                skip -= n
                pos += n
                continue
            raw = raw.slice(skip)
            pos += skip
            n -= skip
            skip = 0
        yield raw, pos
        pos += n
