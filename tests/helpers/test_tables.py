"""Tests of tests/helpers/tables.py, with PyIceberg's own reads as the oracle."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot
from pyiceberg.typedef import Record

from tests.helpers import tables as T

SPECS = [UNPARTITIONED_PARTITION_SPEC, T.EVENTS_SPEC_BY_DAY]


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return T.make_catalog(tmp_path)


def _table(catalog: SqlCatalog, spec: PartitionSpec, batches: int = 2) -> Table:
    table = T.make_table(catalog, partition_spec=spec)
    for i in range(batches):
        table.append(T.rows(9, start=9 * i))
    return table


def _ids(table: Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def _sorted(data: pa.Table) -> pa.Table:
    return data.sort_by("id")


def _entries(table: Table, snapshot: Snapshot, content: ManifestContent) -> list[ManifestEntry]:
    return [
        entry
        for manifest in snapshot.manifests(table.io)
        if manifest.content == content
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False)
    ]


def _field_ids(path: str) -> list[int]:
    schema = pq.read_schema(path.removeprefix("file://"))
    return [int(f.metadata[b"PARQUET:field_id"]) for f in schema]


def test_make_catalog_and_rows(tmp_path: Path) -> None:
    catalog = T.make_catalog(tmp_path, name="cat")
    assert (tmp_path / "catalog.db").exists()
    assert catalog.name == "cat"
    table = T.make_table(catalog)
    assert table.location().startswith(f"file://{tmp_path}/warehouse/")
    # the documented rows: ids 3..7, kinds a/b/c by id, day 2024-01-01 + id % 3,
    # ts = that day + id seconds, value id / 2
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i % 3) for i in range(3, 8)]
    assert T.rows(5, start=3).to_pylist() == [
        {"id": i, "kind": "abc"[i % 3], "ts": dt.datetime.combine(d, dt.time())
         + dt.timedelta(seconds=i), "day": d, "value": i / 2}
        for i, d in zip(range(3, 8), days, strict=True)]
    assert T.rows(5, start=3).schema.equals(schema_to_pyarrow(T.EVENTS_SCHEMA))
    table.append(T.rows(5, start=3))
    assert _sorted(table.scan().to_arrow()).equals(T.rows(5, start=3))
    assert table.schema() == T.EVENTS_SCHEMA
    assert table.format_version == 2


@pytest.mark.parametrize("spec", SPECS, ids=["unpartitioned", "by_day"])
def test_position_deletes(catalog: SqlCatalog, spec: PartitionSpec) -> None:
    table = _table(catalog, spec)
    before = table.current_snapshot()
    assert before is not None
    path, data_file = sorted(T.live_data_files(table).items())[0]
    file_ids = pq.read_table(path.removeprefix("file://")).column("id").to_pylist()
    deleted = {file_ids[0], file_ids[-1]}
    expected = sorted(set(_ids(table)) - deleted)

    snapshot = T.add_position_deletes(table, {path: [len(file_ids) - 1, 0]})

    assert _ids(table) == expected
    assert _ids(catalog.load_table("db.events")) == expected
    assert snapshot.parent_snapshot_id == before.snapshot_id
    assert snapshot.sequence_number == before.sequence_number + 1
    assert snapshot.summary is not None
    assert snapshot.summary.operation == Operation.DELETE
    assert snapshot.summary["added-delete-files"] == "1"
    assert snapshot.summary["added-position-deletes"] == "2"
    assert snapshot.summary["total-position-deletes"] == "2"
    assert snapshot.summary["total-data-files"] == before.summary["total-data-files"]  # type: ignore[index]

    manifests = snapshot.manifests(table.io)
    assert {m.manifest_path for m in before.manifests(table.io)} < {
        m.manifest_path for m in manifests
    }
    (delete_manifest,) = [m for m in manifests if m.content == ManifestContent.DELETES]
    assert delete_manifest.sequence_number == snapshot.sequence_number
    assert delete_manifest.added_snapshot_id == snapshot.snapshot_id
    (entry,) = delete_manifest.fetch_manifest_entry(table.io)
    assert entry.status == ManifestEntryStatus.ADDED
    assert entry.sequence_number == entry.file_sequence_number == snapshot.sequence_number
    delete_file = entry.data_file
    assert delete_file.content == DataFileContent.POSITION_DELETES
    assert delete_file.partition == data_file.partition
    assert delete_file.spec_id == data_file.spec_id == spec.spec_id
    assert delete_file.record_count == 2
    local = delete_file.file_path.removeprefix("file://")
    assert delete_file.file_size_in_bytes == Path(local).stat().st_size
    assert pq.read_table(local).to_pydict() == {
        "file_path": [path, path],
        "pos": [0, len(file_ids) - 1],
    }
    assert _field_ids(delete_file.file_path) == [2147483546, 2147483545]

    table.append(T.rows(2, start=100))  # PyIceberg keeps working on top
    assert _ids(table) == [*expected, 100, 101]


def test_position_deletes_validation(catalog: SqlCatalog) -> None:
    table = _table(catalog, T.EVENTS_SPEC_BY_DAY)
    paths = sorted(T.live_data_files(table))
    with pytest.raises(ValueError, match="single partition"):
        T.add_position_deletes(table, {p: [0] for p in paths})
    with pytest.raises(ValueError, match="not live"):
        T.add_position_deletes(table, {"file:///nope.parquet": [0]})
    v1 = catalog.create_table("db.v1", T.EVENTS_SCHEMA, properties={"format-version": "1"})
    v1.append(T.rows(3))
    with pytest.raises(ValueError, match="format-version 2"):
        T.add_position_deletes(v1, {next(iter(T.live_data_files(v1))): [0]})


@pytest.mark.parametrize("spec", SPECS, ids=["unpartitioned", "by_day"])
def test_equality_deletes(catalog: SqlCatalog, spec: PartitionSpec) -> None:
    table = _table(catalog, spec)
    before = table.current_snapshot()
    assert before is not None
    data_file = sorted(T.live_data_files(table).values(), key=lambda f: f.file_path)[0]
    partition = None if spec.is_unpartitioned() else data_file.partition
    deleted = T.rows(2, start=3)

    snapshot = T.add_equality_deletes(table, deleted, ["kind", "id"], partition)

    assert snapshot.summary is not None
    assert snapshot.summary.operation == Operation.DELETE
    assert snapshot.summary["added-equality-deletes"] == "2"
    assert snapshot.sequence_number == before.sequence_number + 1
    (entry,) = _entries(table, snapshot, ManifestContent.DELETES)
    assert entry.status == ManifestEntryStatus.ADDED
    assert entry.snapshot_id == snapshot.snapshot_id
    assert entry.sequence_number == entry.file_sequence_number == snapshot.sequence_number
    assert all(
        e.sequence_number < snapshot.sequence_number
        for e in _entries(table, snapshot, ManifestContent.DATA)
    )
    delete_file = entry.data_file
    assert delete_file.content == DataFileContent.EQUALITY_DELETES
    assert delete_file.equality_ids == [2, 1]
    assert delete_file.partition == (Record() if partition is None else partition)
    assert delete_file.spec_id == spec.spec_id
    assert delete_file.record_count == 2
    local = delete_file.file_path.removeprefix("file://")
    assert pq.read_table(local).to_pydict() == deleted.select(["kind", "id"]).to_pydict()
    assert _field_ids(delete_file.file_path) == [2, 1]
    with pytest.raises(ValueError, match="equality deletes"):
        table.scan().to_arrow()  # PyIceberg's planner refuses equality deletes


def test_equality_deletes_validation(catalog: SqlCatalog) -> None:
    table = _table(catalog, T.EVENTS_SPEC_BY_DAY)
    with pytest.raises(ValueError, match="partition"):
        T.add_equality_deletes(table, T.rows(1), ["id"])
    flat = T.make_table(catalog, "db.flat")
    with pytest.raises(ValueError, match="partition"):
        T.add_equality_deletes(flat, T.rows(1), ["id"], Record(1))


@pytest.mark.parametrize("spec", SPECS, ids=["unpartitioned", "by_day"])
def test_commit_replace(catalog: SqlCatalog, spec: PartitionSpec) -> None:
    table = _table(catalog, spec, batches=3)
    path = sorted(T.live_data_files(table))[0]
    T.add_position_deletes(table, {path: [0]})
    expected = _sorted(table.scan().to_arrow())
    old = set(T.live_data_files(table))

    snapshot = T.commit_replace(table)

    assert _sorted(table.scan().to_arrow()).equals(expected)
    assert snapshot.summary is not None
    assert snapshot.summary.operation == Operation.REPLACE
    new = T.live_data_files(table)
    assert not old & set(new)
    assert snapshot.summary["deleted-data-files"] == str(len(old))
    assert snapshot.summary["added-data-files"] == str(len(new))
    assert len(new) == (1 if spec.is_unpartitioned() else 3)  # one file per partition
    assert snapshot.summary["total-records"] == str(expected.num_rows)  # deleted row is gone
    deleted = [
        e
        for e in _entries(table, snapshot, ManifestContent.DATA)
        if e.status == ManifestEntryStatus.DELETED
    ]
    assert {e.data_file.file_path for e in deleted} == old
    assert all(e.snapshot_id == snapshot.snapshot_id for e in deleted)


def test_commit_replace_subset(catalog: SqlCatalog) -> None:
    table = _table(catalog, T.EVENTS_SPEC_BY_DAY)
    expected = _sorted(table.scan().to_arrow())
    files = T.live_data_files(table)
    day = next(iter(files.values())).partition
    chosen = [p for p, f in files.items() if f.partition == day]
    T.commit_replace(table, chosen)
    assert _sorted(table.scan().to_arrow()).equals(expected)
    assert set(T.live_data_files(table)) >= set(files) - set(chosen)
    assert not set(T.live_data_files(table)) & set(chosen)
    with pytest.raises(ValueError, match="not live"):
        T.commit_replace(table, chosen)


def test_commit_overwrite_and_delete_files(catalog: SqlCatalog) -> None:
    table = _table(catalog, T.EVENTS_SPEC_BY_DAY)
    first, second = sorted(T.live_data_files(table))[:2]
    first_ids = pq.read_table(first.removeprefix("file://")).column("id").to_pylist()
    second_ids = pq.read_table(second.removeprefix("file://")).column("id").to_pylist()
    expected = sorted(set(_ids(table)) - set(first_ids))

    snapshot = T.commit_overwrite_files(table, [first], T.rows(2, start=50))
    assert snapshot.summary is not None
    assert snapshot.summary.operation == Operation.OVERWRITE
    assert snapshot.summary["deleted-data-files"] == "1"
    assert _ids(table) == sorted([*expected, 50, 51])
    assert first not in T.live_data_files(table)

    snapshot = T.commit_delete_files(table, [second])
    assert snapshot.summary is not None
    assert snapshot.summary.operation == Operation.DELETE
    assert snapshot.summary["deleted-records"] == str(len(second_ids))
    assert _ids(table) == sorted(set(expected) - set(second_ids) | {50, 51})

    only_remove = T.commit_overwrite_files(table, sorted(T.live_data_files(table))[:1], None)
    assert only_remove.summary is not None
    assert only_remove.summary.operation == Operation.OVERWRITE
    with pytest.raises(ValueError, match="not live"):
        T.commit_delete_files(table, [second])


def test_rollback_to(catalog: SqlCatalog) -> None:
    table = _table(catalog, UNPARTITIONED_PARTITION_SPEC)
    first = table.snapshots()[0].snapshot_id
    head = table.current_snapshot()
    assert head is not None
    T.rollback_to(table, first)
    assert table.metadata.refs["main"].snapshot_id == first
    assert catalog.load_table("db.events").current_snapshot().snapshot_id == first  # type: ignore[union-attr]
    assert _ids(table) == list(range(9))
    T.rollback_to(table, head.snapshot_id, ref="dev")
    assert table.metadata.refs["dev"].snapshot_id == head.snapshot_id
    with pytest.raises(ValueError, match="unknown snapshot"):
        T.rollback_to(table, 42)


def test_expire_snapshots(catalog: SqlCatalog) -> None:
    table = _table(catalog, UNPARTITIONED_PARTITION_SPEC, batches=3)
    first, second, _ = (s.snapshot_id for s in table.snapshots())
    T.expire_snapshots(table, [first, second])
    assert [s.snapshot_id for s in table.snapshots()] == [table.metadata.current_snapshot_id]
    assert catalog.load_table("db.events").snapshot_by_id(first) is None
    assert _ids(table) == list(range(27))


def test_drop_and_recreate(catalog: SqlCatalog) -> None:
    table = _table(catalog, T.EVENTS_SPEC_BY_DAY)
    recreated = T.drop_and_recreate(catalog, "db.events", T.EVENTS_SCHEMA, T.EVENTS_SPEC_BY_DAY)
    assert recreated.metadata.table_uuid != table.metadata.table_uuid
    assert catalog.load_table("db.events").metadata.table_uuid == recreated.metadata.table_uuid
    assert recreated.current_snapshot() is None
    assert recreated.spec() == T.EVENTS_SPEC_BY_DAY
    recreated.append(T.rows(3))
    assert pc.max(recreated.scan().to_arrow().column("id")).as_py() == 2
