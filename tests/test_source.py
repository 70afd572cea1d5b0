"""IcebergSource end to end on real tables, row for row against PyIceberg's own scans."""

from __future__ import annotations

import datetime as dt
import inspect
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

import icefloe
from icefloe import (
    DataFileError,
    IcebergSource,
    InvalidOptionError,
    RefNotFoundError,
    SnapshotNotFoundError,
    TableNotFoundError,
)
from tests.conftest import append_partitioned, assert_same_rows
from tests.helpers.parallelism import record_parallelism
from tests.helpers.tables import (
    EVENTS_SCHEMA,
    add_equality_deletes,
    add_position_deletes,
    commit_delete_files,
    live_data_files,
    make_table,
    rollback_to,
    rows,
)

IDENTITY_KIND = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="kind")
)
BUCKET_ID = PartitionSpec(
    PartitionField(source_id=1, field_id=1000, transform=BucketTransform(4), name="id_bucket")
)
DAY_TS = PartitionSpec(
    PartitionField(source_id=3, field_id=1000, transform=DayTransform(), name="ts_day")
)


def _source(catalog: SqlCatalog, **options: object) -> IcebergSource:
    return IcebergSource("db.events", catalog=catalog, options=options)


def _read(catalog: SqlCatalog, **options: object) -> pa.Table:
    return _source(catalog, **options).to_arrow()


def _appended(table: Table, *batches: pa.Table) -> list[int]:
    """Append each batch (one snapshot each, a few ms apart); return the snapshot ids."""
    ids = []
    for batch in batches:
        time.sleep(0.002)  # distinct commit timestamps for time travel by timestamp
        table.append(batch)
        snapshot = table.current_snapshot()
        assert snapshot is not None
        ids.append(snapshot.snapshot_id)
    return ids


def test_public_api_is_curated() -> None:
    assert icefloe.__all__ == sorted(icefloe.__all__)
    for name in icefloe.__all__:
        assert getattr(icefloe, name) is not None


def test_options_are_checked_before_any_io() -> None:
    with pytest.raises(InvalidOptionError) as info:
        IcebergSource("db.nope", catalog="no-such-catalog", options={"snapshotId": "abc"})
    assert info.value.option == "snapshotId"
    with pytest.raises(InvalidOptionError):
        IcebergSource("", options={})


def test_catalog_props_hidden_in_repr() -> None:
    source = IcebergSource("db.t", options={"catalog.token": "tok-123", "catalog.uri": "u"})
    assert "tok-123" not in repr(source)


def test_unpartitioned(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    _appended(table, rows(10), rows(7, start=10), rows(5, start=17))
    result = _read(catalog)
    assert result.num_rows == 22
    assert result.schema.names == ["id", "kind", "ts", "day", "value"]
    assert_same_rows(result, table.scan().to_arrow())


@pytest.mark.parametrize("spec", [IDENTITY_KIND, BUCKET_ID, DAY_TS], ids=["identity", "bucket",
                                                                         "day"])
def test_partitioned(catalog: SqlCatalog, spec: PartitionSpec) -> None:
    table = make_table(catalog, partition_spec=spec)
    append_partitioned(table, rows(30))
    append_partitioned(table, rows(12, start=30))
    splits = list(_source(catalog).plan())
    assert len(splits) > 2
    assert all(s.spec_id == spec.spec_id and len(s.partition) == 1 for s in splits)
    assert_same_rows(_read(catalog), table.scan().to_arrow())


def test_partition_evolution(catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=IDENTITY_KIND)
    table.append(rows(12))
    with table.update_spec() as update:
        update.remove_field("kind")
        update.add_field("id", BucketTransform(2), "id_bucket")
    append_partitioned(table, rows(12, start=12))
    with table.update_spec() as update:
        update.add_field("ts", DayTransform(), "ts_day")
    append_partitioned(table, rows(12, start=24))
    specs = {s.spec_id for s in _source(catalog).plan()}
    assert specs == {0, 1, 2}
    assert_same_rows(_read(catalog), table.scan().to_arrow())
    # a filter on a column some specs do not partition by
    assert_same_rows(_read(catalog, filter="kind = 'b' AND id >= 5"),
                     table.scan(row_filter="kind = 'b' AND id >= 5").to_arrow())


EVOLVING = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "n", IntegerType(), required=False),
    NestedField(3, "name", StringType(), required=False),
    NestedField(4, "gone", StringType(), required=False),
)


