"""Bounded changelog reads, judged per snapshot by the multiset oracle: for a snapshot S
with parent P, DELETE rows = rows(P) - rows(S) and INSERT rows = rows(S) - rows(P), where
rows(X) is PyIceberg's own scan of X (or, for equality deletes PyIceberg cannot plan, its
scan of P minus the rows the delete keys match, built by hand)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from icefloe import IcebergSource
from icefloe.errors import InvalidOptionError
from tests.helpers.changelog import DATA, check_every_snapshot, row_key, rows_at
from tests.helpers.tables import (
    EVENTS_SCHEMA,
    add_equality_deletes,
    add_position_deletes,
    commit_overwrite_files,
    commit_replace,
    live_data_files,
    make_table,
    rows,
)


def _history(catalog: SqlCatalog) -> Table:
    """append, append, copy-on-write delete, merge-on-read position delete, copy-on-write
    overwrite, a compaction (replace), append."""
    table = make_table(catalog)
    table.append(rows(10))
    table.append(rows(5, start=10))
    table.delete("id < 3")
    table = catalog.load_table("db.events")
    first = sorted(live_data_files(table))[0]
    add_position_deletes(table, {first: [0, 1]})
    table = catalog.load_table("db.events")
    table.overwrite(rows(2, start=100), overwrite_filter="id >= 12")
    table = catalog.load_table("db.events")
    commit_replace(table)
    table = catalog.load_table("db.events")
    table.append(rows(3, start=200))
    return catalog.load_table("db.events")


def test_every_snapshot_kind_matches_the_multiset_oracle(catalog: SqlCatalog) -> None:
    table = _history(catalog)
    out = IcebergSource("db.events", catalog=catalog, options={"changelog": "true"}).to_arrow()
    assert out.schema.names == [*DATA, "_change_type", "_change_ordinal",
                                "_commit_snapshot_id", "_commit_timestamp"]
    replace = [s for s in table.snapshots() if s.summary.operation.value == "replace"]
    # every snapshot but the replace changed rows (PyIceberg's overwrite is two snapshots)
    assert check_every_snapshot(table, out) == len(table.snapshots()) - 1
    assert replace and replace[0].snapshot_id not in set(out["_commit_snapshot_id"].to_pylist())
    # carry-over: the copy-on-write delete rewrote a 10-row file and deleted 3 rows
    cow = table.snapshots()[2].snapshot_id
    kinds = Counter(r["_change_type"] for r in out.to_pylist()
                    if r["_commit_snapshot_id"] == cow)
    assert kinds == Counter({"DELETE": 3})
    # ordinals count snapshots of the range (the replace has one too), timestamps are the
    # commit's
    by_id = {s.snapshot_id: (i, s.timestamp_ms) for i, s in enumerate(table.snapshots())}
    for row in out.to_pylist():
        ordinal, ts = by_id[row["_commit_snapshot_id"]]
        assert row["_change_ordinal"] == ordinal
        assert int(row["_commit_timestamp"].timestamp() * 1000) == ts


def test_a_range_and_its_end(catalog: SqlCatalog) -> None:
    table = _history(catalog)
    ids = [s.snapshot_id for s in table.snapshots()]
    out = IcebergSource("db.events", catalog=catalog, options={
        "changelog": "true", "startSnapshotId": str(ids[1]), "endSnapshotId": str(ids[4]),
    }).to_arrow()
    assert set(out["_commit_snapshot_id"].to_pylist()) == set(ids[2:5])
    assert sorted(set(out["_change_ordinal"].to_pylist())) == [0, 1, 2]
    check_every_snapshot(table, out, skip={*ids[:2], *ids[5:]})


def test_columns_and_filter_apply_to_change_rows(catalog: SqlCatalog) -> None:
    _history(catalog)
    full = IcebergSource("db.events", catalog=catalog, options={"changelog": "true"}).to_arrow()
    out = IcebergSource("db.events", catalog=catalog, options={
        "changelog": "true", "columns": "value,id", "filter": "id < 13",
        "metadataColumns": "_pos"}).to_arrow()
    assert out.schema.names[:3] == ["value", "id", "_pos"]
    expected = sorted((r["id"], r["_change_type"], r["_commit_snapshot_id"])
                      for r in full.to_pylist() if r["id"] < 13)
    assert sorted((r["id"], r["_change_type"], r["_commit_snapshot_id"])
                  for r in out.to_pylist()) == expected
    # and against PyIceberg's filtered, projected reads of each snapshot and its parent
    table = catalog.load_table("db.events")

    def seen(snapshot_id: int | None) -> Counter[tuple[Any, ...]]:
        if snapshot_id is None:
            return Counter()
        scan = table.scan(snapshot_id=snapshot_id, row_filter="id < 13",
                          selected_fields=("value", "id"))
        return Counter((r["value"], r["id"]) for r in scan.to_arrow().to_pylist())

    for snapshot in table.snapshots():
        before, after = seen(snapshot.parent_snapshot_id), seen(snapshot.snapshot_id)
        rows_of = [r for r in out.to_pylist() if r["_commit_snapshot_id"] == snapshot.snapshot_id]
        assert Counter((r["value"], r["id"]) for r in rows_of
                       if r["_change_type"] == "DELETE") == before - after
        assert Counter((r["value"], r["id"]) for r in rows_of
                       if r["_change_type"] == "INSERT") == after - before


def test_equality_deletes_delete_the_matching_live_rows_of_older_files(
        catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(6))
    table.append(rows(6, start=6))
    table = catalog.load_table("db.events")
    before = table.scan().to_arrow()
    keys = pa.table({"id": [1, 7, 99]}).cast(pa.schema([("id", pa.int64())]))
    add_equality_deletes(table, keys, ["id"])
    table = catalog.load_table("db.events")
    out = IcebergSource("db.events", catalog=catalog, options={
        "changelog": "true", "startSnapshotId": str(table.snapshots()[1].snapshot_id),
    }).to_arrow()
    expected = Counter(row_key(r) for r in before.to_pylist() if r["id"] in (1, 7))
    assert Counter(row_key(r) for r in out.to_pylist()) == expected
    assert set(out["_change_type"].to_pylist()) == {"DELETE"}


def test_compute_updates_pairs_a_key_deleted_and_inserted_in_one_commit(
        catalog: SqlCatalog) -> None:
    """A copy-on-write UPDATE (one commit rewrites the file): the 5 unchanged rows are
    carry-overs, the changed one an UPDATE pair with computeUpdates (the table's identifier
    field id is the default key)."""
    table = make_table(catalog)
    table.append(rows(6))
    table = catalog.load_table("db.events")
    data = rows(6)
    rewritten = data.set_column(4, "value", pa.array([v if i != 4 else 99.0 for i, v in
                                                       enumerate(data["value"].to_pylist())]))
    commit_overwrite_files(table, list(live_data_files(table)), rewritten)
    table = catalog.load_table("db.events")
    start = str(table.snapshots()[0].snapshot_id)
    plain = IcebergSource("db.events", catalog=catalog, options={
        "changelog": "true", "startSnapshotId": start}).to_arrow()
    assert sorted((r["id"], r["value"], r["_change_type"]) for r in plain.to_pylist()) == [
        (4, 2.0, "DELETE"), (4, 99.0, "INSERT")]
    check_every_snapshot(table, plain, skip={table.snapshots()[0].snapshot_id})
    out = IcebergSource("db.events", catalog=catalog, options={
        "changelog": "true", "startSnapshotId": start, "computeUpdates": "true"}).to_arrow()
    assert [(r["id"], r["value"], r["_change_type"]) for r in out.to_pylist()] == [
        (4, 2.0, "UPDATE_BEFORE"), (4, 99.0, "UPDATE_AFTER")]


def test_no_update_pairs_across_commits(catalog: SqlCatalog) -> None:
    """PyIceberg's overwrite is two commits (delete, then append): a key deleted in one and
    inserted in the next is a DELETE and an INSERT, not an update (pairs are per commit)."""
    table = make_table(catalog)
    table.append(rows(6))
    changed = rows(1, start=4).set_column(4, "value", pa.array([99.0]))
    table.overwrite(changed, overwrite_filter="id == 4")
    table = catalog.load_table("db.events")
    out = IcebergSource("db.events", catalog=catalog, options={
        "changelog": "true", "startSnapshotId": str(table.snapshots()[0].snapshot_id),
        "computeUpdates": "true", "identifierColumns": "id"}).to_arrow()
    assert sorted((r["id"], r["_change_type"]) for r in out.to_pylist()) == [
        (4, "DELETE"), (4, "INSERT")]


def test_net_changes_collapse_a_range_to_its_effect(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(4))
    table.append(rows(2, start=10))             # inserted ...
    table.delete("id == 10")                    # ... and deleted inside the range
    table = catalog.load_table("db.events")
    changed = rows(1, start=2).set_column(4, "value", pa.array([7.5]))
    table.overwrite(changed, overwrite_filter="id == 2")
    table = catalog.load_table("db.events")
    first = table.snapshots()[0].snapshot_id
    before = rows_at(table, first)
    after = rows_at(table, table.current_snapshot().snapshot_id)
    options = {"changelog": "true", "startSnapshotId": str(first), "netChanges": "true"}
    out = IcebergSource("db.events", catalog=catalog, options=options).to_arrow()
    removed, added = Counter(), Counter()
    for row in out.to_pylist():
        (removed if row["_change_type"] == "DELETE" else added)[row_key(row)] += 1
    assert (removed, added) == (before - after, after - before)
    assert len(out) == 2 + 1  # id 2's old row; id 2's new row and id 11
    updates = IcebergSource("db.events", catalog=catalog, options={
        **options, "computeUpdates": "true", "identifierColumns": "id"}).to_arrow()
    assert sorted((r["id"], r["_change_type"]) for r in updates.to_pylist()) == [
        (2, "UPDATE_AFTER"), (2, "UPDATE_BEFORE"), (11, "INSERT")]


@pytest.mark.parametrize(("options", "bad", "says"), [
    ({"computeUpdates": "true"}, "computeUpdates", "set changelog=true"),
    ({"changelog": "true", "ignoreDeletes": "true"}, "ignoreDeletes", "every delete"),
    ({"changelog": "true", "snapshotId": "1"}, "snapshotId", "reads a range"),
    ({"changelog": "true", "end-snapshot-id": "1"}, "changelog", "appends only"),
    ({"changelog": "true", "metadataColumns": "_row_id"}, "metadataColumns", "_row_id"),
    ({"changeLog": "maybe"}, "changelog", "maybe"),
])
def test_bad_changelog_options_are_one_typed_error(options: dict[str, str], bad: str,
                                                   says: str) -> None:
    with pytest.raises(InvalidOptionError, match=says) as info:
        IcebergSource("db.events", options=options)
    assert info.value.option == bad


def test_compute_updates_needs_arow_key(catalog: SqlCatalog) -> None:
    make_table(catalog, schema=Schema(*EVENTS_SCHEMA.fields)).append(rows(2))
    source = IcebergSource("db.events", catalog=catalog, options={
        "changelog": "true", "computeUpdates": "true"})
    with pytest.raises(InvalidOptionError, match="identifierColumns") as info:
        source.to_arrow()
    assert info.value.option == "computeUpdates"
    source = IcebergSource("db.events", catalog=catalog, options={
        "changelog": "true", "identifierColumns": "idd"})
    with pytest.raises(InvalidOptionError, match="no column 'idd'"):
        source.to_arrow()


def test_a_merge_on_read_delete_reads_only_the_row_groups_holding_it(
        catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows deleted in the first and the last of 10 row groups: two row groups are read
    (each by its byte range), and the rows are the oracle's."""
    from icefloe.reader.changelog import ChangeReader

    table = make_table(catalog)
    with table.transaction() as tx:
        tx.set_properties({"write.parquet.row-group-limit": "100"})
    table = catalog.load_table("db.events")
    table.append(rows(1000))
    (path,) = live_data_files(table)
    assert pq.ParquetFile(path.removeprefix("file://")).metadata.num_row_groups == 10
    add_position_deletes(table, {path: [3, 50, 990]})
    table = catalog.load_table("db.events")
    reads: list[list[int]] = []
    original = ChangeReader._ranges_holding

    def spy(self: ChangeReader, *args: Any) -> Any:
        out = original(self, *args)
        reads.append([inner.start for inner, _ in out])
        return out

    monkeypatch.setattr(ChangeReader, "_ranges_holding", spy)
    out = IcebergSource("db.events", catalog=catalog, options={
        "changelog": "true", "startSnapshotId": str(table.snapshots()[0].snapshot_id),
    }).to_arrow()
    assert sorted(out["id"].to_pylist()) == [3, 50, 990]
    check_every_snapshot(table, out, skip={table.snapshots()[0].snapshot_id})
    assert len(reads) == 1 and len(reads[0]) == 2  # of the file's 10 row groups
