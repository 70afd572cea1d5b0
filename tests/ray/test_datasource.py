"""icefloe.ray.read: bounded reads as a Ray Dataset, checked against PyIceberg's scans."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
import ray
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import IntegerType, LongType, NestedField, StringType
from ray.data.expressions import col

import icefloe.ray
from icefloe.ray.datasource import IcefloeDatasource, read_task_blocks
from icefloe.splits import deserialize_split
from tests.conftest import assert_same_rows, sorted_rows
from tests.helpers.tables import add_position_deletes, live_data_files, make_table, rows
from tests.ray.conftest import RAY_WARNINGS

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]



def _collect(ds: ray.data.Dataset) -> pa.Table:
    tables = ray.get(ds.to_arrow_refs())
    tables = [t for t in tables if t.num_rows or t.num_columns]
    return pa.concat_tables(tables) if tables else pa.table({})


def _head(table: Table) -> int:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id



def test_partitioned_matches_pyiceberg(catalog: SqlCatalog, partitioned: Table) -> None:
    ds = icefloe.ray.read("db.events", catalog=catalog, options={"splitSize": "1"})
    assert_same_rows(_collect(ds), partitioned.scan().to_arrow())


def test_read_tasks_carry_split_bytes_and_honest_metadata(catalog: SqlCatalog,
                                                           partitioned: Table) -> None:
    source = IcefloeDatasource("db.events", catalog=catalog)
    tasks = source.get_read_tasks(4)
    assert 4 <= len(tasks) < 9  # packed (by splitSize, down to the parallelism asked)
    files = set(live_data_files(partitioned))
    assert {f for t in tasks for f in t.metadata.input_files} == files
    assert sum(t.metadata.num_rows for t in tasks) == 150
    assert all(t.metadata.size_bytes > 0 for t in tasks)
    fn = tasks[0].read_fn
    # a module-level function over bytes and the context: no datasource, no catalog
    assert fn.func is read_task_blocks
    assert all(isinstance(b, bytes) for b in fn.args[0])
    assert all(deserialize_split(b).file_path in files for b in fn.args[0])
    assert len(pickle.dumps(fn)) < 20_000
    rebuilt = pickle.loads(pickle.dumps(fn))
    assert sum(t.num_rows for t in rebuilt()) == tasks[0].metadata.num_rows


def test_position_deletes_unknown_row_count(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(40))
    table.append(rows(40, start=40))
    path = sorted(live_data_files(table))[0]
    add_position_deletes(table, {path: [0, 3, 5, 39]})
    ds = icefloe.ray.read("db.events", catalog=catalog)
    assert_same_rows(_collect(ds), table.scan().to_arrow())
    tasks = IcefloeDatasource("db.events", catalog=catalog).get_read_tasks(2)
    by_deletes = {bool(deserialize_split(b).delete_files)
                  for t in tasks for b in t.read_fn.args[0]}
    assert True in by_deletes
    assert any(t.metadata.num_rows is None for t in tasks)


def test_time_travel_and_evolved_schema(catalog: SqlCatalog) -> None:
    schema = Schema(NestedField(1, "id", LongType(), required=True),
                    NestedField(2, "n", IntegerType(), required=False),
                    NestedField(3, "name", StringType(), required=False))
    table = make_table(catalog, identifier="db.evolving", schema=schema)
    table.append(pa.table({"id": [1, 2, 3], "n": [10, 20, 30], "name": ["a", "b", "c"]},
                          schema=table.schema().as_arrow()))
    first = _head(table)
    with table.update_schema() as update:
        update.add_column("extra", StringType())
        update.rename_column("name", "label")
        update.update_column("n", LongType())
    table.append(pa.table({"id": [4, 5], "n": [40, 50], "label": ["d", "e"],
                           "extra": ["x", None]}, schema=table.schema().as_arrow()))
    head = _collect(icefloe.ray.read("db.evolving", catalog=catalog))
    assert head.schema.names == ["id", "n", "label", "extra"]
    assert_same_rows(head, table.scan().to_arrow())
    old = _collect(icefloe.ray.read("db.evolving", catalog=catalog,
                                    options={"snapshotId": str(first)}))
    assert old.schema.names == ["id", "n", "name"]
    assert_same_rows(old, table.scan(snapshot_id=first).to_arrow())


def test_incremental_range(catalog: SqlCatalog, partitioned: Table) -> None:
    ids = [s.snapshot_id for s in partitioned.snapshots()]
    ds = icefloe.ray.read("db.events", catalog=catalog, options={
        "startSnapshotId": str(ids[0]), "endSnapshotId": str(ids[2])})
    expected = partitioned.incremental_append_scan(
        from_snapshot_id_exclusive=ids[0], to_snapshot_id_inclusive=ids[2]).to_arrow()
    assert_same_rows(_collect(ds), expected)


def test_columns_and_filter_options(catalog: SqlCatalog, partitioned: Table) -> None:
    ds = icefloe.ray.read("db.events", catalog=catalog,
                          options={"columns": "id,value", "filter": "id >= 120"})
    expected = partitioned.scan(row_filter="id >= 120", selected_fields=("id", "value"))
    assert_same_rows(_collect(ds), expected.to_arrow())


def test_projection_and_predicate_pushdown(catalog: SqlCatalog, partitioned: Table) -> None:
    ds = icefloe.ray.read("db.events", catalog=catalog)
    out = ds.filter(expr=(col("kind") == "b") & (col("id") < 150)).select_columns(
        ["value", "id"])
    result = _collect(out)
    assert result.schema.names == ["value", "id"]
    expected = partitioned.scan(row_filter="kind = 'b' and id < 150",
                                selected_fields=("value", "id")).to_arrow()
    assert sorted_rows(result.select(["id", "value"])) == sorted_rows(
        expected.select(["id", "value"]))
    # pushed into the plan: only kind=b files are read
    source = IcefloeDatasource("db.events", catalog=catalog)
    pushed = source.apply_predicate(col("kind") == "b")
    assert pushed is not source
    files = {f for t in pushed.get_read_tasks(8) for f in t.metadata.input_files}
    assert files and all("kind=b" in f for f in files)
    # a predicate PyIceberg cannot say stays with Ray
    assert source.apply_predicate((col("id") + 1) > 3) is source


def test_count_with_empty_projection(catalog: SqlCatalog, partitioned: Table) -> None:
    assert icefloe.ray.read("db.events", catalog=catalog).count() == 150
    assert icefloe.ray.read("db.events", catalog=catalog,
                            options={"filter": "id < 10"}).count() == 10


def test_empty_table(catalog: SqlCatalog) -> None:
    make_table(catalog)
    assert icefloe.ray.read("db.events", catalog=catalog).count() == 0


def test_default_blocks_are_not_sliced(catalog: SqlCatalog,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``override_num_blocks`` a read asks for 2 blocks per CPU, not Ray's 200:
    each read task's output stays one block instead of being sliced into many."""
    table = make_table(catalog)
    for i in range(6):
        table.append(rows(40, start=100 * i))
    # make this small table look big to Ray's block-count heuristic (at least 200 blocks
    # unless blocks would be under target_min_block_size bytes)
    monkeypatch.setattr(ray.data.DataContext.get_current(), "target_min_block_size", 1)
    ray_default = ray.data.read_datasource(IcefloeDatasource("db.events", catalog=catalog))
    assert ray_default.materialize().num_blocks() >= 100  # sliced by Ray's SplitBlocks
    assert icefloe.ray.default_num_blocks() == 2 * int(ray.cluster_resources()["CPU"])
    ds = icefloe.ray.read("db.events", catalog=catalog).materialize()
    assert ds.num_blocks() <= 6  # one block per task (tasks pack the 6 small files)
    assert_same_rows(_collect(ds), table.scan().to_arrow())
    forced = icefloe.ray.read("db.events", catalog=catalog, override_num_blocks=24)
    assert forced.materialize().num_blocks() >= 24  # the caller's count is Ray's to honour