def _evolving_rows(ids: range, schema: Schema) -> pa.Table:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    arrow = schema_to_pyarrow(schema)
    data: dict[str, list[object]] = {"id": list(ids)}
    for field in arrow:
        if field.name == "n":
            data["n"] = [i * 10 for i in ids]
        elif field.name in ("name", "label"):
            data[field.name] = [f"name-{i}" for i in ids]
        elif field.name == "gone":
            data["gone"] = [f"gone-{i}" for i in ids]
        elif field.name == "extra":
            data["extra"] = [f"x{i}" if i % 2 else None for i in ids]
    return pa.table(data, schema=arrow)


def test_schema_evolution(catalog: SqlCatalog) -> None:
    table = make_table(catalog, identifier="db.evolving", schema=EVOLVING)
    table.append(_evolving_rows(range(5), table.schema()))
    first = table.current_snapshot()
    assert first is not None
    with table.update_schema() as update:
        update.add_column("extra", StringType())
        update.rename_column("name", "label")
        update.delete_column("gone")
        update.update_column("n", LongType())
    table.append(_evolving_rows(range(5, 9), table.schema()))

    head = IcebergSource("db.evolving", catalog=catalog).to_arrow()
    assert head.schema.names == ["id", "n", "label", "extra"]
    assert head.schema.field("n").type == pa.int64()
    expected = table.scan().to_arrow()
    assert_same_rows(head, expected)
    assert sorted(head.column("label").to_pylist()) == sorted(f"name-{i}" for i in range(9))

    # time travel reads the old snapshot with its own schema
    old = IcebergSource("db.evolving", catalog=catalog,
                        options={"snapshotId": first.snapshot_id}).to_arrow()
    assert old.schema.names == ["id", "n", "name", "gone"]
    assert_same_rows(old, table.scan(snapshot_id=first.snapshot_id).to_arrow())

    # selecting only a column old files lack
    extra = IcebergSource("db.evolving", catalog=catalog, options={"columns": "extra"}).to_arrow()
    assert sorted(extra.column("extra").to_pylist(), key=str) == sorted(
        [None] * 5 + ["x5", None, "x7", None], key=str)


def test_many_small_files(catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=PartitionSpec(
        PartitionField(source_id=4, field_id=1000, transform=IdentityTransform(), name="day")))
    table.append(rows(60, days=20))
    table.append(rows(40, start=60, days=20))
    splits = list(_source(catalog).plan())
    assert len(splits) == 40
    assert len({s.file_path for s in splits}) == 40
    for parallelism in (1, 4):
        result = pa.Table.from_batches(list(_source(catalog).read(parallelism=parallelism)))
        assert_same_rows(result, table.scan().to_arrow())


def test_big_multi_row_group_file(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.transaction().set_properties(**{"write.parquet.row-group-limit": "64"}) \
        .commit_transaction()
    table.append(rows(700))
    assert len(live_data_files(table)) == 1
    source = _source(catalog, splitSize="2000", batchSize="50")
    assert len(list(source.plan())) > 2
    batches = list(source.read(parallelism=3))
    assert max(b.num_rows for b in batches) <= 50
    assert_same_rows(pa.Table.from_batches(batches), table.scan().to_arrow())


# --------------------------------------------------------------------------- time travel


@pytest.fixture
def history(catalog: SqlCatalog) -> tuple[Table, list[int]]:
    table = make_table(catalog)
    ids = _appended(table, rows(5), rows(5, start=5), rows(5, start=10))
    return table, ids


def test_time_travel_by_snapshot_id(catalog: SqlCatalog, history: tuple[Table, list[int]]
                                    ) -> None:
    table, ids = history
    for sid in ids:
        for key in ("snapshotId", "versionAsOf", "snapshot-id"):
            assert_same_rows(_read(catalog, **{key: str(sid)}),
                             table.scan(snapshot_id=sid).to_arrow())
    assert _read(catalog, snapshotId=ids[0]).num_rows == 5


def test_time_travel_by_timestamp(catalog: SqlCatalog, history: tuple[Table, list[int]]) -> None:
    table, ids = history
    snapshots = [table.metadata.snapshot_by_id(i) for i in ids]
    for snapshot in snapshots:
        assert snapshot is not None
        ts = snapshot.timestamp_ms
        oracle = table.snapshot_as_of_timestamp(ts)
        assert oracle is not None and oracle.snapshot_id == snapshot.snapshot_id
        expected = table.scan(snapshot_id=oracle.snapshot_id).to_arrow()
        assert_same_rows(_read(catalog, asOfTimestamp=ts), expected)
        iso = (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ts)).isoformat()
        assert_same_rows(_read(catalog, timestampAsOf=iso), expected)
    # between two commits: the older one
    between = snapshots[2].timestamp_ms - 1  # type: ignore[union-attr]
    oracle = table.snapshot_as_of_timestamp(between)
    assert oracle is not None and oracle.snapshot_id == ids[1]
    assert_same_rows(_read(catalog, asOfTimestamp=between),
                     table.scan(snapshot_id=ids[1]).to_arrow())


