"""Changelog planning: a snapshot's changes as change splits. Runs on the enumerator.

A changelog read (``changelog=true``) turns every snapshot S of a range or stream (its
parent P) into change rows: DELETE for rows live in P and not in S, INSERT for rows live
in S and not in P (the multiset difference of the table at P and at S), with carry-over
rows (rewritten unchanged, as a copy-on-write delete rewrites a file) cancelled. Which
data files can hold a change follows from S's own manifests only:

| file | rows read | change |
|---|---|---|
| added by S | live in S (S's own position deletes applied) | INSERT |
| removed by S | live in P (P's delete files applied) | DELETE |
| in P and S, its delete files changed | live in P, not in S (and the reverse) | DELETE (INSERT) |

Files of the last kind are the data files whose applicable delete files differ between
P and S (new position deletes, deletion vectors or equality deletes of S; delete files S
removed). They are found from S's manifests alone (P's delete files are S's live ones it
did not add plus the ones it removed, so P's manifests are never read and an expired P
does not matter); only their data is read. A replace snapshot (compaction) changes no
row and gives nothing (the policy skips it).

Splits: a commit with only INSERT-side files (an append) or only DELETE-side files (a
delete) gives one split per byte range of each file, read in parallel and streamed. A
commit with both (an overwrite, a copy-on-write delete, a merge-on-read update) gives
one split per group of files that carry-over rows (and, with ``computeUpdates``, UPDATE
pairs) can connect: per partition when every file has one spec and updates are not
computed, else one group for the commit. Split order and ids are deterministic:
removed files, files with changed deletes, added files, each in manifest order.

``_change_ordinal``: the snapshot's index in a bounded range (0 for the first snapshot
after the start, as Iceberg's changelog view), its sequence number in a stream (stable
across restarts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestFile
from pyiceberg.table.snapshots import Snapshot

from icefloe.enumerator.deletes import INITIAL_SEQUENCE_NUMBER, DeleteIndex
from icefloe.enumerator.discovery import (
    decoded_manifests,
    snapshot_changes,
    snapshot_manifests,
)
from icefloe.enumerator.planner import TableSplitPlanner
from icefloe.splits.split import (
    CHANGE_ADDED,
    CHANGE_EXISTING,
    CHANGE_REMOVED,
    ChangeFile,
    DeleteFileRef,
    FileSplit,
    make_split_id,
)


class ChangelogPlanner:
    """A :class:`~icefloe.enumerator.planner.SplitPlanner` whose splits are changes.

    Args:
        planner: the table's planner (filters, split size, delete indexes).
        io: the table's FileIO.
        compute_updates: one group per commit with both sides (UPDATE pairs may cross
            partitions).
        ordinals: snapshot id -> ``_change_ordinal`` (a bounded range); None: the
            snapshot's sequence number (a stream).
    """

    def __init__(self, planner: TableSplitPlanner, io: FileIO, compute_updates: bool = False,
                 ordinals: dict[int, int] | None = None) -> None:
        self.planner = planner
        self.io = io
        self.compute_updates = compute_updates
        self.ordinals = ordinals

    def ordinal_of(self, snapshot: Snapshot) -> int:
        if self.ordinals is not None:
            return self.ordinals[snapshot.snapshot_id]
        return snapshot.sequence_number or 0

    def _split(self, snapshot: Snapshot, ordinal: int, files: tuple[ChangeFile, ...],
               group: bool) -> FileSplit:
        first = files[0]
        sid = snapshot.snapshot_id
        if group:
            split_id = make_split_id(sid, "changes:" + first.path, 0, len(files))
            start, length = 0, sum(f.length for f in files)
        else:
            split_id = make_split_id(sid, "change:" + first.path, first.start, first.length)
            start, length = first.start, first.length
        return FileSplit(
            split_id=split_id, file_path=first.path, file_format=first.file_format,
            start=start, length=length, record_count=sum(f.record_count for f in files),
            file_size=first.file_size, file_record_count=first.record_count,
            spec_id=first.spec_id, partition=first.partition, snapshot_id=sid,
            sequence_number=snapshot.sequence_number or INITIAL_SEQUENCE_NUMBER,
            ordinal=ordinal, changes=files, change_ordinal=self.ordinal_of(snapshot),
            commit_timestamp_ms=snapshot.timestamp_ms,
        )

    def plan_snapshot(self, snapshot: Snapshot, start_ordinal: int = 0) -> Iterator[FileSplit]:
        """Every live row of ``snapshot`` as an INSERT (a stream's initial scan): the
        planner's splits of the snapshot, same ids and order, as ``CHANGE_ADDED`` ranges."""
        for split in self.planner.plan_snapshot(snapshot, start_ordinal):
            change = _change(CHANGE_ADDED, split, (), split.delete_files)
            yield dataclasses.replace(split, delete_files=(), changes=(change,),
                                      change_ordinal=self.ordinal_of(snapshot),
                                      commit_timestamp_ms=snapshot.timestamp_ms)

    def _indexes(self, snapshot: Snapshot, manifests: list[ManifestFile],
                 removed_deletes: list[ManifestEntry]) -> tuple[DeleteIndex, DeleteIndex]:
        """The delete files that applied in the parent and that apply in ``snapshot``,
        from ``snapshot``'s own delete manifests: its live delete files it did not add,
        plus the ones it removed, were the parent's (so an expired parent is never read)."""
        before = DeleteIndex(self.planner.unpartitioned)
        after = DeleteIndex(self.planner.unpartitioned)
        sid = snapshot.snapshot_id
        for entry in self.planner.live_deletes(snapshot, manifests):
            after.add(entry)
            if entry.snapshot_id != sid:
                before.add(entry)
        for entry in removed_deletes:
            before.add(entry)
        return before, after

    def _ranges(self, kind: int, entry: ManifestEntry, snapshot_id: int,
                index: DeleteIndex) -> list[ChangeFile]:
        """The byte ranges of ``entry``'s data file (as the planner cuts them), with the
        delete files ``index`` applies to it: the parent's for a removed file, the
        commit's own for an added one."""
        ranges = self.planner.entry_splits(entry, snapshot_id, 0, index)
        if kind == CHANGE_REMOVED:
            return [_change(kind, r, r.delete_files, ()) for r in ranges]
        return [_change(kind, r, (), r.delete_files) for r in ranges]

    def plan_added(self, snapshot: Snapshot) -> Iterator[FileSplit]:
        """The changes ``snapshot`` made, as change splits (see the module docstring)."""
        sid = snapshot.snapshot_id
        changes = snapshot_changes(self.io, snapshot)
        file_ok = self.planner.filters.file_ok
        same_commit = DeleteIndex(self.planner.unpartitioned)
        for entry in changes.added_deletes:
            same_commit.add(entry)
        added = [
            entry for entry in changes.added_data
            if entry.data_file.content == DataFileContent.DATA and file_ok(entry.data_file)
        ]
        removed = [e for e in changes.deleted_data if file_ok(e.data_file)]
        deletes_changed = bool(changes.added_deletes or changes.removed_deletes)
        removed_files: list[list[ChangeFile]] = []
        existing: list[ChangeFile] = []
        if removed or deletes_changed:
            manifests = snapshot_manifests(self.io, snapshot)
            before, after = self._indexes(snapshot, manifests, changes.removed_deletes)
            removed_files = [self._ranges(CHANGE_REMOVED, e, sid, before) for e in removed]
            if deletes_changed:
                existing = list(self._existing(
                    snapshot, manifests, {e.data_file.file_path for e in added}, before, after))
        added_files = [self._ranges(CHANGE_ADDED, e, sid, same_commit) for e in added]

        ordinal = 0
        if not (added_files and (removed_files or existing)):  # one side: every range alone
            for ranges in [*removed_files, *([c] for c in existing), *added_files]:
                for change in ranges:
                    yield self._split(snapshot, ordinal, (change,), group=False)
                    ordinal += 1
            return
        whole = [_whole(r) for r in removed_files] + existing + [_whole(r) for r in added_files]
        groups: dict[Any, list[ChangeFile]] = {}
        single_spec = len({c.spec_id for c in whole}) == 1
        for change in whole:
            key = (change.spec_id, change.partition) \
                if single_spec and not self.compute_updates else None
            groups.setdefault(key, []).append(change)
        for files in groups.values():
            yield self._split(snapshot, ordinal, tuple(files), group=True)
            ordinal += 1

    def _existing(self, snapshot: Snapshot, manifests: list[ManifestFile],
                  added_paths: set[str], before_index: DeleteIndex, after_index: DeleteIndex,
                  ) -> Iterator[ChangeFile]:
        """Data files live in the parent and in ``snapshot`` whose applicable delete
        files differ between the two (read from ``snapshot``'s data ``manifests``)."""
        data = [m for m in manifests if m.content == ManifestContent.DATA]
        planner = self.planner
        sid = snapshot.snapshot_id
        for decoded in decoded_manifests(
                self.io, data, sid,
                prepare=lambda batch: TableSplitPlanner.prepare(batch, sid, None)):
            spec_id = decoded.manifest.partition_spec_id
            files = planner.files_of(decoded, unfiltered=True)
            for path, fmt, partition, records, size, seq in zip(
                    files.path, files.file_format, files.partition, files.record_count,
                    files.file_size, files.sequence_number, strict=True):
                if path in added_paths:
                    continue
                before = before_index.for_data_file(seq, path, spec_id, partition)
                after = after_index.for_data_file(seq, path, spec_id, partition)
                if before != after:
                    yield ChangeFile(CHANGE_EXISTING, path, fmt, 0, size, size, records,
                                     spec_id, partition, seq, before, after)


def _change(kind: int, split: FileSplit, before: tuple[DeleteFileRef, ...],
            after: tuple[DeleteFileRef, ...]) -> ChangeFile:
    """The byte range of a planned (plain) ``split`` as a change of ``kind``."""
    return ChangeFile(kind, split.file_path, split.file_format, split.start, split.length,
                      split.file_size, split.record_count, split.spec_id, split.partition,
                      split.sequence_number, before, after)


def _whole(ranges: list[ChangeFile]) -> ChangeFile:
    """The byte ranges of one file as one whole-file change (a group reads files whole)."""
    first = ranges[0]
    return ChangeFile(first.kind, first.path, first.file_format, 0, first.file_size,
                      first.file_size, sum(r.record_count for r in ranges), first.spec_id,
                      first.partition, first.sequence_number, first.deletes_before,
                      first.deletes_after)
