"""Incremental planning (``plan_added``) through the planning-only decoder, against
PyIceberg's records.

Oracle: the entries ``snapshot_changes`` builds with PyIceberg's manifest reader (the path
``plan_added`` took before: ADDED entries of the snapshot's own manifests, ``file_ok`` for a
filter, ``entry_splits``), and PyIceberg's ``incremental_append_scan`` for the files of
append snapshots. Tables are merge-appended (``commit.manifest-merge.enabled``), so a
snapshot's own manifest also holds the table's earlier files as EXISTING entries and the
files deleted by an overwrite as DELETED ones, which ``plan_added`` must step over.
"""

from __future__ import annotations

import itertools

import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icefloe.enumerator.deletes import DeleteIndex
from icefloe.enumerator.discovery import snapshot_added_manifests
from icefloe.enumerator.planner import TableSplitPlanner
from icefloe.splits.split import FileSplit
from tests.helpers.tables import EVENTS_SCHEMA, add_position_deletes, rows
from tests.helpers.tables import live_data_files as table_data_files

MERGE = {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "2"}


def _merged_table(catalog: Catalog, version: int) -> Table:
    catalog.create_namespace_if_not_exists("db")
    table = catalog.create_table(f"db.merged_v{version}", EVENTS_SCHEMA,
                                 properties={"format-version": str(version), **MERGE})
    for i in range(5):
        table.append(rows(10, start=10 * i))
    table.delete("id >= 12 and id < 15")  # copy-on-write: DELETED + ADDED in one snapshot
    table.append(rows(10, start=100))
    return table


def _reference(planner: TableSplitPlanner, table: Table, snapshot: Snapshot
               ) -> list[FileSplit]:
    """``plan_added`` as it was: PyIceberg's own reading (``fetch_manifest_entry``) of every
    entry of the manifests the snapshot added, kept when the snapshot ADDED it."""
    sid = snapshot.snapshot_id
    added: dict[ManifestContent, list[ManifestEntry]] = {ManifestContent.DATA: [],
                                                        ManifestContent.DELETES: []}
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id == sid:
            added[manifest.content].extend(
                e for e in manifest.fetch_manifest_entry(table.io, discard_deleted=False)
                if e.snapshot_id == sid and e.status == ManifestEntryStatus.ADDED)
    deletes = None
    if added[ManifestContent.DELETES]:
        deletes = DeleteIndex(planner.unpartitioned)
        for entry in added[ManifestContent.DELETES]:
            deletes.add(entry)
    out: list[FileSplit] = []
    for entry in added[ManifestContent.DATA]:
        if planner.filters.file_ok(entry.data_file):
            out.extend(planner.entry_splits(entry, snapshot.snapshot_id, len(out), deletes))
    return out


def _planner(table: Table, filter_text: str | None = None, split_size: int = 1 << 27
             ) -> TableSplitPlanner:
    return TableSplitPlanner(table.metadata, table.io, table.schema(), filter_text, True,
                             split_size)


def _statuses(table: Table, snapshot: Snapshot) -> set[ManifestEntryStatus]:
    """Statuses in the data manifests ``snapshot`` wrote."""
    own = snapshot_added_manifests(table.io, snapshot)
    return {e.status for m in own if m.content == ManifestContent.DATA
            for e in m.fetch_manifest_entry(table.io, discard_deleted=False)}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("split_size", [1 << 27, 600])
def test_added_splits_equal_pyiceberg_entries_on_merged_manifests(
        catalog: SqlCatalog, version: int, split_size: int) -> None:
    table = _merged_table(catalog, version)
    planner = _planner(table, split_size=split_size)
    snapshots = table.snapshots()
    assert len(snapshots) == 7

    for snapshot in snapshots:
        fast = list(planner.plan_added(snapshot))
        assert fast == _reference(planner, table, snapshot), snapshot.snapshot_id
        assert [s.ordinal for s in fast] == list(range(len(fast)))

    # the manifests were merged: later snapshots' own manifests carry EXISTING entries,
    # the overwrite's a DELETED one, and each snapshot still yields only its own files
    assert ManifestEntryStatus.EXISTING in _statuses(table, snapshots[4])
    assert ManifestEntryStatus.DELETED in _statuses(table, snapshots[5])
    for older, newer in itertools.pairwise(snapshots):
        scan = table.incremental_append_scan(from_snapshot_id_exclusive=older.snapshot_id,
                                             to_snapshot_id_inclusive=newer.snapshot_id)
        if newer.summary is not None and newer.summary.operation.value == "append":
            expected = sorted(t.file.file_path for t in scan.plan_files())
            assert sorted({s.file_path for s in planner.plan_added(newer)}) == expected


