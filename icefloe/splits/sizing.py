"""Split sizing: cut big files on row-group boundaries, pack small splits into tasks.

Runs on the driver / enumerator. Pure functions over metadata: no file is opened.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from icefloe.splits.split import FileSplit


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
