"""What the tuner measures: the table's shape and a deterministic sample of its files.

Runs on the driver. The shape comes from the plan's splits (icefloe's own planner, so the
files, sizes and record counts are the ones a read would see, filter and snapshot
included) and, for the row groups per file, from the Parquet footers of a few sampled
files (read through the table's FileIO: the user's own storage).

The sample is whole files, spread evenly over the plan order (every k-th file: across
partitions, snapshots and manifests, never just the first ones), so the same table and
options give the same sample in any process, and a ``splitSize`` setting still decides
how those files are cut. When one file alone is more than the sample's bytes (a
table of one or a few large files: a read of a whole 1 GB file takes seconds), the sample
is a run of that file's row groups from its middle (:class:`Part`, at least
:data:`MIN_WINDOW_GROUPS` of them), which every setting cuts as the planner cuts a file
(:func:`window_splits`): row groups of one file are written alike, so a run of them reads
as the whole file does, per byte, with the same split boundaries relative to the row groups.
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from icefloe.splits.sizing import balanced_ranges, byte_ranges
from icefloe.splits.split import FileSplit

log = logging.getLogger(__name__)

FOOTERS_READ = 5
"""Parquet footers read for the row groups per file (spread over the sample)."""
MIN_WINDOW_GROUPS = 4
"""Fewest row groups of a sample that is part of a file: enough for 4 reader threads (or
tasks) at one row group a split, and for ``splitSize`` values that group them."""

RowGroups = list[tuple[int, int]]
"""A Parquet file's row groups: ``(first byte, rows)`` each, in file order."""


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One data file of the plan: its location, bytes and records."""

    path: str
    size: int
    rows: int
    file_format: str


@dataclass(frozen=True, slots=True)
class TableShape:
    """What decides the knobs' grid (:mod:`icefloe.tuning.grid`).

    Attributes:
        files: data files of the read.
        bytes: their bytes on storage.
        rows: their records.
        median_file_bytes: the median file size.
        max_file_bytes: the largest file.
        row_groups: the median row groups per file (Parquet footers of sampled files; 1
            when unknown: ORC / Avro files, or no footer could be read).
        remote: the files are on an object store (not a local filesystem).
        most_splits: the most splits the read can be cut into (a split holds at least a
            row group: files x the most row groups a footer read showed), or 0 when
            unknown (a file not Parquet, or a footer not read).
    """

    files: int
    bytes: int
    rows: int
    median_file_bytes: int
    max_file_bytes: int
    row_groups: int
    remote: bool
    most_splits: int = 0

    def describe(self) -> str:
        """One line: ``394 files, 12.3 MB (median 31.2 kB, largest 40.0 kB), ...``."""
        groups = "row group" if self.row_groups == 1 else "row groups"
        return (f"{self.files:,} files, {human_bytes(self.bytes)} (median "
                f"{human_bytes(self.median_file_bytes)}, largest "
                f"{human_bytes(self.max_file_bytes)}), {self.rows:,} rows, "
                f"{self.row_groups} {groups} per file, "
                f"{'object store' if self.remote else 'local disk'}")


def human_bytes(n: float) -> str:
    """``1.5 MB`` (decimal units, as throughput is given in MB/s)."""
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{int(n)} B"


def files_of(splits: Iterable[FileSplit]) -> list[FileInfo]:
    """The data files of ``splits``, once each, in plan order (a file cut into several
    splits appears at its first split)."""
    seen: dict[str, FileInfo] = {}
    for split in splits:
        if split.file_path not in seen:
            seen[split.file_path] = FileInfo(split.file_path, split.file_size,
                                             split.file_record_count, split.file_format)
    return list(seen.values())


def pick(files: Sequence[FileInfo], target_bytes: int) -> list[FileInfo]:
    """About ``target_bytes`` of ``files``: every k-th file in plan order (at least one,
    all of them when they add up to less). Deterministic: same files, same sample."""
    total = sum(f.size for f in files)
    if not files or total <= target_bytes:
        return list(files)
    count = max(1, min(len(files), round(target_bytes * len(files) / max(total, 1))))
    step = len(files) / count
    chosen = sorted({min(len(files) - 1, int((i + 0.5) * step)) for i in range(count)})
    return [files[i] for i in chosen]


def is_remote(path: str) -> bool:
    """Whether ``path`` is on an object store (any scheme but ``file`` or none)."""
    return urlparse(path).scheme not in ("", "file")


def shape_of(files: Sequence[FileInfo], sample: Sequence[FileInfo], io: Any) -> TableShape:
    """The shape of the read whose data files are ``files`` (``sample`` gives the footers
    read, through the table's FileIO ``io``)."""
    sizes = [f.size for f in files] or [0]
    counts = _row_groups(sample, io)
    parquet = all(f.file_format.upper() == "PARQUET" for f in files)
    return TableShape(
        files=len(files), bytes=sum(sizes), rows=sum(f.rows for f in files),
        median_file_bytes=int(statistics.median(sizes)), max_file_bytes=max(sizes),
        row_groups=max(1, int(statistics.median(counts))) if counts else 1,
        remote=any(is_remote(f.path) for f in files[:100]),
        most_splits=len(files) * max(counts) if counts and parquet else 0)


def _row_groups(sample: Sequence[FileInfo], io: Any) -> list[int]:
    parquet = [f for f in sample if f.file_format.upper() == "PARQUET"]
    step = max(1, len(parquet) // FOOTERS_READ)
    counts = []
    for info in parquet[::step][:FOOTERS_READ]:
        groups = row_groups_of(info, io)
        if groups is not None:
            counts.append(len(groups))
    return counts


def row_groups_of(info: FileInfo, io: Any) -> RowGroups | None:
    """The row groups of ``info`` from its Parquet footer (read through the table's FileIO
    ``io``), or None: not Parquet, or the footer cannot be read (logged)."""
    if info.file_format.upper() != "PARQUET":
        return None
    try:
        import pyarrow.parquet as pq

        from icefloe.reader.ranges import row_group_start

        with io.new_input(info.path).open(seekable=True) as stream:
            md = pq.ParquetFile(stream).metadata
            return [(row_group_start(md.row_group(i)), md.row_group(i).num_rows)
                    for i in range(md.num_row_groups)]
    except Exception as exc:  # the shape only chooses a grid: go on without it
        log.info("cannot read the footer of %s (%s): row groups unknown", info.path, exc)
        return None


@dataclass(frozen=True, slots=True)
class Part:
    """One file of the sample: all of it (``groups`` empty), or the row groups
    ``groups`` of it, which lie in bytes ``[start, end)`` (``end`` exclusive: the next
    row group's first byte, or the file's size)."""

    file: FileInfo
    start: int = 0
    end: int = 0
    groups: tuple[tuple[int, int], ...] = ()
    of_groups: int = 0

    @property
    def whole(self) -> bool:
        return not self.groups

    @property
    def size(self) -> int:
        """Bytes of storage the part covers."""
        return self.file.size if self.whole else self.end - self.start

    @property
    def rows(self) -> int:
        return self.file.rows if self.whole else sum(r for _, r in self.groups)


def sample_parts(files: Sequence[FileInfo], target_bytes: int,
                 groups_of: Callable[[FileInfo], RowGroups | None]) -> list[Part]:
    """About ``target_bytes`` of ``files``: the files :func:`pick` chooses, whole; or when
    it chooses one file larger than the target with more than :data:`MIN_WINDOW_GROUPS`
    row groups (``groups_of``: its footer's), a run of about the target's bytes of its
    row groups (at least :data:`MIN_WINDOW_GROUPS`; the whole file when that rounds to
    all of them), centred in the file. Deterministic: same files and target, same
    parts."""
    chosen = pick(files, target_bytes)
    if len(chosen) != 1 or chosen[0].size <= target_bytes:
        return [Part(f) for f in chosen]
    info = chosen[0]
    groups = groups_of(info)
    if not groups or len(groups) <= MIN_WINDOW_GROUPS:
        return [Part(info)]
    count = max(MIN_WINDOW_GROUPS, round(target_bytes * len(groups) / max(info.size, 1)))
    if count >= len(groups):
        return [Part(info)]
    first = (len(groups) - count) // 2
    last = first + count  # exclusive
    start = 0 if first == 0 else groups[first][0]
    end = info.size if last == len(groups) else groups[last][0]
    return [Part(info, start, end, tuple(groups[first:last]), len(groups))]


def window_splits(part: Part, split: FileSplit, split_size: int,
                  file_splits: int | None = None) -> list[FileSplit]:
    """The splits of ``part`` (a run of row groups) at ``split_size``, cut as the planner
    cuts a file (:func:`icefloe.splits.sizing.byte_ranges` on the row groups' first
    bytes), each from ``split`` (one of the file's planned splits: its deletes,
    partition, snapshot), with the exact rows of the row groups it holds.

    ``file_splits``: the file was cut by the adaptive split size into that many splits
    (``splitSize=auto``); the window is cut into as many pieces as its share of the file
    (rounded, at least one), at the row groups nearest to equal parts
    (:func:`icefloe.splits.sizing.balanced_ranges`), so its splits are about as long as
    the file's."""
    offsets = [g - part.start for g, _ in part.groups]
    size = part.end - part.start
    if file_splits is None:
        ranges = byte_ranges(size, offsets, split_size)
    else:
        pieces = max(1, round(size * file_splits / max(part.file.size, 1)))
        ranges = balanced_ranges(size, offsets, pieces)
    out = []
    for i, (rel, length) in enumerate(ranges):
        start = part.start + rel
        rows = sum(r for g, r in part.groups if start <= g < start + length)
        out.append(dataclasses.replace(
            split, split_id=f"{split.split_id}@{start}+{length}", start=start,
            length=length, record_count=rows, ordinal=split.ordinal + i, resume_rows=0))
    return out
