"""Split planning behind a Protocol: full snapshot scans and per-snapshot changes.

Runs on the enumerator (driver). Determinism: for the same table metadata, the
same snapshot and the same options, the planner yields the same splits with the
same ids in the same order in any process: manifest-list order, then entry order,
then byte-range order. Splits are yielded lazily, so a million-file snapshot is
never held in memory at once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Protocol

from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.transforms import VoidTransform

from icefloe.enumerator.deletes import INITIAL_SEQUENCE_NUMBER, DeleteIndex, partition_tuple
from icefloe.enumerator.discovery import (
    FilterEvaluators,
    live_entries,
    snapshot_changes,
    snapshot_manifests,
)
from icefloe.splits.sizing import byte_ranges
from icefloe.splits.split import FileSplit, make_split_id

log = logging.getLogger(__name__)


class SplitPlanner(Protocol):
    """What the enumerators need from a table (a test double can implement it)."""

    def plan_snapshot(self, snapshot: Snapshot, start_ordinal: int = 0) -> Iterator[FileSplit]:
        """Every live data file of ``snapshot`` as splits, from ``start_ordinal`` (inclusive)."""
        ...

    def plan_added(self, snapshot: Snapshot) -> Iterator[FileSplit]:
        """The data files ``snapshot`` itself added, as splits."""
        ...


class TableSplitPlanner:
    """Plans splits from real table metadata.

    Args:
        metadata: table metadata (immutable value).
        io: the table's FileIO.
        schema: the read schema the ``filter`` binds to.
        filter_text: a PyIceberg row-filter string, or None.
        case_sensitive: how filter column names resolve.
        split_size: target bytes per split (big files are cut on row-group boundaries).
    """

    def __init__(self, metadata: TableMetadata, io: FileIO, schema: Schema,
                 filter_text: str | None, case_sensitive: bool, split_size: int) -> None:
        self.metadata = metadata
        self.io = io
        self.split_size = split_size
        self.filters = FilterEvaluators(metadata, schema, filter_text, case_sensitive)
        # as Java's PartitionSpec.isUnpartitioned(): a spec of void fields only (a v1 table's
        # removed partition fields) is unpartitioned, so its equality deletes are global
        self._unpartitioned = frozenset(
            spec.spec_id for spec in metadata.partition_specs
            if all(isinstance(f.transform, VoidTransform) for f in spec.fields)
        )

    def _entry_splits(self, entry: ManifestEntry, snapshot_id: int, first_ordinal: int,
                      deletes: DeleteIndex | None) -> list[FileSplit]:
        df = entry.data_file
        seq = entry.sequence_number or INITIAL_SEQUENCE_NUMBER
        partition = partition_tuple(df.partition)
        applied = deletes.for_data_file(seq, df.file_path, df.spec_id, partition) if deletes else ()
        file_format = df.file_format
        fmt = file_format.name if hasattr(file_format, "name") else str(file_format)
        path = df.file_path
        size = df.file_size_in_bytes
        if size <= self.split_size:  # one range: what byte_ranges returns, without the call
            return [FileSplit(
                split_id=make_split_id(snapshot_id, path, 0, size),
                file_path=path, file_format=fmt, start=0, length=size,
                record_count=df.record_count, file_size=size,
                file_record_count=df.record_count, spec_id=df.spec_id, partition=partition,
                snapshot_id=snapshot_id, sequence_number=seq, ordinal=first_ordinal,
                delete_files=applied,
            )]
        ranges = byte_ranges(size, df.split_offsets, self.split_size)
        out = []
        for i, (start, length) in enumerate(ranges):
            records = df.record_count if len(ranges) == 1 else \
                max(1, df.record_count * length // max(size, 1))
            out.append(FileSplit(
                split_id=make_split_id(snapshot_id, path, start, length),
                file_path=path, file_format=fmt, start=start, length=length,
                record_count=records, file_size=size,
                file_record_count=df.record_count, spec_id=df.spec_id, partition=partition,
                snapshot_id=snapshot_id, sequence_number=seq, ordinal=first_ordinal + i,
                delete_files=applied,
            ))
        return out

    def _delete_index(self, snapshot: Snapshot, manifests: list) -> DeleteIndex:
        index = DeleteIndex(self._unpartitioned)
        delete_manifests = [m for m in manifests if m.content == ManifestContent.DELETES]
        def keep(entry: ManifestEntry) -> bool:
            return self.filters.partition_ok(entry.data_file.spec_id)(entry.data_file)

        for entry in live_entries(self.io, delete_manifests, snapshot.snapshot_id, keep):
            index.add(entry)
        return index

    def plan_snapshot(self, snapshot: Snapshot, start_ordinal: int = 0) -> Iterator[FileSplit]:
        manifests = snapshot_manifests(self.io, snapshot)
        deletes = self._delete_index(snapshot, manifests)
        data = [
            m for m in manifests
            if m.content == ManifestContent.DATA
            and self.filters.manifest_ok(m.partition_spec_id)(m)
        ]
        ordinal = 0
        # stats are only read by the metrics filter: without a filter, skip decoding them
        for entry in live_entries(self.io, data, snapshot.snapshot_id,
                                  lambda e: self.filters.file_ok(e.data_file),
                                  with_stats=not self.filters.always_true):
            for split in self._entry_splits(entry, snapshot.snapshot_id, ordinal, deletes):
                if split.ordinal >= start_ordinal:
                    yield split
                ordinal += 1

    def plan_added(self, snapshot: Snapshot) -> Iterator[FileSplit]:
        changes = snapshot_changes(self.io, snapshot)
        deletes = None
        if changes.added_deletes:
            deletes = DeleteIndex(self._unpartitioned)
            for entry in changes.added_deletes:
                deletes.add(entry)
        ordinal = 0
        for entry in changes.added_data:
            if entry.data_file.content != DataFileContent.DATA or \
                    not self.filters.file_ok(entry.data_file):
                continue
            for split in self._entry_splits(entry, snapshot.snapshot_id, ordinal, deletes):
                yield split
                ordinal += 1
