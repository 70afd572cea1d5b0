"""The sample: whole files spread evenly over the plan order, the same every time, or a
run of one large file's row groups; the shape from icefloe's plan and the files' footers
(oracle: PyIceberg's plan_files)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icefloe import IcebergSource
from icefloe.local.engine import read_splits
from icefloe.tuning.sample import (
    MIN_WINDOW_GROUPS,
    FileInfo,
    Part,
    files_of,
    is_remote,
    pick,
    row_groups_of,
    sample_parts,
    shape_of,
    window_splits,
)
from tests.helpers.tables import make_table, rows


def infos(n: int, size: int = 100) -> list[FileInfo]:
    return [FileInfo(f"file:///w/{i}.parquet", size, 10, "PARQUET") for i in range(n)]


def test_pick_spreads_over_the_whole_plan_and_is_deterministic() -> None:
    files = infos(100)
    chosen = pick(files, 1000)
    assert [f.path for f in chosen] == [f"file:///w/{i}.parquet"
                                        for i in (5, 15, 25, 35, 45, 55, 65, 75, 85, 95)]
    assert pick(files, 1000) == chosen
    assert pick(files, 10**9) == files
    assert pick(files, 1) == [files[50]]  # at least one file, from the middle


def test_is_remote() -> None:
    assert is_remote("s3://bucket/x.parquet")
    assert not is_remote("file:///tmp/x.parquet") and not is_remote("/tmp/x.parquet")


def test_files_and_shape_of_a_real_table(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    for i in range(3):
        table.append(rows(100 + i, start=1000 * i))
    source = IcebergSource("db.events", catalog=catalog, options={"splitSize": "1"})
    splits = list(source.plan())
    files = files_of(splits)
    expected = {t.file.file_path: t.file for t in table.scan().plan_files()}
    assert {f.path for f in files} == set(expected)
    assert len(files) == 3
    for f in files:
        assert f.size == expected[f.path].file_size_in_bytes
        assert f.rows == expected[f.path].record_count
    shape = shape_of(files, files, table.io)
    assert (shape.files, shape.rows, shape.row_groups, shape.remote) == (3, 303, 1, False)
    assert shape.most_splits == 3  # one row group a file
    assert shape.bytes == sum(d.file_size_in_bytes for d in expected.values())
    assert "3 files" in shape.describe() and "local disk" in shape.describe()


def _groups(n: int, size: int) -> list[tuple[int, int]]:
    """``n`` row groups of ``size`` bytes and 100 rows each, the first at byte 4."""
    return [(4 + i * size, 100) for i in range(n)]


def test_a_large_file_is_sampled_as_a_run_of_its_middle_row_groups() -> None:
    big = FileInfo("s3://b/big.parquet", 16 * 1000 + 100, 1600, "PARQUET")
    parts = sample_parts([big], 4000, lambda f: _groups(16, 1000))
    assert len(parts) == 1 and not parts[0].whole
    part = parts[0]
    assert [g for g, _ in part.groups] == [4 + i * 1000 for i in range(6, 10)]  # centred
    assert (part.start, part.end, part.size, part.rows) == (6004, 10004, 4000, 400)
    assert part.of_groups == 16
    assert sample_parts([big], 4000, lambda f: _groups(16, 1000)) == parts  # deterministic
    fewest = sample_parts([big], 1, lambda f: _groups(16, 1000))[0]
    assert len(fewest.groups) == MIN_WINDOW_GROUPS  # never fewer, however small the target
    last = sample_parts([big], 7000, lambda f: _groups(8, 2000))[0]  # to the file's end
    assert (len(last.groups), last.start) == (4, 4004)


def test_whole_files_where_a_run_of_row_groups_would_not_be_smaller() -> None:
    big = FileInfo("s3://b/big.parquet", 16_000, 1600, "PARQUET")
    assert sample_parts([big], 4000, lambda f: _groups(4, 4000)) == [Part(big)]  # too few
    assert sample_parts([big], 4000, lambda f: None) == [Part(big)]  # no footer
    assert len(sample_parts([big], 9000, lambda f: _groups(16, 1000))[0].groups) == 9
    assert sample_parts([big], 15_600, lambda f: _groups(16, 1000)) == [Part(big)]  # ~all
    files = infos(10, size=1000)
    never: Callable[[FileInfo], None] = lambda f: pytest.fail("no footer needed")  # noqa: E731
    assert sample_parts(files, 3000, never) == [Part(f) for f in pick(files, 3000)]


def test_a_run_of_row_groups_cut_at_any_split_size_reads_exactly_its_rows(
        catalog: SqlCatalog) -> None:
    """The part's splits at every split size, read by the local engine, give the rows of
    its row groups (oracle: PyArrow's reader of those row groups), each once."""
    table = make_table(catalog)
    table.transaction().set_properties(**{"write.parquet.row-group-limit": "500"}) \
        .commit_transaction()
    table.append(rows(8000))
    source = IcebergSource("db.events", catalog=catalog)
    (split,) = list(source.plan())
    info = files_of([split])[0]
    groups = row_groups_of(info, table.io)
    assert groups is not None and len(groups) == 16
    (part,) = sample_parts([info], info.size // 4, lambda f: groups)
    assert len(part.groups) == 4 and not part.whole
    with table.io.new_input(info.path).open(seekable=True) as stream:
        oracle = pq.ParquetFile(stream).read_row_groups(range(6, 10)).column("id")
    context = source.bounded_plan().context
    for split_size in (1, 3 * (part.size // 8), part.size // 2, part.size, 1 << 30):
        splits = window_splits(part, split, split_size)
        assert splits[0].start == part.start and splits[-1].end == part.end
        assert all(a.end == b.start for a, b in itertools.pairwise(splits))
        assert len({s.split_id for s in splits}) == len(splits)
        assert sum(s.record_count for s in splits) == part.rows == 2000
        ids = [v for item in read_splits(splits, context, 2)
               for v in item.batch.column("id").to_pylist()]
        assert sorted(ids) == sorted(oracle.to_pylist()), split_size
    assert len(window_splits(part, split, 1)) == 4  # one split a row group
    assert len(window_splits(part, split, 1 << 30)) == 1
    # splitSize=auto: a file the adaptive split size cut into 8 (pieces of 2 row groups),
    # its window of 4 row groups into 2; into 16, 4; into 2 (half a file), 1
    for file_splits, pieces in ((8, 2), (16, 4), (2, 1), (1, 1)):
        splits = window_splits(part, split, 1 << 30, file_splits)
        assert len(splits) == pieces, file_splits
        assert splits[0].start == part.start and splits[-1].end == part.end
        assert sum(s.record_count for s in splits) == 2000
        ids = [v for item in read_splits(splits, context, 2)
               for v in item.batch.column("id").to_pylist()]
        assert sorted(ids) == sorted(oracle.to_pylist()), file_splits
