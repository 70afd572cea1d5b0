"""pack_for: packing that keeps every core busy on reads smaller than cores x splitSize."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icefloe.options import SourceOptions
from icefloe.splits import pack, pack_for
from tests.splits.test_sizing import _ids, _split


def test_small_read_spreads_over_min_tasks() -> None:
    splits = [_split(i, 30) for i in range(4)]  # 120 bytes, target 128: pack gives 1 task
    assert len(list(pack(splits, 128, 1))) == 1
    assert _ids(pack_for(splits, 128, 1, min_tasks=2)) == [["0", "1"], ["2", "3"]]
    assert len(pack_for(splits, 128, 1, min_tasks=4)) == 4


def test_big_read_packs_to_the_target() -> None:
    splits = [_split(i, 40) for i in range(20)]  # 800 bytes over 2 tasks would be 400 each
    assert pack_for(splits, 100, 1, min_tasks=2) == list(pack(splits, 100, 1))


def test_open_file_cost_is_a_floor_of_the_target() -> None:
    tiny = [_split(i, 1) for i in range(8)]
    assert [len(t) for t in pack_for(tiny, 100, open_file_cost=25, min_tasks=8)] == [1] * 8
    assert [len(t) for t in pack_for(tiny, 100, open_file_cost=25, min_tasks=2)] == [4, 4]


def test_min_tasks_must_be_positive() -> None:
    with pytest.raises(ValueError, match="min_tasks must be >= 1, got 0"):
        pack_for([], 100, 1, min_tasks=0)


@given(st.lists(st.integers(1, 300), max_size=40), st.integers(1, 8))
def test_order_and_coverage_kept(lengths: list[int], min_tasks: int) -> None:
    splits = [_split(i, n) for i, n in enumerate(lengths)]
    tasks = pack_for(splits, 200, 4, min_tasks)
    assert [s for task in tasks for s in task] == splits
    assert all(task for task in tasks)
    total = sum(max(n, 4) for n in lengths)
    target = min(200, max(4, -(-total // min_tasks)))
    for task in tasks:  # a task over the reduced target holds one split
        assert len(task) == 1 or sum(max(s.weight, 4) for s in task) <= target


def test_default_options_pack_small_files_into_few_tasks() -> None:
    """With the default splitSize and splitOpenFileCost, 10,000 files of 30 KiB (the
    benchmark's small files) make 20 tasks of up to 512 files, not Spark's 313 at 4 MiB: a
    Python read task costs far more to start than a small file to open."""
    options = SourceOptions.parse({})
    small = [_split(i, 30 * 1024) for i in range(10_000)]
    tasks = pack_for(small, options.split_size, options.split_open_file_cost, min_tasks=2)
    assert [len(t) for t in tasks] == [512] * 19 + [272]
    spark_like = pack_for(small, options.split_size, 4 * 1024 * 1024, min_tasks=2)
    assert len(spark_like) == 313
