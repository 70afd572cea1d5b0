"""Split sizing: byte ranges on row-group boundaries, packing, and real multi-row-group files."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from icefloe import IcebergSource
from icefloe.reader.split_reader import SplitReader
from icefloe.splits import DeleteFileRef, FileSplit, byte_ranges, pack
from icefloe.splits.sizing import (
    ADAPTIVE_MIN_SPLIT_BYTES,
    AdaptiveCut,
    balanced_ranges,
    prorate,
)
from tests.conftest import assert_same_rows
from tests.helpers.tables import live_data_files, make_table, rows


def _covers(ranges: list[tuple[int, int]], file_size: int) -> None:
    assert ranges[0][0] == 0
    for (start, length), (nxt, _) in itertools.pairwise(ranges):
        assert length > 0
        assert start + length == nxt
    assert sum(length for _, length in ranges) == file_size


def test_small_file_is_one_range() -> None:
    assert byte_ranges(100, [4, 50], 100) == [(0, 100)]
    assert byte_ranges(100, None, 1000) == [(0, 100)]


def test_ranges_start_on_row_group_offsets() -> None:
    # row groups at 4, 30, 60, 90; footer after 120
    assert byte_ranges(130, [4, 30, 60, 90], 50) == [(0, 60), (60, 70)]
    assert byte_ranges(130, [4, 30, 60, 90], 1) == [(0, 30), (30, 30), (60, 30), (90, 40)]
    # unsorted, duplicated and out-of-file offsets are ignored
    assert byte_ranges(130, [90, 30, 30, 4, 500, -1, 60], 1) == [(0, 30), (30, 30), (60, 30),
                                                                (90, 40)]


def test_ranges_without_offsets_are_fixed_size() -> None:
    assert byte_ranges(250, None, 100) == [(0, 100), (100, 100), (200, 50)]
    assert byte_ranges(250, [], 100) == [(0, 100), (100, 100), (200, 50)]


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.integers(min_value=1, max_value=10_000),
    st.lists(st.integers(min_value=0, max_value=12_000), max_size=30),
    st.integers(min_value=1, max_value=5_000),
)
def test_ranges_cover_the_file_exactly_once(file_size: int, offsets: list[int],
                                             split_size: int) -> None:
    ranges = byte_ranges(file_size, offsets, split_size)
    _covers(ranges, file_size)
    if file_size > split_size and offsets:
        allowed = {0} | {o for o in offsets if o < file_size}
        assert {start for start, _ in ranges} <= allowed
        for _start, length in ranges[:-1]:
            assert length >= split_size


def _split(i: int, length: int, deletes: int = 0) -> FileSplit:
    delete_files = tuple(
        DeleteFileRef(f"/d{i}-{k}.parquet", 1, "PARQUET", 2, 1, 10) for k in range(deletes)
    )
    return FileSplit(
        split_id=str(i), file_path=f"/f{i}.parquet", file_format="PARQUET", start=0,
        length=length, record_count=1, file_size=length, file_record_count=1, spec_id=0,
        partition=(), snapshot_id=1, sequence_number=1, ordinal=i, delete_files=delete_files,
    )


def _ids(tasks: list[list[FileSplit]]) -> list[list[str]]:
    return [[s.split_id for s in task] for task in tasks]


@given(st.integers(0, 10**12), st.lists(st.integers(0, 2**34), min_size=1, max_size=40))
def test_prorated_records_sum_to_the_file_and_follow_the_bytes(
        records: int, lengths: list[int]) -> None:
    shares = prorate(records, lengths)
    assert len(shares) == len(lengths)
    assert sum(shares) == records
    assert all(n >= 0 for n in shares)
    total = sum(lengths)
    if total:
        for share, length in zip(shares, lengths, strict=True):  # off by less than one
            assert abs(share - records * length / total) < 1 + 1e-9 * records


def test_prorated_records_of_the_matrix_file() -> None:
    # 256 MB x 4 cut in two: the old per-split rounding gave 5,120,000 + 5,119,999
    assert prorate(10_240_000, [128_000_001, 128_000_000]) == [5_120_000, 5_120_000]
    assert prorate(7, [1]) == [7]
    assert prorate(3, [10, 10, 10, 10]) == [0, 1, 1, 1]


def test_pack_keeps_order_and_target() -> None:
    splits = [_split(0, 40), _split(1, 40), _split(2, 40), _split(3, 10), _split(4, 200),
              _split(5, 10)]
    tasks = list(pack(splits, target_size=100, open_file_cost=1))
    assert _ids(tasks) == [["0", "1"], ["2", "3"], ["4"], ["5"]]
    assert [s for task in tasks for s in task] == splits


def test_pack_open_file_cost_and_delete_weight() -> None:
    tiny = [_split(i, 1) for i in range(10)]
    assert [len(t) for t in pack(tiny, target_size=100, open_file_cost=25)] == [4, 4, 2]
    # delete files count toward a split's weight (10 bytes each)
    assert _split(0, 50, deletes=3).weight == 80
    heavy = [_split(0, 50, deletes=3), _split(1, 50)]
    assert _ids(list(pack(heavy, target_size=100, open_file_cost=1))) == [["0"], ["1"]]


def test_pack_nothing() -> None:
    assert list(pack([], target_size=10, open_file_cost=1)) == []


# --------------------------------------------------------------------------- real files


def _big_table_by_property(catalog: SqlCatalog) -> Table:
    table = make_table(catalog)
    table.transaction().set_properties(**{"write.parquet.row-group-limit": "100"}) \
        .commit_transaction()
    table.append(rows(1000))
    return table


def _big_table_by_add_files(catalog: SqlCatalog, tmp_path: Path) -> Table:
    table = make_table(catalog)
    path = tmp_path / "big.parquet"
    pq.write_table(rows(1000, start=5000), path, row_group_size=150)
    table.add_files([f"file://{path}"])
    return table


@pytest.fixture(params=["row-group-limit", "add_files"])
def big_table(request: pytest.FixtureRequest, catalog: SqlCatalog, tmp_path: Path) -> Table:
    if request.param == "row-group-limit":
        return _big_table_by_property(catalog)
    return _big_table_by_add_files(catalog, tmp_path)


def _local(path: str) -> str:
    return path.removeprefix("file://")


def _row_group_rows(path: str, groups: list[int]) -> pa.Table:
    pf = pq.ParquetFile(_local(path))
    return pa.concat_tables([pf.read_row_group(i) for i in groups]) if groups else \
        pf.schema_arrow.empty_table()


@pytest.mark.parametrize("split_size", [1, 3000])
def test_big_file_is_cut_on_row_group_boundaries(big_table: Table, catalog: SqlCatalog,
                                                  split_size: int) -> None:
    (data_file,) = live_data_files(big_table).values()
    offsets = list(data_file.split_offsets or [])
    pf = pq.ParquetFile(_local(data_file.file_path))
    assert pf.metadata.num_row_groups == len(offsets) > 3

    source = IcebergSource("db.events", catalog=catalog, options={"splitSize": str(split_size)})
    plan = source.bounded_plan()
    splits = list(plan.splits())
    assert len(splits) > 1
    if split_size == 1:
        assert len(splits) == len(offsets)
    assert [s.ordinal for s in splits] == list(range(len(splits)))
    assert len({s.split_id for s in splits}) == len(splits)
    assert sum(s.length for s in splits) == data_file.file_size_in_bytes
    # the pro-rated estimates add up to the manifest's count (a rounding per split lost one)
    assert sum(s.record_count for s in splits) == data_file.record_count == 1000
    assert all(s.file_record_count == 1000 for s in splits)

    reader = SplitReader(plan.context)
    seen: list[pa.Table] = []
    for split in splits:
        assert split.start == 0 or split.start in offsets
        groups = [i for i, o in enumerate(offsets) if split.start <= o < split.end]
        assert groups, "every split holds at least one row group"
        got = pa.Table.from_batches(list(reader.read(split)), schema=plan.context.arrow_schema)
        expected = _row_group_rows(data_file.file_path, groups)
        assert got.column("id").to_pylist() == expected.column("id").to_pylist()
        seen.append(got)
    # every row exactly once, against PyIceberg's scan
    assert_same_rows(pa.concat_tables(seen), big_table.scan().to_arrow())


def test_fixed_ranges_read_every_row_group_once(big_table: Table, catalog: SqlCatalog) -> None:
    """Ranges that ignore row-group offsets (a file without split_offsets) lose no row."""
    (data_file,) = live_data_files(big_table).values()
    plan = IcebergSource("db.events", catalog=catalog).bounded_plan()
    (whole,) = list(plan.splits())
    reader = SplitReader(plan.context)
    ids: list[int] = []
    for start, length in byte_ranges(data_file.file_size_in_bytes, None, 777):
        part = dataclasses.replace(whole, start=start, length=length)
        ids += [i for b in reader.read(part) for i in b.column("id").to_pylist()]
    assert sorted(ids) == sorted(big_table.scan().to_arrow().column("id").to_pylist())
    assert len(ids) == len(set(ids)) == 1000


def test_packing_a_real_plan(big_table: Table, catalog: SqlCatalog) -> None:
    source = IcebergSource("db.events", catalog=catalog, options={"splitSize": "1"})
    splits = list(source.plan())
    # the last split also holds the footer: size tasks by the first split (one row group)
    tasks = list(pack(splits, target_size=3 * splits[0].length, open_file_cost=1))
    assert 1 < len(tasks) < len(splits)
    assert [s for task in tasks for s in task] == splits


# --------------------------------------------------------------------------- adaptive cut


def test_balanced_ranges_cut_at_the_nearest_row_group_start() -> None:
    offsets = [4, 30, 60, 90]
    assert balanced_ranges(130, offsets, 2) == [(0, 60), (60, 70)]
    assert balanced_ranges(130, offsets, 3) == [(0, 30), (30, 60), (90, 40)]
    # more pieces than row groups: one range a row group (the first start is no cut)
    assert balanced_ranges(130, offsets, 8) == [(0, 30), (30, 30), (60, 30), (90, 40)]
    assert balanced_ranges(100, [4], 4) == [(0, 100)]
    assert balanced_ranges(130, offsets, 1) == [(0, 130)]


def test_balanced_ranges_without_offsets_are_fixed_size() -> None:
    assert balanced_ranges(250, None, 3) == [(0, 84), (84, 84), (168, 82)]
    assert balanced_ranges(250, [], 1) == [(0, 250)]


@settings(max_examples=200, deadline=None)
@given(file_size=st.integers(2, 10_000),
       offsets=st.lists(st.integers(0, 10_000), max_size=30),
       pieces=st.integers(1, 40))
def test_balanced_ranges_cover_the_file_on_offsets(file_size: int, offsets: list[int],
                                                   pieces: int) -> None:
    ranges = balanced_ranges(file_size, offsets, pieces)
    _covers(ranges, file_size)
    assert len(ranges) <= pieces
    inside = [o for o in offsets if 0 <= o < file_size]
    if inside:  # every range starts at 0 or at a row group's first byte
        assert all(start == 0 or start in inside for start, _ in ranges)


def test_adaptive_pieces() -> None:
    mib = 1024 * 1024
    cut = AdaptiveCut(scan_bytes=256 * mib, splits=8)
    assert cut.min_bytes == ADAPTIVE_MIN_SPLIT_BYTES == 32 * mib
    assert cut.pieces(256 * mib, 128 * mib) == 8  # one file: all of the count
    assert cut.pieces(128 * mib, 128 * mib) == 4  # half the scan: half of it
    assert cut.pieces(80 * mib, 128 * mib) == 2  # at most one piece per 32 MiB
    assert cut.pieces(40 * mib, 128 * mib) == 1  # a small file (an append) is never cut
    assert cut.pieces(1, 128 * mib) == 1
    # never a piece larger than the configured size
    assert AdaptiveCut(1024 * mib, 2).pieces(1024 * mib, 128 * mib) == 8
