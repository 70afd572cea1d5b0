"""Each policy option and alias on a delete snapshot and on an overwrite snapshot.

Every alias means what it means where it comes from (README, "Where the aliases come
from"): Iceberg Spark's ``streaming-skip-delete-snapshots`` skips deletes only and
``streaming-skip-overwrite-snapshots`` overwrites only (its ``shouldProcess``: the other
kind still fails); Delta's ``ignoreDeletes`` / ``ignoreChanges`` / ``skipChangeCommits``;
``start-snapshot-id``, in a bounded read Iceberg Spark's incremental read and in a stream
Iceberg Flink's INCREMENTAL_FROM_SNAPSHOT_ID, both of which read append snapshots only.
Rows are checked against PyIceberg's ``incremental_append_scan`` (appends only: what a
skipped snapshot leaves) or, for an emitted overwrite, against its added rows read from
the snapshot's added files by PyIceberg.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table import Table

from icefloe import IcebergSource
from icefloe.errors import SnapshotPolicyError
from icefloe.state.position import Position
from tests.enumerator.test_continuous import enumerator, ids_of, oracle_ids
from tests.helpers.tables import (
    commit_delete_files,
    commit_overwrite_files,
    live_data_files,
    make_catalog,
    make_table,
    rows,
)

FAIL = "fail"
SKIP = "skip"
EMIT = "emit added files"

# (options, what a delete snapshot does, what an overwrite snapshot does)
CASES = [
    ({}, FAIL, FAIL),
    ({"streaming-skip-delete-snapshots": "true"}, SKIP, FAIL),
    ({"streaming-skip-overwrite-snapshots": "true"}, FAIL, SKIP),
    ({"streaming-skip-delete-snapshots": "true",
      "streaming-skip-overwrite-snapshots": "true"}, SKIP, SKIP),
    ({"skipDeletes": "true"}, SKIP, FAIL),
    ({"skipOverwrites": "true"}, FAIL, SKIP),
    ({"ignoreDeletes": "true"}, SKIP, FAIL),
    ({"ignoreChanges": "true"}, SKIP, EMIT),
    ({"skipChangeCommits": "true"}, SKIP, SKIP),
]


def _case_id(case: tuple[dict[str, str], str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in case[0].items()) or "default"


def _build(tmp_path: Path, kind: str) -> tuple[SqlCatalog, Table, int]:
    """Three appends (the start), then a ``kind`` snapshot, then one more append."""
    catalog = make_catalog(tmp_path)
    table = make_table(catalog)
    for i in range(3):
        table.append(rows(4, start=10 * i))
    start = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    victim = next(iter(live_data_files(table)))
    if kind == "delete":
        commit_delete_files(table, [victim])
    else:
        commit_overwrite_files(table, [victim], rows(2, start=700))
    table.append(rows(3, start=900))
    return catalog, table, start


def _added_by_overwrite(table: Table) -> list[int]:
    """Ids of the rows the overwrite snapshot added: its ADDED manifest entries (PyIceberg's
    manifest reader), the files read by ``pyarrow.parquet``."""
    overwrite = next(s for s in table.snapshots()
                     if s.summary is not None and s.summary.operation.value == "overwrite")
    paths = [e.data_file.file_path for m in overwrite.manifests(table.io)
             if m.added_snapshot_id == overwrite.snapshot_id
             for e in m.fetch_manifest_entry(table.io)
             if e.status == ManifestEntryStatus.ADDED]
    assert paths
    ids: list[int] = []
    for path in paths:
        with table.io.new_input(path).open() as stream:
            ids.extend(pq.read_table(stream, columns=["id"]).column("id").to_pylist())
    return sorted(ids)


def _expect(table: Table, start: int, action: str) -> list[int]:
    appended = oracle_ids(table, start, table.current_snapshot().snapshot_id)  # type: ignore[union-attr]
    return sorted(appended + (_added_by_overwrite(table) if action == EMIT else []))


@pytest.mark.parametrize("kind", ["delete", "overwrite"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_stream_policy(tmp_path: Path, kind: str,
                       case: tuple[dict[str, str], str, str]) -> None:
    options, on_delete, on_overwrite = case
    action = on_delete if kind == "delete" else on_overwrite
    catalog, table, start = _build(tmp_path, kind)
    enum = enumerator(catalog, {"startingVersion": "latest", **options})
    # the position the stream held before the snapshot under test
    position = Position.after(start, table.metadata.snapshot_by_id(start).sequence_number)  # type: ignore[union-attr]
    if action == FAIL:
        with pytest.raises(SnapshotPolicyError) as info:
            enum.enumerate(position)
        assert info.value.operation == kind
        return
    got = sorted(ids_of(enum, enum.enumerate(position).splits))
    assert got == _expect(table, start, action)
    assert (900 in got) and (700 in got) == (action == EMIT)


@pytest.mark.parametrize("kind", ["delete", "overwrite"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_bounded_range_policy(tmp_path: Path, kind: str,
                              case: tuple[dict[str, str], str, str]) -> None:
    options, on_delete, on_overwrite = case
    action = on_delete if kind == "delete" else on_overwrite
    catalog, table, start = _build(tmp_path, kind)
    source = IcebergSource("db.events", catalog=catalog,
                           options={"startSnapshotId": str(start), **options})
    if action == FAIL:
        with pytest.raises(SnapshotPolicyError):
            source.to_arrow()
        return
    assert sorted(source.to_arrow().column("id").to_pylist()) == _expect(table, start, action)


@pytest.mark.parametrize("kind", ["delete", "overwrite"])
def test_start_snapshot_id_alias_reads_appends_only(tmp_path: Path, kind: str) -> None:
    """Bounded: Iceberg Spark's incremental read (start exclusive) passes over every
    snapshot but appends, where the canonical startSnapshotId applies the policy."""
    catalog, table, start = _build(tmp_path, kind)
    head = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    for alias in ({"start-snapshot-id": str(start)},
                  {"startSnapshotId": str(start), "end-snapshot-id": str(head)}):
        got = IcebergSource("db.events", catalog=catalog, options=alias).to_arrow()
        assert sorted(got.column("id").to_pylist()) == oracle_ids(table, start, head)
    with pytest.raises(SnapshotPolicyError):
        IcebergSource("db.events", catalog=catalog,
                      options={"startSnapshotId": str(start)}).to_arrow()


@pytest.mark.parametrize("kind", ["delete", "overwrite"])
def test_start_snapshot_id_alias_streams_appends_only(tmp_path: Path, kind: str) -> None:
    """Stream: Iceberg Flink's INCREMENTAL_FROM_SNAPSHOT_ID: from that snapshot inclusive,
    appends only; the canonical startingVersion applies the policy."""
    catalog, table, start = _build(tmp_path, kind)
    head = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    enum = enumerator(catalog, {"start-snapshot-id": str(start)})
    got = sorted(ids_of(enum, enum.enumerate(enum.initial_position()).splits))
    parent = table.metadata.snapshot_by_id(start).parent_snapshot_id  # type: ignore[union-attr]
    assert got == oracle_ids(table, parent, head)  # ``start``'s own rows included
    assert {20, 21, 22, 23} <= set(got)
    canonical = enumerator(catalog, {"startingVersion": str(start)})
    position = canonical.initial_position()
    with pytest.raises(SnapshotPolicyError):  # after the appends before the refused snapshot
        for _ in range(10):
            position = canonical.enumerate(position).to_position
