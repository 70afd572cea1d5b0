"""Split sizing: cut big files on row-group boundaries, pack small splits into tasks.

Runs on the driver / enumerator. Pure functions over metadata: no file is opened.

Two ways to cut a file: by ``splitSize`` (:func:`byte_ranges`: consecutive row groups
grouped until a range reaches it), and, for a bounded read of few splits where the user
set no ``splitSize``, into a number of about equal pieces (:class:`AdaptiveCut`, Iceberg's
adaptive split size: ``read.split.adaptive-size.enabled``, ``TableScanUtil.adjustSplitSize``).
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from icefloe.splits.split import FileSplit

ADAPTIVE_MIN_SPLIT_BYTES = 32 * 1024 * 1024
"""No adaptive piece is smaller than this on average, so a read of small files or small
appends is never cut into tiny splits. Iceberg's ``MIN_SPLIT_SIZE`` is 16 MB; here a
split is a file opened (its footer read, a round trip or two on an object store) by a
Python reader, and 32 MB files cut into 16 MiB pieces read 0.88-0.95x as fast as whole,
on the local disk and on S3 at 10 ms (benchmarks/RESULTS.md, "Session 13 (issue 30): the
adaptive split size")."""


@dataclass(frozen=True, slots=True)
class AdaptiveCut:
    """Iceberg's adaptive split size as a split count: a scan of ``scan_bytes`` that the
    configured ``splitSize`` would cut into fewer than ``splits`` splits is cut into about
    ``splits``, each file into pieces in proportion to its share of the scan.

    Built by the bounded plan (:meth:`icefloe.enumerator.bounded.BoundedPlan.splits`) from
    the splits the configured size gives; a pure value, so the same scan and count cut the
    same ranges in any process.

    Attributes:
        scan_bytes: bytes of every split of the scan at the configured size (> 0).
        splits: the split count wanted (the engine's readers; >= 1).
        min_bytes: the smallest average piece (:data:`ADAPTIVE_MIN_SPLIT_BYTES`).
    """

    scan_bytes: int
    splits: int
    min_bytes: int = ADAPTIVE_MIN_SPLIT_BYTES

    def pieces(self, file_size: int, split_size: int) -> int:
        """How many ranges a file of ``file_size`` bytes is cut into: its share of
        :attr:`splits` (rounded up), at most one per :attr:`min_bytes`, at least as many
        as ``split_size`` gives (a piece is never larger than the configured size)."""
        share = -(-file_size * self.splits // max(self.scan_bytes, 1))
        most = max(1, file_size // self.min_bytes)
        least = -(-file_size // max(split_size, 1))
        return max(1, least, min(share, most))


def prorate(records: int, lengths: Sequence[int]) -> list[int]:
    """A file's ``records`` shared among its ranges of ``lengths`` bytes in proportion to
    their bytes (a split's ``record_count`` where the file is cut: the manifest gives the
    file's count, not its row groups'): each range's share is the rounded-down running
    share at its end less the one at its start, so the shares sum to ``records`` exactly
    (a per-range rounding down lost up to one record per range: 10,239,999 of 10,240,000
    on the matrix's 256 MB x 4). One range gets them all."""
    total = sum(lengths)
    if len(lengths) == 1 or total <= 0:
        return [records] + [0] * (len(lengths) - 1)
    shares, before, at = [], 0, 0
    for length in lengths:
        at += length
        upto = records * at // total
        shares.append(upto - before)
        before = upto
    return shares


def balanced_ranges(
    file_size: int, split_offsets: Sequence[int] | None, pieces: int
) -> list[tuple[int, int]]:
    """Cut ``[0, file_size)`` into about ``pieces`` ``(start, length)`` ranges of about equal
    bytes.

    With ``split_offsets`` (the row groups' first bytes), every cut is at the row-group
    start nearest to ``i * file_size / pieces`` (i = 1 .. pieces - 1), so each range holds
    whole row groups and a file of fewer row groups than ``pieces`` gives one range per
    row group. Without offsets, ranges are fixed size (a reader assigns a row group to
    the range holding its first byte, as :func:`byte_ranges`). The ranges are
    consecutive, start at 0 and end at ``file_size``.
    """
    if pieces <= 1 or file_size <= 1:
        return [(0, file_size)]
    if not split_offsets:
        step = -(-file_size // pieces)
        return [(start, min(step, file_size - start)) for start in range(0, file_size, step)]
    # the first row group's start is no cut (the magic bytes before it hold none), as in
    # byte_ranges
    starts = sorted({o for o in split_offsets if 0 <= o < file_size})[1:]
    cuts: list[int] = []
    for i in range(1, pieces):
        ideal = i * file_size // pieces
        at = bisect_left(starts, ideal)
        near = [starts[j] for j in (at - 1, at) if 0 <= j < len(starts)]
        if not near:
            continue
        cut = min(near, key=lambda o: (abs(o - ideal), o))
        if not cuts or cut > cuts[-1]:
            cuts.append(cut)
    bounds = [0, *cuts, file_size]
    return [(a, b - a) for a, b in itertools.pairwise(bounds)]


def byte_ranges(
    file_size: int, split_offsets: Sequence[int] | None, split_size: int
) -> list[tuple[int, int]]:
    """Cut ``[0, file_size)`` into ``(start, length)`` ranges of about ``split_size`` bytes.

    With ``split_offsets`` (row-group start offsets recorded in the manifest), ranges
    start only at those offsets, so each holds whole row groups; consecutive row groups
    are grouped until a range reaches ``split_size``. Without offsets, ranges are fixed
    size (a reader assigns each row group to the range holding its first byte, so no
    row group is read twice or lost). A file no bigger than ``split_size`` is one range.
    """
    if file_size <= split_size:
        return [(0, file_size)]
    if split_offsets:
        starts = sorted({o for o in split_offsets if 0 <= o < file_size})
        # the first range starts at byte 0 with the first row group: the magic bytes before
        # it are no range of their own (one would hold no row group)
        offsets = [0, *starts[1:]]
        ranges: list[tuple[int, int]] = []
        range_start = 0
        for nxt in offsets[1:]:
            if nxt - range_start >= split_size:
                ranges.append((range_start, nxt - range_start))
                range_start = nxt
        ranges.append((range_start, file_size - range_start))
        return ranges
    return [
        (start, min(split_size, file_size - start)) for start in range(0, file_size, split_size)
    ]


def pack(
    splits: Iterable[FileSplit], target_size: int, open_file_cost: int
) -> Iterator[list[FileSplit]]:
    """Group consecutive splits into engine tasks of about ``target_size`` bytes.

    Order is kept (task i holds splits before task i+1's), so packing never changes
    what a deterministic plan means. Each split weighs at least ``open_file_cost``;
    a split heavier than the target is a task of its own.
    """
    task: list[FileSplit] = []
    task_weight = 0
    for split in splits:
        weight = max(split.weight, open_file_cost)
        if task and task_weight + weight > target_size:
            yield task
            task, task_weight = [], 0
        task.append(split)
        task_weight += weight
    if task:
        yield task


def pack_for(
    splits: Iterable[FileSplit], target_size: int, open_file_cost: int, min_tasks: int
) -> list[list[FileSplit]]:
    """:func:`pack` with a smaller target when that gives at least ``min_tasks`` tasks.

    As Spark's file sources size their partitions: the target is
    ``min(target_size, max(open_file_cost, total_weight / min_tasks))``, so a read smaller
    than ``min_tasks`` x ``target_size`` still spreads over every core, and a big read
    packs to ``target_size``. Splits are never cut further (a split is one task at most),
    and order is kept. Materialises the splits (the engine needs the task list anyway).
    """
    if min_tasks < 1:
        raise ValueError(f"min_tasks must be >= 1, got {min_tasks}")
    listed = list(splits)
    total = sum(max(s.weight, open_file_cost) for s in listed)
    target = min(target_size, max(open_file_cost, -(-total // min_tasks)))
    return list(pack(listed, target, open_file_cost))