def test_time_travel_by_timestamp_after_a_rollback(catalog: SqlCatalog) -> None:
    """The snapshot current at that time (the snapshot log), as PyIceberg, Java and Spark."""
    table = make_table(catalog)
    base, abandoned = _appended(table, rows(3), rows(3, start=3))
    time.sleep(0.002)
    rollback_to(table, base)
    _appended(table, rows(3, start=6))
    snapshot = table.metadata.snapshot_by_id(abandoned)
    assert snapshot is not None
    oracle = table.snapshot_as_of_timestamp(snapshot.timestamp_ms)
    assert oracle is not None and oracle.snapshot_id == abandoned
    result = _read(catalog, asOfTimestamp=snapshot.timestamp_ms)
    assert_same_rows(result, table.scan(snapshot_id=abandoned).to_arrow())
    assert sorted(result.column("id").to_pylist()) == list(range(6))


def test_time_travel_by_tag_and_branch(catalog: SqlCatalog, history: tuple[Table, list[int]]
                                       ) -> None:
    table, ids = history
    table.manage_snapshots().create_tag(ids[0], "v1").create_branch(ids[1], "dev").commit()
    table.append(rows(3, start=100), branch="dev")
    dev_head = table.metadata.refs["dev"].snapshot_id
    assert dev_head not in ids

    for key in ("tag", "ref"):
        assert_same_rows(_read(catalog, **{key: "v1"}), table.scan(snapshot_id=ids[0]).to_arrow())
    for key in ("branch", "ref"):
        result = _read(catalog, **{key: "dev"})
        assert_same_rows(result, table.scan(snapshot_id=dev_head).to_arrow())
        assert result.num_rows == 13
    assert_same_rows(_read(catalog, ref="main"), table.scan().to_arrow())

    with pytest.raises(RefNotFoundError, match="tag"):
        _read(catalog, branch="v1")
    with pytest.raises(RefNotFoundError, match="branch"):
        _read(catalog, tag="dev")
    with pytest.raises(RefNotFoundError, match="nope"):
        _read(catalog, ref="nope")


def test_tag_reads_with_the_snapshot_schema(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(4))
    first = table.current_snapshot()
    assert first is not None
    table.manage_snapshots().create_tag(first.snapshot_id, "v1").commit()
    with table.update_schema() as update:
        update.rename_column("kind", "category")
    tagged = _read(catalog, tag="v1")
    assert tagged.schema.names == ["id", "kind", "ts", "day", "value"]
    assert_same_rows(tagged, table.scan(snapshot_id=first.snapshot_id).to_arrow())
    assert _read(catalog).schema.names == ["id", "category", "ts", "day", "value"]


# --------------------------------------------------------------------------- empty tables


