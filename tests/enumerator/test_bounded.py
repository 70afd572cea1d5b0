"""The bounded enumerator: snapshot resolution, incremental ranges, policies, pruning, determinism.

Rows are checked against PyIceberg's ``scan`` and ``incremental_append_scan``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.transforms import IdentityTransform

from icefloe import (
    DataFileError,
    ExpiredPositionError,
    IcebergSource,
    LineageBreakError,
    SnapshotNotFoundError,
    SnapshotPolicyError,
    serialize_split,
)
from icefloe.catalog.handle import open_table
from icefloe.enumerator.bounded import plan_bounded
from icefloe.options import SourceOptions
from tests.conftest import assert_same_rows
from tests.helpers.tables import (
    add_position_deletes,
    commit_delete_files,
    commit_overwrite_files,
    commit_replace,
    expire_snapshots,
    live_data_files,
    make_catalog,
    make_table,
    rollback_to,
    rows,
)

Appends = tuple[SqlCatalog, Table, list[int]]
Mixed = tuple[SqlCatalog, Table, dict[str, int]]

BY_KIND = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="kind")
)


def _source(catalog: SqlCatalog, **options: object) -> IcebergSource:
    return IcebergSource("db.events", catalog=catalog, options=options)


def _read(catalog: SqlCatalog, **options: object) -> pa.Table:
    return _source(catalog, **options).to_arrow()


def _head(table: Table) -> int:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def _ids(data: pa.Table) -> list[int]:
    return sorted(data.column("id").to_pylist())


# --------------------------------------------------------------------------- plan resolution


def test_plan_resolves_the_head_and_time_travel(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(3))
    first = _head(table)
    table.append(rows(3, start=3))
    handle = open_table(catalog, "db.events")

    plan = plan_bounded(handle, SourceOptions.parse({}).for_mode("bounded"))
    assert plan.snapshot is not None and plan.snapshot.snapshot_id == _head(table)
    assert not plan.incremental and plan.start_snapshot_id_exclusive is None
    assert {s.snapshot_id for s in plan.splits()} == {_head(table)}

    plan = plan_bounded(handle, SourceOptions.parse({"snapshotId": first}).for_mode("bounded"))
    assert plan.snapshot is not None and plan.snapshot.snapshot_id == first
    assert len(list(plan.splits())) == 1
    # splits() is safe to call again
    assert list(plan.splits()) == list(plan.splits())


def test_splits_carry_file_metadata(catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=BY_KIND)
    table.append(rows(9))
    files = live_data_files(table)
    splits = list(_source(catalog).plan())
    assert {s.file_path for s in splits} == set(files)
    sequence_number = table.current_snapshot().sequence_number  # type: ignore[union-attr]
    for split in splits:
        data_file = files[split.file_path]
        assert split.file_format == "PARQUET"
        assert split.is_whole_file
        assert split.record_count == split.file_record_count == data_file.record_count
        assert split.file_size == split.length == data_file.file_size_in_bytes
        assert split.partition == tuple(data_file.partition)
        assert split.spec_id == 0
        assert split.sequence_number == sequence_number
        assert split.delete_files == ()
        assert split.resume_rows == 0


# --------------------------------------------------------------------------- determinism


def test_two_plans_are_identical(catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=BY_KIND)
    for i in range(3):
        table.append(rows(9, start=9 * i))
    table.transaction().set_properties(**{"write.parquet.row-group-limit": "10"}) \
        .commit_transaction()
    table.append(rows(60, start=100))
    first = list(_source(catalog, splitSize="1").plan())
    second = list(_source(catalog, splitSize="1").plan())
    assert len(first) > 12
    assert first == second
    assert [s.split_id for s in first] == [s.split_id for s in second]
    assert len({s.split_id for s in first}) == len(first)
    assert [s.ordinal for s in first] == list(range(len(first)))


def test_plan_in_a_subprocess_gives_the_same_bytes(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = make_table(catalog, partition_spec=BY_KIND)
    for i in range(3):
        table.append(rows(9, start=9 * i))
    add_position_deletes(table, {sorted(live_data_files(table))[0]: [0]})
    here = b"".join(serialize_split(s) for s in _source(catalog).plan())
    script = textwrap.dedent(f"""
        import sys
        from icefloe import IcebergSource, serialize_split
        from tests.helpers.tables import make_catalog
        from pathlib import Path
        catalog = make_catalog(Path({str(tmp_path)!r}))
        source = IcebergSource("db.events", catalog=catalog)
        sys.stdout.buffer.write(b"".join(serialize_split(s) for s in source.plan()))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True,
                          cwd=Path(__file__).parents[2], timeout=60)
    assert len(here) > 0
    assert done.stdout == here


