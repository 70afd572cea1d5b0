"""What the tuner measures: the table's shape and a deterministic sample of its files.

Runs on the driver. The shape comes from the plan's splits (icefloe's own planner, so the
files, sizes and record counts are the ones a read would see, filter and snapshot
included) and, for the row groups per file, from the Parquet footers of a few sampled
files (read through the table's FileIO: the user's own storage).

The sample is whole files, spread evenly over the plan order (every k-th file: across
partitions, snapshots and manifests, never just the first ones), so the same table and
options give the same sample in any process, and a ``splitSize`` setting still decides
how those files are cut.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from icefloe.splits.split import FileSplit

log = logging.getLogger(__name__)

FOOTERS_READ = 5
"""Parquet footers read for the row groups per file (spread over the sample)."""


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
    """

    files: int
    bytes: int
    rows: int
    median_file_bytes: int
    max_file_bytes: int
    row_groups: int
    remote: bool

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
    return TableShape(
        files=len(files), bytes=sum(sizes), rows=sum(f.rows for f in files),
        median_file_bytes=int(statistics.median(sizes)), max_file_bytes=max(sizes),
        row_groups=_row_groups(sample, io), remote=any(is_remote(f.path) for f in files[:100]))


def _row_groups(sample: Sequence[FileInfo], io: Any) -> int:
    parquet = [f for f in sample if f.file_format.upper() == "PARQUET"]
    if not parquet:
        return 1
    step = max(1, len(parquet) // FOOTERS_READ)
    counts = []
    for info in parquet[::step][:FOOTERS_READ]:
        try:
            import pyarrow.parquet as pq

            with io.new_input(info.path).open(seekable=True) as stream:
                counts.append(pq.ParquetFile(stream).metadata.num_row_groups)
        except Exception as exc:  # the shape only chooses a grid: go on without it
            log.info("cannot read the footer of %s (%s): row groups unknown", info.path, exc)
    return max(1, int(statistics.median(counts))) if counts else 1