def test_table_without_snapshot(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    assert table.current_snapshot() is None
    assert list(_source(catalog).plan()) == []
    result = _read(catalog)
    assert result.num_rows == 0
    assert result.schema.names == table.scan().to_arrow().schema.names
    assert list(_source(catalog).read()) == []
    with pytest.raises(RefNotFoundError):
        _read(catalog, branch="dev")
    with pytest.raises(SnapshotNotFoundError):
        _read(catalog, asOfTimestamp=int(time.time() * 1000))


def test_empty_table_with_snapshots(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(5))
    commit_delete_files(table, list(live_data_files(table)))
    assert table.scan().to_arrow().num_rows == 0
    assert list(_source(catalog).plan()) == []
    result = _read(catalog)
    assert result.num_rows == 0
    assert result.schema.names == ["id", "kind", "ts", "day", "value"]


# --------------------------------------------------------------------------- merge-on-read


def test_position_deletes(catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=IDENTITY_KIND)
    table.append(rows(30))
    files = {path: pq_ids(path) for path in live_data_files(table)}
    path_a, path_b = sorted(files)[:2]
    add_position_deletes(table, {path_a: [0, 3]})
    deleted = {files[path_a][0], files[path_a][3]}
    # a later append is not affected by the earlier delete file (sequence numbers)
    table.append(rows(6, start=30))
    add_position_deletes(table, {path_b: [len(files[path_b]) - 1]})
    deleted.add(files[path_b][-1])

    result = _read(catalog)
    assert sorted(result.column("id").to_pylist()) == sorted(set(range(36)) - deleted)
    assert_same_rows(result, table.scan().to_arrow())  # PyIceberg applies position deletes


def test_equality_deletes(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(20))
    add_equality_deletes(table, rows(20).filter(pa.compute.is_in(
        pa.compute.field("id"), pa.array([1, 4, 7]))), ["id"])
    # appended after the delete: same ids come back (equality deletes apply to older data only)
    table.append(rows(3, start=4))
    add_equality_deletes(table, pa.table({"kind": ["c"]}), ["kind"])

    result = _read(catalog)
    # by hand: ids 1, 4, 7 of the first file are gone; then every kind 'c' row of both files
    # (the second delete has a higher sequence number than both data files)
    first = [i for i in range(20) if i not in (1, 4, 7) and i % 3 != 2]
    second = [i for i in range(4, 7) if i % 3 != 2]
    assert sorted(result.column("id").to_pylist()) == sorted(first + second)
    assert set(result.column("kind").to_pylist()) == {"a", "b"}


def test_equality_deletes_partitioned_multi_column(catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=IDENTITY_KIND)
    table.append(rows(18))
    gone = pa.table({"id": [0, 3, 4, 99], "value": [0.0, 1.5, 9.9, 0.0]})
    # only rows of partition kind='a' whose (id, value) match: 0 and 3 (4 is kind 'b', 99 absent)
    add_equality_deletes(table, gone, ["id", "value"], partition=Record("a"))
    result = _read(catalog)
    assert sorted(result.column("id").to_pylist()) == [i for i in range(18) if i not in (0, 3)]
    # time travel before the delete sees every row
    before = table.metadata.snapshots[0].snapshot_id
    assert _read(catalog, snapshotId=before).num_rows == 18


def test_position_delete_file_for_several_data_files(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(5))
    table.append(rows(5, start=5))
    path_a, path_b = sorted(live_data_files(table))
    add_position_deletes(table, {path_a: [1], path_b: [0, 4]})
    splits = list(_source(catalog).plan())
    assert all(len(s.delete_files) == 1 and s.delete_files[0].referenced_data_file is None
               for s in splits)
    gone = {pq_ids(path_a)[1], pq_ids(path_b)[0], pq_ids(path_b)[4]}
    result = _read(catalog)
    assert sorted(result.column("id").to_pylist()) == sorted(set(range(10)) - gone)
    assert_same_rows(result, table.scan().to_arrow())


def test_equality_deletes_of_a_void_spec_are_global(catalog: SqlCatalog) -> None:
    """A v1 table's removed partition field becomes void; after an upgrade to v2 an equality
    delete in that all-void spec is a global delete (Java: PartitionSpec.isUnpartitioned)."""
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", EVENTS_SCHEMA,
                                 partition_spec=IDENTITY_KIND, properties={"format-version": "1"})
    table.append(rows(6))
    with table.update_spec() as update:
        update.remove_field("kind")
    with table.transaction() as tx:
        tx.upgrade_table_version(2)
    assert not table.spec().is_unpartitioned()  # PyIceberg keeps the void field
    table.append(rows(3, start=6))
    add_equality_deletes(table, pa.table({"id": [0, 1, 7]}), ["id"], partition=Record(None))
    assert sorted(_read(catalog).column("id").to_pylist()) == [2, 3, 4, 5, 6, 8]


def pq_ids(path: str) -> list[int]:
    import pyarrow.parquet as pq

    return pq.read_table(path.removeprefix("file://"), columns=["id"]).column("id").to_pylist()


# --------------------------------------------------------------------------- bad inputs