# --------------------------------------------------------------------------- incremental ranges


@pytest.fixture(scope="module")
def appends(tmp_path_factory: pytest.TempPathFactory) -> Appends:
    """Four appends of six rows (ids 0-5, 10-15, 20-25, 30-35); tests only read it."""
    catalog = make_catalog(tmp_path_factory.mktemp("appends"))
    table = make_table(catalog, partition_spec=BY_KIND)
    ids = []
    for i in range(4):
        table.append(rows(6, start=10 * i))
        ids.append(_head(table))
    return catalog, table, ids


def _oracle(table: Table, start: int | None, end: int | None, **kwargs: object) -> pa.Table:
    return table.incremental_append_scan(
        from_snapshot_id_exclusive=start, to_snapshot_id_inclusive=end, **kwargs  # type: ignore[arg-type]
    ).to_arrow()


@pytest.mark.parametrize(("start", "end"),
                         [(0, 3), (0, 1), (1, 2), (2, 3), (None, 2), (1, None), (3, None)])
def test_incremental_range_matches_pyiceberg(appends: Appends, start: int | None,
                                             end: int | None) -> None:
    catalog, table, ids = appends
    start_id = None if start is None else ids[start]
    end_id = None if end is None else ids[end]
    options = {}
    if start_id is not None:
        options["startSnapshotId"] = str(start_id)
    if end_id is not None:
        options["endSnapshotId"] = str(end_id)
    result = _read(catalog, **options)
    if start_id == ids[-1] and end_id is None:
        # PyIceberg refuses an empty range (start = head); icefloe reads nothing
        assert result.num_rows == 0
    else:
        assert_same_rows(result, _oracle(table, start_id, end_id))
    # start exclusive, end inclusive
    first = 0 if start is None else start + 1
    last = 3 if end is None else end
    assert _ids(result) == sorted(i for n in range(first, last + 1) for i in range(10 * n,
                                                                                    10 * n + 6))
    splits = list(_source(catalog, **options).plan())
    assert {s.snapshot_id for s in splits} == set(ids[first:last + 1])
    assert len(splits) == 3 * (last + 1 - first)  # three kinds: one file each per append
    # oldest snapshot first
    order = [ids.index(s.snapshot_id) for s in splits]
    assert order == sorted(order)


def test_incremental_aliases_and_filter(appends: Appends) -> None:
    catalog, table, ids = appends
    result = _read(catalog, **{"start-snapshot-id": str(ids[0]), "end-snapshot-id": str(ids[2]),
                               "filter": "kind = 'b'", "columns": "id,kind"})
    assert_same_rows(result, _oracle(table, ids[0], ids[2], row_filter="kind = 'b'",
                                     selected_fields=("id", "kind")))
    assert set(result.column("kind").to_pylist()) == {"b"}


def test_incremental_end_before_start_is_a_lineage_break(appends: Appends) -> None:
    catalog, _, ids = appends
    with pytest.raises(LineageBreakError, match=str(ids[2])):
        _source(catalog, startSnapshotId=ids[2], endSnapshotId=ids[1]).bounded_plan()


def test_incremental_start_not_an_ancestor(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(3))
    base = _head(table)
    table.append(rows(3, start=3))
    abandoned = _head(table)
    rollback_to(table, base)
    table.append(rows(3, start=6))
    with pytest.raises(LineageBreakError, match=str(abandoned)):
        _source(catalog, startSnapshotId=abandoned).bounded_plan()
    assert _ids(_read(catalog, startSnapshotId=base)) == [6, 7, 8]


