"""The continuous enumerator against real tables; PyIceberg's scans are the oracle."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.table import Table

from icefloe.catalog.handle import open_table
from icefloe.enumerator.continuous import ContinuousEnumerator, Limits, UnitEnd
from icefloe.errors import (
    ExpiredPositionError,
    LineageBreakError,
    SnapshotNotFoundError,
    SnapshotPolicyError,
    TableReplacedError,
)
from icefloe.local.engine import read_batches
from icefloe.options import SourceOptions
from icefloe.reader.context import ReadContext
from icefloe.state.position import Position
from tests.helpers.tables import (
    EVENTS_SCHEMA,
    add_position_deletes,
    commit_delete_files,
    commit_overwrite_files,
    commit_replace,
    drop_and_recreate,
    expire_snapshots,
    live_data_files,
    make_catalog,
    make_table,
    rollback_to,
    rows,
)


def enumerator(catalog, options: dict[str, str] | None = None,
               identifier: str = "db.events") -> ContinuousEnumerator:
    opts = SourceOptions.parse(options or {}).for_mode("continuous")
    return ContinuousEnumerator(open_table(catalog, identifier), opts)


def ids_of(enum: ContinuousEnumerator, splits) -> list[int]:
    ctx = ReadContext.create(enum.handle.metadata, enum.handle.io,
                             enum.handle.metadata.schema(), enum.options)
    out: list[int] = []
    for batch in read_batches(splits, ctx, parallelism=2):
        out.extend(batch.column("id").to_pylist())
    return out


def oracle_ids(table: Table, after: int | None, through: int) -> list[int]:
    scan = table.incremental_append_scan(to_snapshot_id_inclusive=through)
    if after is not None:
        scan = scan.from_snapshot_id_exclusive(after)
    return sorted(scan.to_arrow().column("id").to_pylist())


@pytest.fixture
def table(tmp_path: Path) -> tuple[object, Table]:
    catalog = make_catalog(tmp_path)
    tbl = make_table(catalog)
    for i in range(3):
        tbl.append(rows(20, start=i * 20))
    return catalog, tbl


def test_default_start_scans_the_head_then_follows_appends(table) -> None:
    catalog, tbl = table
    enum = enumerator(catalog)
    head = tbl.current_snapshot()
    start = enum.initial_position()
    assert start == Position("scan", head.snapshot_id, head.sequence_number, 0)
    first = enum.enumerate(start)
    assert sorted(ids_of(enum, first.splits)) == sorted(
        tbl.scan(snapshot_id=head.snapshot_id).to_arrow().column("id").to_pylist())
    assert first.to_position == Position.after(head.snapshot_id, head.sequence_number)
    assert isinstance(first.items[-1], UnitEnd)

    tbl.append(rows(7, start=1000))
    tbl.append(rows(5, start=2000))
    enum.refresh()
    second = enum.enumerate(first.to_position)
    new_head = tbl.current_snapshot().snapshot_id
    assert sorted(ids_of(enum, second.splits)) == oracle_ids(tbl, head.snapshot_id, new_head)
    # commit order: splits of the older snapshot come first
    snaps = [s.snapshot_id for s in second.splits]
    assert snaps == sorted(snaps, key=lambda s: tbl.metadata.snapshot_by_id(s).sequence_number)
    # caught up: nothing new, same position
    third = enum.enumerate(second.to_position)
    assert third.items == () and third.to_position == second.to_position


def test_starting_strategies_resolve_on_the_branch(table) -> None:
    catalog, tbl = table
    snaps = [s.snapshot_id for s in tbl.snapshots()]
    tbl.manage_snapshots().create_branch(snaps[1], "dev").commit()
    # a commit on main only: the branch must not see it
    tbl.append(rows(3, start=500))
    dev = {"ref": "dev"}
    earliest = enumerator(catalog, {**dev, "startingVersion": "earliest"})
    result = earliest.enumerate(earliest.initial_position())
    assert sorted(ids_of(earliest, result.splits)) == oracle_ids(tbl, None, snaps[1])

    latest = enumerator(catalog, {**dev, "startingVersion": "latest"})
    assert latest.initial_position() == Position.after(
        snaps[1], tbl.metadata.snapshot_by_id(snaps[1]).sequence_number)
    assert latest.enumerate(latest.initial_position()).splits == ()

    by_id = enumerator(catalog, {**dev, "startingVersion": str(snaps[1])})
    result = by_id.enumerate(by_id.initial_position())
    assert sorted(ids_of(by_id, result.splits)) == oracle_ids(tbl, snaps[0], snaps[1])

    ts = tbl.metadata.snapshot_by_id(snaps[1]).timestamp_ms
    by_ts = enumerator(catalog, {**dev, "startingTimestamp": str(ts)})
    assert by_ts.initial_position().snapshot_id == snaps[1]

    with pytest.raises(SnapshotNotFoundError, match="startingVersion"):
        enumerator(catalog, {**dev, "startingVersion": str(snaps[2])}).initial_position()


def test_rate_limits_chunk_the_work_and_are_soft(table) -> None:
    catalog, _ = table
    enum = enumerator(catalog, {"startingVersion": "earliest"})
    position = enum.initial_position()
    chunks = []
    while True:
        result = enum.enumerate(position, Limits(max_files=1))
        if not result.items:
            break
        assert len(result.splits) <= 1
        chunks.append(result.splits)
        position = result.to_position
    assert sum(len(c) for c in chunks) == 3
    # soft: a byte limit smaller than any file still admits one split
    enum2 = enumerator(catalog, {"startingVersion": "earliest"})
    tiny = enum2.enumerate(enum2.initial_position(), Limits(max_bytes=1))
    assert len(tiny.splits) == 1
    # snapshots per trigger
    enum3 = enumerator(catalog, {"startingVersion": "earliest"})
    two = enum3.enumerate(enum3.initial_position(), Limits(max_snapshots=2))
    assert len({s.snapshot_id for s in two.splits}) == 2


def test_chunked_enumeration_is_deterministic_across_processes(table) -> None:
    catalog, tbl = table
    for i in range(5):
        tbl.append(rows(3, start=100 + i * 3))
    enum = enumerator(catalog)
    position = enum.initial_position()
    mid = enum.enumerate(position, Limits(max_files=2))
    # a fresh enumerator (as after a restart) from the mid position continues exactly
    fresh = enumerator(catalog)
    rest = fresh.enumerate(mid.to_position)
    whole = enumerator(catalog).enumerate(position)
    assert [s.split_id for s in mid.splits + rest.splits] == [s.split_id for s in whole.splits]


@pytest.mark.parametrize(
    ("options", "expected"),
    [({}, "fail"), ({"ignoreDeletes": "true"}, "skip"), ({"ignoreChanges": "true"}, "skip"),
     ({"skipChangeCommits": "true"}, "skip")],
)
def test_delete_snapshot_policy(table, options, expected) -> None:
    catalog, tbl = table
    enum = enumerator(catalog, {"startingVersion": "latest", **options})
    start = enum.initial_position()
    commit_delete_files(tbl, [next(iter(live_data_files(tbl)))])
    tbl.append(rows(4, start=900))
    enum.refresh()
    if expected == "fail":
        with pytest.raises(SnapshotPolicyError, match="ignoreDeletes=true"):
            enum.enumerate(start)
        return
    result = enum.enumerate(start)
    assert sorted(ids_of(enum, result.splits)) == [900, 901, 902, 903]


@pytest.mark.parametrize(
    ("options", "expected"),
    [({}, "fail"), ({"ignoreDeletes": "true"}, "fail"), ({"ignoreChanges": "true"}, "emit"),
     ({"skipChangeCommits": "true"}, "skip")],
)
def test_overwrite_snapshot_policy(table, options, expected) -> None:
    catalog, tbl = table
    enum = enumerator(catalog, {"startingVersion": "latest", **options})
    start = enum.initial_position()
    victim = next(iter(live_data_files(tbl)))
    commit_overwrite_files(tbl, [victim], rows(2, start=700))
    enum.refresh()
    if expected == "fail":
        with pytest.raises(SnapshotPolicyError, match="overwrite") as info:
            enum.enumerate(start)
        assert "ignoreChanges=true" in str(info.value)
        assert info.value.snapshot_id == tbl.current_snapshot().snapshot_id
        return
    got = sorted(ids_of(enum, enum.enumerate(start).splits))
    assert got == ([700, 701] if expected == "emit" else [])


def test_replace_and_merge_on_read_delete_snapshots(table) -> None:
    catalog, tbl = table
    enum = enumerator(catalog, {"startingVersion": "latest", "ignoreDeletes": "true"})
    start = enum.initial_position()
    before = sorted(tbl.scan().to_arrow().column("id").to_pylist())
    commit_replace(tbl)
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == before
    path = next(iter(live_data_files(tbl)))
    add_position_deletes(tbl, {path: [0]})
    tbl.append(rows(2, start=800))
    enum.refresh()
    result = enum.enumerate(start)
    # the compaction is skipped silently, the row-level delete by ignoreDeletes
    assert sorted(ids_of(enum, result.splits)) == [800, 801]


def test_rollback_is_a_lineage_break(table) -> None:
    catalog, tbl = table
    snaps = [s.snapshot_id for s in tbl.snapshots()]
    enum = enumerator(catalog)
    position = enum.enumerate(enum.initial_position()).to_position
    rollback_to(tbl, snaps[0])
    tbl.append(rows(3, start=600))
    enum.refresh()
    with pytest.raises(LineageBreakError, match="onLineageBreak"):
        enum.enumerate(position)

    head_opts = enumerator(catalog, {"onLineageBreak": "restartFromHead"})
    result = head_opts.enumerate(position)
    assert result.reset and result.items == ()
    assert result.to_position.snapshot_id == tbl.current_snapshot().snapshot_id

    start_opts = enumerator(catalog, {"onLineageBreak": "restartFromStart",
                                      "startingVersion": "earliest"})
    result = start_opts.enumerate(position)
    assert result.reset
    assert sorted(ids_of(start_opts, result.splits)) == oracle_ids(
        tbl, None, tbl.current_snapshot().snapshot_id)


def test_expired_position(table) -> None:
    catalog, tbl = table
    snaps = [s.snapshot_id for s in tbl.snapshots()]
    enum = enumerator(catalog, {"startingVersion": "earliest"})
    first = enum.enumerate(enum.initial_position(), Limits(max_snapshots=1))
    assert first.to_position.snapshot_id == snaps[0]
    expire_snapshots(tbl, [snaps[0]])
    enum.refresh()
    with pytest.raises(ExpiredPositionError, match="failOnDataLoss=false"):
        enum.enumerate(first.to_position)
    lossy = enumerator(catalog, {"failOnDataLoss": "false"})
    result = lossy.enumerate(first.to_position)
    assert sorted(ids_of(lossy, result.splits)) == oracle_ids(tbl, None, snaps[2])


def test_dropped_and_recreated_table(table) -> None:
    catalog, _ = table
    enum = enumerator(catalog)
    position = enum.enumerate(enum.initial_position()).to_position
    new = drop_and_recreate(catalog, "db.events", EVENTS_SCHEMA)
    new.append(rows(3, start=42))
    enum.refresh()
    with pytest.raises(TableReplacedError, match="re-created"):
        enum.enumerate(position)
    restart = enumerator(catalog, {"onLineageBreak": "restartFromStart"})
    restart.identity = "an-old-uuid"
    result = restart.enumerate(position)
    assert sorted(ids_of(restart, result.splits)) == [42, 43, 44]


def test_empty_table_then_first_append(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    tbl = make_table(catalog)
    enum = enumerator(catalog)
    start = enum.initial_position()
    assert start == Position.beginning()
    assert enum.enumerate(start).items == ()
    tbl.append(pa.Table.from_pylist([], schema=rows(1).schema))
    tbl.append(rows(4))
    enum.refresh()
    result = enum.enumerate(start)
    assert sorted(ids_of(enum, result.splits)) == [0, 1, 2, 3]