def test_unknown_table(catalog: SqlCatalog) -> None:
    with pytest.raises(TableNotFoundError, match=r"db\.nope"):
        IcebergSource("db.nope", catalog=catalog).to_arrow()


def test_snapshot_that_does_not_exist(catalog: SqlCatalog, history: tuple[Table, list[int]]
                                      ) -> None:
    with pytest.raises(SnapshotNotFoundError, match="12345"):
        _read(catalog, snapshotId="12345")
    with pytest.raises(SnapshotNotFoundError, match="12345"):
        _read(catalog, endSnapshotId="12345")


def test_timestamp_before_the_first_snapshot(catalog: SqlCatalog,
                                             history: tuple[Table, list[int]]) -> None:
    table, ids = history
    first = table.metadata.snapshot_by_id(ids[0])
    assert first is not None
    with pytest.raises(SnapshotNotFoundError, match=str(first.timestamp_ms)):
        _read(catalog, asOfTimestamp=first.timestamp_ms - 1)
    with pytest.raises(SnapshotNotFoundError):
        _read(catalog, asOfTimestamp="2000-01-01T00:00:00")


def test_missing_data_file(catalog: SqlCatalog, history: tuple[Table, list[int]]) -> None:
    import os

    table, ids = history
    doomed = next(iter(live_data_files(table)))
    os.remove(doomed.removeprefix("file://"))
    with pytest.raises(DataFileError) as info:
        _read(catalog)
    assert doomed in str(info.value)
    assert str(ids[-1]) in str(info.value)


def test_unknown_columns_and_filter(catalog: SqlCatalog, history: tuple[Table, list[int]]
                                    ) -> None:
    with pytest.raises(InvalidOptionError) as info:
        _read(catalog, columns="id,nope")
    assert info.value.option == "columns"
    with pytest.raises(InvalidOptionError) as info:
        _read(catalog, filter="nope > 3")
    assert info.value.option == "filter"
    with pytest.raises(InvalidOptionError) as info:
        _read(catalog, pollIntervalMs="10")
    assert info.value.option == "pollIntervalMs"


def test_columns_and_case_insensitive(catalog: SqlCatalog, history: tuple[Table, list[int]]
                                      ) -> None:
    table, _ = history
    result = _read(catalog, columns="value,id")  # the order asked (PyIceberg: table order)
    assert_same_rows(result, table.scan(selected_fields=("value", "id")).to_arrow()
                     .select(["value", "id"]))
    result = _read(catalog, columns="ID,Kind", caseSensitive="false", filter="ID < 3")
    assert_same_rows(result, table.scan(selected_fields=("ID", "Kind"), case_sensitive=False,
                                        row_filter="ID < 3").to_arrow())
    assert result.num_rows == 3


def test_read_is_a_lazy_iterator(catalog: SqlCatalog, history: tuple[Table, list[int]]) -> None:
    batches: Iterator[pa.RecordBatch] = _source(catalog, batchSize="2").read(parallelism=2)
    assert inspect.isgenerator(batches)  # batches are produced as consumed, never all at once
    first = next(batches)
    assert isinstance(first, pa.RecordBatch)
    count = first.num_rows + sum(b.num_rows for b in batches)
    assert count == 15


def test_schema_of_the_read(catalog: SqlCatalog, history: tuple[Table, list[int]]) -> None:
    schema = _source(catalog, columns="id,kind", metadataColumns="_file").schema()
    assert schema.names == ["id", "kind", "_file"]
    assert _source(catalog, columns="id,kind", metadataColumns="_file").to_arrow().schema == schema


def test_the_default_parallelism_of_a_local_table(catalog: SqlCatalog,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``parallelism``, a table on the local file system is read by
    ``LOCAL_PARALLELISM`` (2, as the README says) reader threads; an explicit one is kept."""
    import icefloe.source as source_module

    table = make_table(catalog)
    for start in range(0, 60, 10):
        table.append(rows(10, start=start))
    threads = record_parallelism(monkeypatch, source_module)
    assert source_module.LOCAL_PARALLELISM == 2
    assert_same_rows(_source(catalog).to_arrow(), table.scan().to_arrow())
    assert_same_rows(pa.Table.from_batches(list(_source(catalog).read())),
                     table.scan().to_arrow())
    assert_same_rows(pa.Table.from_batches(list(_source(catalog).read(parallelism=3))),
                     table.scan().to_arrow())
    assert threads == [2, 2, 3]