def test_added_splits_with_a_filter(catalog: SqlCatalog) -> None:
    table = _merged_table(catalog, 2)
    planner = _planner(table, "id >= 35")
    kept = 0
    for snapshot in table.snapshots():
        fast = list(planner.plan_added(snapshot))
        assert fast == _reference(planner, table, snapshot)
        kept += len(fast)
    unfiltered = sum(len(list(_planner(table).plan_added(s))) for s in table.snapshots())
    assert 0 < kept < unfiltered  # the metrics evaluator pruned some files, not all


def test_added_delete_files_apply_to_added_data(catalog: SqlCatalog) -> None:
    """A snapshot that adds only a delete file yields no splits; the delete index of a
    snapshot holds only the delete files it added."""
    table = _merged_table(catalog, 2)
    live = sorted(table_data_files(table))
    snapshot = add_position_deletes(table, {live[0]: [0]})
    table.append(rows(5, start=500))
    table = catalog.load_table("db.merged_v2")
    planner = _planner(table)
    assert list(planner.plan_added(snapshot)) == _reference(planner, table, snapshot) == []
    own = snapshot_added_manifests(table.io, snapshot)
    index = planner.added_deletes(own, snapshot.snapshot_id)
    assert index is not None and index.count == 1
    head = table.current_snapshot()
    assert head is not None
    assert planner.added_deletes(snapshot_added_manifests(table.io, head),
                                 head.snapshot_id) is None
    assert list(planner.plan_added(head)) == _reference(planner, table, head)


def test_ancestor_walk_equals_pyiceberg_and_follows_new_metadata(catalog: SqlCatalog) -> None:
    """``lineage.ancestors`` (a dict index per metadata object) walks the chain PyIceberg's
    ``ancestors_of`` walks, and a refreshed table's metadata gets a fresh index."""
    from pyiceberg.table.snapshots import ancestors_of

    from icefloe.enumerator.lineage import ancestors, snapshot_by_id, snapshots_between

    table = _merged_table(catalog, 2)
    head = table.current_snapshot()
    assert head is not None
    ours = [s.snapshot_id for s in ancestors(head, table.metadata)]
    assert ours == [s.snapshot_id for s in ancestors_of(head, table.metadata)]
    assert len(ours) == 7
    assert [s.snapshot_id for s in snapshots_between(table.metadata, head, ours[3])] == \
        ours[:3][::-1]
    table.append(rows(3, start=900))  # new metadata object: the index is rebuilt
    new_head = table.current_snapshot()
    assert new_head is not None
    assert snapshot_by_id(table.metadata, new_head.snapshot_id) == new_head
    assert [s.snapshot_id for s in ancestors(new_head, table.metadata)][1:] == ours


# --------------------------------------------------------------------------- fetch-ahead


def test_fetched_ahead_equals_read_when_planned(catalog: SqlCatalog) -> None:
    """A backlog planned with its snapshots' files fetched ahead gives the same splits as
    one read snapshot by snapshot; the fetcher holds at most ``depth`` snapshots."""
    from icefloe.enumerator.discovery import ChangeFetcher

    table = _merged_table(catalog, 2)
    snapshots = table.snapshots()
    plain = [list(_planner(table).plan_added(s)) for s in snapshots]
    fetcher = ChangeFetcher(table.io, depth=3)
    planner = TableSplitPlanner(table.metadata, table.io, table.schema(), None, True,
                                1 << 27, fetcher)
    fetcher.ahead(snapshots)
    assert len(fetcher._pending) == 3
    got = []
    for i, snapshot in enumerate(snapshots):
        fetcher.ahead(snapshots[i:])
        got.append(list(planner.plan_added(snapshot)))
    assert got == plain
    assert not fetcher._pending
    # snapshots the stream passed without planning them (skipped by policy) are dropped
    fetcher.ahead(snapshots[:3])
    fetcher.ahead(snapshots[2:])
    assert set(fetcher._pending) == {s.snapshot_id for s in snapshots[2:5]}


