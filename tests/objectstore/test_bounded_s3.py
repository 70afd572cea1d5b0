"""Bounded reads of a table in S3, behind the REST catalog and behind a SQL catalog:
head, time travel, refs, ranges, position and equality deletes, projection and filters,
each checked against PyIceberg's own scan of the same table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from icefloe import IcebergSource
from tests.conftest import assert_same_rows
from tests.helpers.parallelism import record_parallelism
from tests.helpers.tables import rows
from tests.objectstore.conftest import History, S3Catalog, oracle


def _read(history: History, case: S3Catalog, **options: object) -> pa.Table:
    return IcebergSource(history.identifier, options=case.options(**options)).to_arrow()


def test_head_with_both_kinds_of_deletes(s3_catalog: S3Catalog, history: History) -> None:
    assert history.table.metadata.location.startswith("s3://")
    got = _read(history, s3_catalog)
    expected = oracle(history)
    assert_same_rows(got, expected)
    assert not history.eq_deleted & set(got.column("id").to_pylist())


@pytest.mark.parametrize("name", ["s1", "s2", "s3", "s4"])
def test_time_travel_by_snapshot_id(s3_catalog: S3Catalog, history: History,
                                    name: str) -> None:
    snapshot_id = history.s[name]
    assert_same_rows(_read(history, s3_catalog, snapshotId=str(snapshot_id)),
                     oracle(history, snapshot_id))


def test_time_travel_by_timestamp(s3_catalog: S3Catalog, history: History) -> None:
    s2 = history.table.metadata.snapshot_by_id(history.s["s2"])
    assert s2 is not None
    got = _read(history, s3_catalog, asOfTimestamp=str(s2.timestamp_ms))
    assert_same_rows(got, oracle(history, history.s["s2"]))


def test_tag_and_branch(s3_catalog: S3Catalog, history: History) -> None:
    assert_same_rows(_read(history, s3_catalog, tag="t1"), oracle(history, history.s["s1"]))
    on_branch = _read(history, s3_catalog, branch="b1")
    assert_same_rows(on_branch,
                     history.table.scan(snapshot_id=history.branch_head).to_arrow())
    assert on_branch.num_rows == 140  # the branch's own append is there, main's deletes not


@pytest.mark.parametrize(("start", "end"), [("s1", "s2"), ("s4", "s5"), (None, "s2")])
def test_append_ranges(s3_catalog: S3Catalog, history: History, start: str | None,
                       end: str) -> None:
    options = {"endSnapshotId": str(history.s[end])}
    if start is not None:
        options["startSnapshotId"] = str(history.s[start])
    expected = history.table.incremental_append_scan(
        from_snapshot_id_exclusive=history.s[start] if start else None,
        to_snapshot_id_inclusive=history.s[end]).to_arrow()
    assert expected.num_rows > 0
    assert_same_rows(_read(history, s3_catalog, **options), expected)


def test_projection_and_filter(s3_catalog: S3Catalog, history: History) -> None:
    got = _read(history, s3_catalog, columns="id,kind", filter="kind = 'b' AND id >= 30")
    full = oracle(history)
    mask = pc.and_(pc.equal(full.column("kind"), "b"), pc.greater_equal(full.column("id"), 30))
    assert_same_rows(got, full.filter(mask).select(["id", "kind"]))


def test_catalog_by_name_from_environment_through_the_cli(
        s3_catalog: S3Catalog, history: History, tmp_path: Path) -> None:
    """PyIceberg reads ``PYICEBERG_CATALOG__*`` once, at import: a new process (the CLI)."""
    name = s3_catalog.catalog.name  # a SQL catalog keys its tables by catalog name
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYICEBERG_")}
    for key, value in s3_catalog.properties.items():
        env_key = key.replace(".", "__").replace("-", "_").upper()
        env[f"PYICEBERG_CATALOG__{name.upper()}__{env_key}"] = value
    out = tmp_path / "out.parquet"
    done = subprocess.run(
        [sys.executable, "-m", "icefloe.cli", "read", history.identifier, "--catalog", name,
         "--to", str(out), "-q", "-o", f"snapshotId={history.s['s3']}"],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert_same_rows(pq.read_table(out), oracle(history, history.s["s3"]))


def test_catalog_object(s3_catalog: S3Catalog, history: History) -> None:
    got = IcebergSource(history.identifier, catalog=s3_catalog.catalog,
                        options={"snapshotId": str(history.s["s3"])}).to_arrow()
    assert_same_rows(got, oracle(history, history.s["s3"]))


def test_the_default_parallelism_of_a_table_in_s3(s3_catalog: S3Catalog, history: History,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``parallelism``, a table on an object store is read by
    ``OBJECT_STORE_PARALLELISM`` (4, as the README says) reader threads, with PyIceberg's
    rows; an explicit ``parallelism`` is kept."""
    import icefloe.source as source_module

    threads = record_parallelism(monkeypatch, source_module)
    assert source_module.OBJECT_STORE_PARALLELISM == 4
    source = IcebergSource(history.identifier, options=s3_catalog.options())
    assert_same_rows(pa.Table.from_batches(list(source.read()),
                                           schema=source.schema()), oracle(history))
    assert_same_rows(source.to_arrow(parallelism=2), oracle(history))
    assert threads == [4, 2]


@pytest.mark.parametrize("split_size, expected", [(1024, 2), (1 << 30, 4)])
def test_large_data_files_in_s3_are_read_by_fewer_threads(
        s3_catalog: S3Catalog, monkeypatch: pytest.MonkeyPatch, split_size: int,
        expected: int) -> None:
    """Without ``parallelism``, a table on an object store whose data files average more
    than two splits of ``splitSize`` is read by ``LARGE_FILES_PARALLELISM`` (2) reader
    threads (each split's ranges fetched ahead: more threads only contend for the cores),
    other tables by ``OBJECT_STORE_PARALLELISM`` (4); the rows are PyIceberg's either way.
    (Scaled down: a ~6 KB file against splits of 1 KiB, or of 1 GiB.)"""
    import icefloe.source as source_module

    threads = record_parallelism(monkeypatch, source_module)
    table = s3_catalog.new_table("large")
    table.append(rows(400, start=0))
    table.refresh()
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    size = int(snapshot.summary["total-files-size"])
    assert (size / int(snapshot.summary["total-data-files"]) > 2 * split_size) == (
        expected == 2)
    source = IcebergSource(".".join(table.name()),
                           options=s3_catalog.options(splitSize=str(split_size)))
    got = pa.Table.from_batches(list(source.read()), schema=source.schema())
    assert_same_rows(got, table.scan().to_arrow())
    assert threads == [expected]
    assert source_module.LARGE_FILES_PARALLELISM == 2
