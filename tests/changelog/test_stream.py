"""Changelog streams on the local engine and on Ray: every commit's changes, judged by the
multiset oracle of PyIceberg's scans, delivered once across a restart from the checkpoint."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icefloe import IcebergSource
from icefloe.coordinator import StreamBase
from tests.helpers.changelog import changes_by_commit, check_every_snapshot, rows_at
from tests.helpers.tables import add_position_deletes, live_data_files, make_table, rows

OPTIONS = {"changelog": "true", "startingVersion": "earliest", "pollIntervalMs": "50"}
pytestmark = pytest.mark.timeout(240)


def _open(engine: str, catalog: SqlCatalog, checkpoint: str) -> StreamBase:
    if engine == "local":
        stream: StreamBase = IcebergSource("db.events", catalog=catalog, options=OPTIONS) \
            .stream(checkpoint=checkpoint, parallelism=2)
    else:
        import icefloe.ray

        stream = icefloe.ray.RayStream("db.events", catalog=catalog, options=OPTIONS,
                                       checkpoint=checkpoint, num_readers=1,
                                       reader_num_cpus=0.25)
    stream.start()
    return stream


def _until(items: Iterator[Any], commits: set[int], got: list[dict[str, Any]],
           timeout_s: float = 120) -> None:
    """Consume (and ack) items until every snapshot of ``commits`` has delivered rows."""
    deadline = time.monotonic() + timeout_s
    seen = {r["_commit_snapshot_id"] for r in got}
    while not commits <= seen:
        assert time.monotonic() < deadline, f"no changes of {commits - seen}"
        item = next(items)
        batch = item.batch.to_pylist()
        got.extend(batch)
        seen.update(r["_commit_snapshot_id"] for r in batch)
        item.ack(wait=True)


def test_changelog_stream_delivers_every_commit_once(engine: str, catalog: SqlCatalog,
                                                     tmp_path: Path) -> None:
    table = make_table(catalog)
    table.append(rows(10))
    ckpt = str(tmp_path / "ckpt")
    got: list[dict[str, Any]] = []
    with _open(engine, catalog, ckpt) as stream:
        items = iter(stream)
        _until(items, {table.current_snapshot().snapshot_id}, got)
        table.append(rows(4, start=10))
        table.delete("id < 2")                                  # copy-on-write delete
        table = catalog.load_table("db.events")
        first = sorted(live_data_files(table))[0]
        add_position_deletes(table, {first: [0]})               # merge-on-read delete
        table = catalog.load_table("db.events")
        _until(items, {s.snapshot_id for s in table.snapshots()}, got)
    assert check_every_snapshot(table, got) == 4
    # a restart from the checkpoint re-delivers nothing acknowledged: only what is new
    table.append(rows(2, start=50))
    table = catalog.load_table("db.events")
    again: list[dict[str, Any]] = []
    with _open(engine, catalog, ckpt) as stream:
        _until(iter(stream), {table.current_snapshot().snapshot_id}, again)
    assert sorted((r["id"], r["_change_type"]) for r in again) == [(50, "INSERT"),
                                                                  (51, "INSERT")]


@pytest.mark.ray
@pytest.mark.usefixtures("ray_local")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")
def test_ray_bounded_changelog_matches_the_oracle(catalog: SqlCatalog) -> None:
    import icefloe.ray

    table = make_table(catalog)
    table.append(rows(8))
    table.delete("id < 3")
    table = catalog.load_table("db.events")
    add_position_deletes(table, {sorted(live_data_files(table))[0]: [0]})
    table = catalog.load_table("db.events")
    out = icefloe.ray.read("db.events", catalog=catalog,
                           options={"changelog": "true"}).to_arrow_refs()
    import ray

    got = [r for ref in out for r in ray.get(ref).to_pylist()]
    assert check_every_snapshot(table, got) == 3
    first = table.snapshots()[0].snapshot_id
    net = icefloe.ray.read("db.events", catalog=catalog, options={
        "changelog": "true", "netChanges": "true", "startSnapshotId": str(first)})
    got = [{**r, "_commit_snapshot_id": 0} for r in net.take_all()]
    before, after = rows_at(table, first), rows_at(table, table.current_snapshot().snapshot_id)
    assert changes_by_commit(got)[0] == (before - after, after - before)


def test_a_stream_that_starts_with_a_scan_delivers_the_table_as_inserts(
        catalog: SqlCatalog, tmp_path: Path) -> None:
    """Without startingVersion a stream scans the head first: its live rows (deletes
    applied) are INSERTs of the head snapshot, then each later commit's changes follow."""
    table = make_table(catalog)
    table.append(rows(6))
    add_position_deletes(table, {sorted(live_data_files(table))[0]: [1]})
    table = catalog.load_table("db.events")
    head = table.current_snapshot().snapshot_id
    options = {"changelog": "true", "pollIntervalMs": "50"}
    got: list[dict[str, Any]] = []
    with IcebergSource("db.events", catalog=catalog, options=options).stream(
            checkpoint=str(tmp_path / "ckpt")) as stream:
        items = iter(stream)
        _until(items, {head}, got)
        table.delete("id == 4")
        table = catalog.load_table("db.events")
        _until(items, {table.current_snapshot().snapshot_id}, got)
    assert sorted((r["id"], r["_change_type"], r["_commit_snapshot_id"]) for r in got) == sorted(
        [*[(i, "INSERT", head) for i in (0, 2, 3, 4, 5)],
         (4, "DELETE", table.current_snapshot().snapshot_id)])
    assert {r["_change_ordinal"] for r in got if r["_commit_snapshot_id"] == head} == {
        table.metadata.snapshot_by_id(head).sequence_number}