def test_fetch_ahead_failure_is_raised_at_its_snapshot_and_read_again(
        catalog: SqlCatalog) -> None:
    """A manifest list that cannot be read fails the planning of its own snapshot (named),
    not of the ones before; once readable, a retry plans it."""
    from pathlib import Path
    from urllib.parse import urlparse

    from icefloe.enumerator.discovery import ChangeFetcher, DataFileError

    table = _merged_table(catalog, 2)
    snapshots = table.snapshots()
    broken = snapshots[3]
    path = Path(urlparse(broken.manifest_list).path)
    saved = path.read_bytes()
    path.unlink()
    fetcher = ChangeFetcher(table.io, depth=8)
    planner = TableSplitPlanner(table.metadata, table.io, table.schema(), None, True,
                                1 << 27, fetcher)
    fetcher.ahead(snapshots)
    for snapshot in snapshots[:3]:
        assert list(planner.plan_added(snapshot))
    with pytest.raises(DataFileError, match=f"manifest list .* of snapshot {broken.snapshot_id}"):
        list(planner.plan_added(broken))
    path.write_bytes(saved)
    assert list(planner.plan_added(broken)) == _reference(planner, table, broken)


@pytest.mark.parametrize("policy", ["ignoreChanges", "skipOverwrites"])
def test_continuous_enumerator_fetches_the_backlog_ahead(catalog: SqlCatalog, policy: str
                                                         ) -> None:
    """The stream's enumerator fetches the next snapshots while it plans one; a rate-limited
    catch-up across calls yields every added file once, in snapshot order (a snapshot
    skipped by policy is fetched, never planned, and does not hold the fetcher)."""
    from icefloe.catalog.handle import open_table
    from icefloe.enumerator.continuous import ContinuousEnumerator, Limits
    from icefloe.options import SourceOptions

    table = _merged_table(catalog, 2)
    first = table.snapshots()[0].snapshot_id
    opts = SourceOptions.parse({"startingVersion": str(first), "maxFilesPerTrigger": "2",
                                policy: "true"}).for_mode("continuous")
    enum = ContinuousEnumerator(open_table(catalog, "db.merged_v2"), opts)
    position, limits = enum.initial_position(), Limits.from_options(opts)
    got: list[FileSplit] = []
    held = []
    while (result := enum.enumerate(position, limits)).to_position != position:
        got.extend(i for i in result.items if isinstance(i, FileSplit))
        position = result.to_position
        assert enum._fetcher is not None
        held.append(len(enum._fetcher._pending))
    planned = [snap for snap in table.snapshots() if policy == "ignoreChanges"
               or snap.summary is None or snap.summary.operation.value != "overwrite"]
    assert len(planned) == (7 if policy == "ignoreChanges" else 6)
    expected = [s for snap in planned for s in _planner(table).plan_added(snap)]
    assert got == expected
    assert max(held) > 0  # the next snapshots were in flight between calls
    assert enum._fetcher is not None and len(enum._fetcher._pending) <= enum._fetcher.depth


def test_own_entries_equal_pyiceberg_records_of_the_snapshot(catalog: SqlCatalog) -> None:
    """``own_entries`` (what ``snapshot_changes`` and so the changelog read) gives the
    records PyIceberg's reader builds for the entries the manifest's snapshot ADDED or
    DELETED, in order, data and delete manifests alike, and steps over the rest."""
    from icefloe.enumerator.discovery import fetch_bytes
    from icefloe.enumerator.manifest_decoder import own_entries

    table = _merged_table(catalog, 2)
    live = sorted(table_data_files(table))
    add_position_deletes(table, {live[0]: [0]})
    table = catalog.load_table("db.merged_v2")
    statuses, skipped = set(), 0
    for snapshot in table.snapshots():
        for manifest in snapshot_added_manifests(table.io, snapshot):
            every = manifest.fetch_manifest_entry(table.io, discard_deleted=False)
            expected = [e for e in every if e.snapshot_id == snapshot.snapshot_id
                        and e.status != ManifestEntryStatus.EXISTING]
            content = fetch_bytes(table.io, manifest.manifest_path)
            assert isinstance(content, bytes)
            got = own_entries(content, manifest)
            assert got == expected
            assert [e.data_file.file_path for e in got] == \
                [e.data_file.file_path for e in expected]
            statuses |= {(manifest.content, e.status) for e in got}
            skipped += len(every) - len(got)
    assert statuses == {(ManifestContent.DATA, ManifestEntryStatus.ADDED),
                        (ManifestContent.DATA, ManifestEntryStatus.DELETED),
                        (ManifestContent.DELETES, ManifestEntryStatus.ADDED)}
    assert skipped > 10  # merged manifests' EXISTING entries were stepped over
