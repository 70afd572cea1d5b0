"""The sample: whole files spread evenly over the plan order, the same every time; the
shape from icefloe's plan and the files' footers (oracle: PyIceberg's plan_files)."""

from __future__ import annotations

from pyiceberg.catalog.sql import SqlCatalog

from icefloe import IcebergSource
from icefloe.tuning.sample import FileInfo, files_of, is_remote, pick, shape_of
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
    assert shape.bytes == sum(d.file_size_in_bytes for d in expected.values())
    assert "3 files" in shape.describe() and "local disk" in shape.describe()