def test_incremental_start_expired(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    for i in range(3):
        table.append(rows(2, start=2 * i))
    first = table.metadata.snapshots[0].snapshot_id
    expire_snapshots(table, [first])
    with pytest.raises(SnapshotNotFoundError, match=str(first)):
        _source(catalog, startSnapshotId=first).bounded_plan()
    with pytest.raises(SnapshotNotFoundError, match="12345"):
        _source(catalog, startSnapshotId="12345").bounded_plan()
    # an expired start is reported as such when walking the lineage directly
    from icefloe.enumerator.lineage import snapshots_between

    with pytest.raises(ExpiredPositionError, match=str(first)):
        snapshots_between(table.metadata, table.current_snapshot(), first)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- snapshot policies


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Mixed:
    """start -> append a -> delete (files) -> append b -> replace -> overwrite -> append c.

    Shared by the module's tests, which only read it.
    """
    catalog = make_catalog(tmp_path_factory.mktemp("mixed"))
    table = make_table(catalog)
    table.append(rows(4))
    ids = {"start": _head(table)}
    table.append(rows(4, start=10))
    ids["a"] = _head(table)
    doomed = [p for p, f in live_data_files(table).items() if f.record_count == 4][:1]
    commit_delete_files(table, doomed)
    ids["delete"] = _head(table)
    table.append(rows(4, start=20))
    ids["b"] = _head(table)
    commit_replace(table)
    ids["replace"] = _head(table)
    victim = sorted(live_data_files(table))[0]
    commit_overwrite_files(table, [victim], rows(2, start=30))
    ids["overwrite"] = _head(table)
    table.append(rows(4, start=40))
    ids["c"] = _head(table)
    return catalog, table, ids


def _operations(table: Table) -> list[str]:
    return [s.summary.operation.value for s in table.metadata.snapshots]  # type: ignore[union-attr]


def test_fixture_has_every_snapshot_kind(mixed: Mixed) -> None:
    _, table, _ = mixed
    assert _operations(table) == ["append", "append", "delete", "append", "replace", "overwrite",
                                  "append"]


def test_delete_in_range_fails_by_default(mixed: Mixed) -> None:
    catalog, _, ids = mixed
    with pytest.raises(SnapshotPolicyError) as info:
        _read(catalog, startSnapshotId=ids["start"], endSnapshotId=ids["b"])
    error = info.value
    assert error.snapshot_id == ids["delete"]
    assert error.operation == "delete"
    assert str(ids["delete"]) in str(error)
    assert "ignoreDeletes" in str(error)
    # also when only planning
    with pytest.raises(SnapshotPolicyError):
        list(_source(catalog, startSnapshotId=ids["start"]).plan())


def test_overwrite_in_range_fails_by_default(mixed: Mixed) -> None:
    catalog, _, ids = mixed
    for extra in ({}, {"ignoreDeletes": "true"}):
        with pytest.raises(SnapshotPolicyError) as info:
            _read(catalog, startSnapshotId=ids["delete"], **extra)
        assert info.value.snapshot_id == ids["overwrite"]
        assert info.value.operation == "overwrite"
        message = str(info.value)
        assert str(ids["overwrite"]) in message
        assert "ignoreChanges" in message and "skipChangeCommits" in message


@pytest.mark.parametrize("option", ["ignoreDeletes", "ignoreChanges", "skipChangeCommits"])
def test_delete_skipped_by_option(mixed: Mixed, option: str) -> None:
    catalog, table, ids = mixed
    result = _read(catalog, startSnapshotId=ids["start"], endSnapshotId=ids["b"],
                   **{option: "true"})
    assert_same_rows(result, _oracle(table, ids["start"], ids["b"]))
    assert _ids(result) == [10, 11, 12, 13, 20, 21, 22, 23]


def test_replace_is_skipped(mixed: Mixed) -> None:
    catalog, table, ids = mixed
    result = _read(catalog, startSnapshotId=ids["b"], endSnapshotId=ids["replace"])
    assert result.num_rows == 0
    assert list(_source(catalog, startSnapshotId=ids["b"], endSnapshotId=ids["replace"]).plan()) \
        == []
    assert_same_rows(result, _oracle(table, ids["b"], ids["replace"]))


def test_skip_change_commits_skips_the_overwrite(mixed: Mixed) -> None:
    catalog, table, ids = mixed
    result = _read(catalog, startSnapshotId=ids["start"], skipChangeCommits="true")
    assert_same_rows(result, _oracle(table, ids["start"], None))
    assert _ids(result) == [10, 11, 12, 13, 20, 21, 22, 23, 40, 41, 42, 43]


def test_ignore_changes_emits_the_overwrites_added_files(mixed: Mixed) -> None:
    catalog, table, ids = mixed
    result = _read(catalog, startSnapshotId=ids["start"], ignoreChanges="true")
    # the appends, plus the rows the overwrite added (30, 31); the replace adds nothing
    assert _ids(result) == [10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 40, 41, 42, 43]
    appended = _ids(_oracle(table, ids["start"], None))
    assert _ids(result) == sorted([*appended, 30, 31])
    overwrite = [s for s in _source(catalog, startSnapshotId=ids["start"],
                                    ignoreChanges="true").plan()
                 if s.snapshot_id == ids["overwrite"]]
    assert len(overwrite) == 1


def test_ignore_deletes_with_row_level_delete(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(5))
    start = _head(table)
    table.append(rows(5, start=5))
    path = next(p for p, f in live_data_files(table).items() if f.record_count == 5
                and p not in {s.file_path for s in _source(catalog, snapshotId=start).plan()})
    add_position_deletes(table, {path: [0]})
    deleted = _head(table)
    table.append(rows(5, start=10))
    with pytest.raises(SnapshotPolicyError) as info:
        _read(catalog, startSnapshotId=start)
    assert info.value.snapshot_id == deleted
    result = _read(catalog, startSnapshotId=start, ignoreDeletes="true")
    # incremental reads emit appended rows; a later delete does not retract them
    assert_same_rows(result, _oracle(table, start, None))
    assert _ids(result) == list(range(5, 15))
    # an overwrite made of position deletes alone adds no data file: nothing to emit
    add_position_deletes(table, {path: [1]}, operation=Operation.OVERWRITE)
    result = _read(catalog, startSnapshotId=start, ignoreChanges="true")
    assert _ids(result) == list(range(5, 15))


# --------------------------------------------------------------------------- pruning


def test_partition_pruning(catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=BY_KIND)
    table.append(rows(30))
    table.append(rows(30, start=30))
    everything = list(_source(catalog).plan())
    pruned = list(_source(catalog, filter="kind = 'a'").plan())
    assert len(everything) == 6
    assert len(pruned) == 2
    assert {s.partition for s in pruned} == {("a",)}
    for text in ("kind = 'a'", "kind = 'a' AND id > 40", "kind IN ('a', 'c') OR id < 3",
                 "kind != 'b'", "kind IS NULL", "id >= 1000"):
        result = _read(catalog, filter=text)
        assert_same_rows(result, table.scan(row_filter=text).to_arrow())


def test_metrics_pruning(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    for i in range(5):
        table.append(rows(10, start=100 * i))
    assert len(list(_source(catalog).plan())) == 5
    pruned = list(_source(catalog, filter="id >= 200 AND id < 310").plan())
    assert len(pruned) == 2
    for text in ("id >= 200 AND id < 310", "id = 405", "id > 10000", "value > 200.0",
                 "kind = 'a' AND id < 105"):
        assert_same_rows(_read(catalog, filter=text), table.scan(row_filter=text).to_arrow())
    assert list(_source(catalog, filter="id > 10000").plan()) == []


def test_filter_on_time_travel(catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=BY_KIND)
    table.append(rows(12))
    first = _head(table)
    table.append(rows(12, start=12))
    result = _read(catalog, snapshotId=first, filter="kind = 'c' OR id = 4")
    assert_same_rows(result, table.scan(snapshot_id=first, row_filter="kind = 'c' OR id = 4")
                     .to_arrow())
    assert len(list(_source(catalog, snapshotId=first, filter="kind = 'c'").plan())) == 1


# --------------------------------------------------------------------------- deletes in plans


def test_delete_files_follow_sequence_numbers(catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=BY_KIND)
    table.append(rows(9))
    old = live_data_files(table)
    old_a = next(p for p, f in old.items() if f.partition == ("a",) or tuple(f.partition) == ("a",))
    add_position_deletes(table, {old_a: [0]})
    table.append(rows(9, start=9))
    splits = list(_source(catalog).plan())
    with_deletes = [s for s in splits if s.delete_files]
    # only the older data file of partition 'a' gets the delete file
    assert [s.file_path for s in with_deletes] == [old_a]
    (ref,) = with_deletes[0].delete_files
    assert ref.content == 1
    assert ref.referenced_data_file == old_a
    assert ref.sequence_number > with_deletes[0].sequence_number
    assert_same_rows(_read(catalog), table.scan().to_arrow())


def test_missing_manifest_and_manifest_list(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(3))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    (manifest,) = snapshot.manifests(table.io)
    os.remove(manifest.manifest_path.removeprefix("file://"))
    with pytest.raises(DataFileError) as info:
        list(_source(catalog).plan())
    assert manifest.manifest_path in str(info.value)
    assert str(snapshot.snapshot_id) in str(info.value)
    os.remove(snapshot.manifest_list.removeprefix("file://"))
    with pytest.raises(DataFileError) as info:
        list(_source(catalog).plan())
    assert snapshot.manifest_list in str(info.value)


def test_incremental_snapshot_id_column_names_the_adding_snapshot(appends: Appends) -> None:
    catalog, _, ids = appends
    result = _read(catalog, startSnapshotId=ids[1], metadataColumns="_snapshot_id")
    by_snapshot: dict[int, list[int]] = {}
    for row in result.to_pylist():
        by_snapshot.setdefault(row["_snapshot_id"], []).append(row["id"])
    assert {k: sorted(v) for k, v in by_snapshot.items()} == {
        ids[2]: list(range(20, 26)), ids[3]: list(range(30, 36))}
    # a full scan names the scanned snapshot
    head = _read(catalog, metadataColumns="_snapshot_id")
    assert set(head.column("_snapshot_id").to_pylist()) == {ids[3]}
