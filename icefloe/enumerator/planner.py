"""Split planning behind a Protocol: full snapshot scans and per-snapshot changes.

Runs on the enumerator (driver). Determinism: for the same table metadata, the
same snapshot and the same options, the planner yields the same splits with the
same ids in the same order in any process: manifest-list order, then entry order,
then byte-range order. Splits are yielded lazily, so a million-file snapshot is
never held in memory at once; with ``watermarkColumn`` a unit is planned whole and yielded
in event-time order instead (:mod:`icefloe.enumerator.event_time`).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.transforms import VoidTransform

from icefloe.enumerator.deletes import INITIAL_SEQUENCE_NUMBER, DeleteIndex, partition_tuple
from icefloe.enumerator.discovery import (
    ChangeFetcher,
    FilterEvaluators,
    live_data_files_of,
    live_entries,
    read_own_entries,
    snapshot_manifests,
)
from icefloe.enumerator.event_time import EventTimeColumn, order_unit
from icefloe.enumerator.manifest_decoder import FileStats, KeepFile, LiveDataFile
from icefloe.splits.sizing import byte_ranges
from icefloe.splits.split import FileSplit, new_split, split_id_maker

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
        fetcher: what fetches the files :meth:`plan_added` reads, ahead of it (the
            continuous enumerator's, which it tells the coming snapshots); None: one
            that reads them when asked.
        event_time: ``watermarkColumn`` resolved: each unit (a snapshot's scan, its
            added files) is planned whole and yielded in event-time order, ordinals
            renumbered (:mod:`icefloe.enumerator.event_time`); None: file order, lazily.
        filter_renames: ``(name as typed, name in schema)`` of the filter's columns
            renamed since it was typed (:mod:`icefloe.reader.names`).
    """

    def __init__(self, metadata: TableMetadata, io: FileIO, schema: Schema,
                 filter_text: str | None, case_sensitive: bool, split_size: int,
                 fetcher: ChangeFetcher | None = None,
                 event_time: EventTimeColumn | None = None,
                 filter_renames: tuple[tuple[str, str], ...] = ()) -> None:
        self.event_time = event_time
        self.metadata = metadata
        self.io = io
        self.split_size = split_size
        self.fetcher = fetcher if fetcher is not None else ChangeFetcher(io, depth=0)
        self.filters = FilterEvaluators(metadata, schema, filter_text, case_sensitive,
                                        filter_renames)
        # as Java's PartitionSpec.isUnpartitioned(): a spec of void fields only (a v1 table's
        # removed partition fields) is unpartitioned, so its equality deletes are global
        self.unpartitioned = frozenset(
            spec.spec_id for spec in metadata.partition_specs
            if all(isinstance(f.transform, VoidTransform) for f in spec.fields)
        )
        self._ids: tuple[int, Callable[[str, int, int], str]] | None = None

    def split_ids(self, snapshot_id: int) -> Callable[[str, int, int], str]:
        """:func:`split_id_maker` of ``snapshot_id`` (the last one made is kept: planning
        goes snapshot by snapshot)."""
        ids = self._ids
        if ids is None or ids[0] != snapshot_id:
            ids = self._ids = (snapshot_id, split_id_maker(snapshot_id))
        return ids[1]

    def entry_splits(self, entry: ManifestEntry, snapshot_id: int, first_ordinal: int,
                      deletes: DeleteIndex | None) -> list[FileSplit]:
        df = entry.data_file
        file_format = df.file_format
        fmt = file_format.name if hasattr(file_format, "name") else str(file_format)
        return self.file_splits(
            df.file_path, fmt, partition_tuple(df.partition), df.record_count,
            df.file_size_in_bytes, df.split_offsets, df.spec_id,
            entry.sequence_number or INITIAL_SEQUENCE_NUMBER, snapshot_id, first_ordinal,
            deletes,
        )

    def file_splits(self, path: str, fmt: str, partition: tuple[Any, ...], records: int,
                     size: int, split_offsets: list[int] | None, spec_id: int, seq: int,
                     snapshot_id: int, first_ordinal: int, deletes: DeleteIndex | None,
                     ) -> list[FileSplit]:
        """The splits of one data file, ordinals from ``first_ordinal`` (byte-range order)."""
        applied = deletes.for_data_file(seq, path, spec_id, partition) if deletes else ()
        split_id = self.split_ids(snapshot_id)
        if size <= self.split_size:  # one range: what byte_ranges returns, without the call
            return [new_split(split_id(path, 0, size), path, fmt, 0, size,
                              records, size, records, spec_id, partition, snapshot_id, seq,
                              first_ordinal, applied)]
        ranges = byte_ranges(size, split_offsets, self.split_size)
        out = []
        for i, (start, length) in enumerate(ranges):
            part_records = records if len(ranges) == 1 else \
                max(1, records * length // max(size, 1))
            out.append(new_split(split_id(path, start, length), path, fmt,
                                 start, length, part_records, size, records, spec_id,
                                 partition, snapshot_id, seq, first_ordinal + i, applied))
        return out

    def live_deletes(self, snapshot: Snapshot, manifests: list) -> Iterator[ManifestEntry]:
        """The live delete files of ``snapshot`` (whose ``manifests`` these are) that the
        filter's partition pruning keeps, in manifest order."""
        delete_manifests = [m for m in manifests if m.content == ManifestContent.DELETES]

        def keep(entry: ManifestEntry) -> bool:
            return self.filters.partition_ok(entry.data_file.spec_id)(entry.data_file)

        return live_entries(self.io, delete_manifests, snapshot.snapshot_id, keep)

    def delete_index(self, snapshot: Snapshot, manifests: list) -> DeleteIndex:
        """The delete files of ``snapshot`` indexed by the data files they apply to."""
        index = DeleteIndex(self.unpartitioned)
        for entry in self.live_deletes(snapshot, manifests):
            index.add(entry)
        return index

    def plan_snapshot(self, snapshot: Snapshot, start_ordinal: int = 0) -> Iterator[FileSplit]:
        manifests = snapshot_manifests(self.io, snapshot)
        deletes = self.delete_index(snapshot, manifests)
        data = [
            m for m in manifests
            if m.content == ManifestContent.DATA
            and self.filters.manifest_ok(m.partition_spec_id)(m)
        ]
        if self.event_time is not None:
            yield from order_unit(
                self._bounded_files(snapshot.snapshot_id, data,
                                    deletes if deletes.count else None, added_only=False),
                self.event_time, start_ordinal)
            return
        yield from self._plan_decoded(snapshot.snapshot_id, data, start_ordinal,
                                      deletes if deletes.count else None)

    def _bounded_files(self, snapshot_id: int, data: list[ManifestFile],
                       deletes: DeleteIndex | None, added_only: bool,
                       contents: Iterable[bytes | Exception] | None = None,
                       ) -> Iterator[tuple[list[FileSplit], int | None]]:
        """Each live (``added_only``: added) file of ``data`` that the filter keeps, as its
        splits (file-order ordinals) with the watermark column's lower bound. The stats
        are decoded for the bound (the filtered-scan decoder) and the filter, if any,
        still decides; the bound of each kept file is noted as the decoder offers it,
        in the order the files come out."""
        column = self.event_time
        assert column is not None
        filter_for = None if self.filters.always_true else self.filters.stats_ok
        noted: collections.deque[int | None] = collections.deque()

        def keep_for(spec_id: int) -> KeepFile:
            base = filter_for(spec_id) if filter_for is not None else None

            def keep(stats: FileStats) -> bool:
                if base is not None and not base(stats):
                    return False
                noted.append(column.bound(stats.lower_bounds))
                return True
            return keep

        ordinal = 0
        for manifest, files in live_data_files_of(self.io, data, snapshot_id, keep_for,
                                                  added_only=added_only, contents=contents):
            spec_id = manifest.partition_spec_id
            live: LiveDataFile
            for live in files:
                path, fmt, partition, records, size, offsets, seq = live
                splits = self.file_splits(path, fmt, partition, records, size, offsets,
                                          spec_id, seq or INITIAL_SEQUENCE_NUMBER,
                                          snapshot_id, ordinal, deletes)
                ordinal += len(splits)
                yield splits, noted.popleft()

    def _plan_decoded(self, snapshot_id: int, data: list[ManifestFile], start_ordinal: int,
                      deletes: DeleteIndex | None) -> Iterator[FileSplit]:
        """Every live file of ``data`` that the filter keeps as splits, from the
        planning-only manifest decoder (the same splits, ids and order as planning from
        PyIceberg's entries with :meth:`FilterEvaluators.file_ok`, without records)."""
        split_size = self.split_size
        keep_for = None if self.filters.always_true else self.filters.stats_ok
        ordinal = 0
        split_id = self.split_ids(snapshot_id)
        for manifest, files in live_data_files_of(self.io, data, snapshot_id, keep_for):
            spec_id = manifest.partition_spec_id
            for path, fmt, partition, records, size, offsets, seq in files:
                seq = seq or INITIAL_SEQUENCE_NUMBER
                if size <= split_size and deletes is None:  # the common case, inlined
                    if ordinal >= start_ordinal:
                        yield new_split(split_id(path, 0, size), path, fmt,
                                        0, size, records, size, records, spec_id, partition,
                                        snapshot_id, seq, ordinal, ())
                    ordinal += 1
                    continue
                for split in self.file_splits(path, fmt, partition, records, size, offsets,
                                               spec_id, seq, snapshot_id, ordinal, deletes):
                    if split.ordinal >= start_ordinal:
                        yield split
                    ordinal += 1

    def added_deletes(self, manifests: list[ManifestFile], snapshot_id: int
                      ) -> DeleteIndex | None:
        """The delete files ``snapshot_id`` added (ADDED entries of the delete manifests
        among ``manifests``, the ones it wrote), indexed; None when it added none."""
        delete_manifests = [m for m in manifests if m.content == ManifestContent.DELETES]
        index = None
        for entries in read_own_entries(self.io, delete_manifests, snapshot_id):
            for entry in entries:
                if entry.status == ManifestEntryStatus.ADDED:
                    if index is None:
                        index = DeleteIndex(self.unpartitioned)
                    index.add(entry)
        return index

    def plan_added(self, snapshot: Snapshot) -> Iterator[FileSplit]:
        """The data files ``snapshot`` itself added that the filter keeps, as splits
        (ordinals from 0; manifest-list order, entry order, byte-range order), with the
        delete files it added applied.

        Only the manifests the snapshot wrote are opened (:func:`snapshot_added_manifests`),
        and their data entries go through the planning-only decoder with ``added_only``:
        a merged manifest's EXISTING entries (an append merges the table's earlier
        manifests into its own) are stepped over, never built, so the cost per snapshot is
        the bytes of the manifests it wrote, not PyIceberg records with stats for each.
        """
        snapshot_id = snapshot.snapshot_id
        own, contents = self.fetcher.take(snapshot)
        deletes = self.added_deletes(own, snapshot_id)
        data = [m for m in own if m.content == ManifestContent.DATA]
        if self.event_time is not None:
            yield from order_unit(
                self._bounded_files(snapshot_id, data, deletes, added_only=True,
                                    contents=contents), self.event_time)
            return
        keep_for = None if self.filters.always_true else self.filters.stats_ok
        ordinal = 0
        for manifest, files in live_data_files_of(self.io, data, snapshot_id, keep_for,
                                                  added_only=True, contents=contents):
            spec_id = manifest.partition_spec_id
            for path, fmt, partition, records, size, offsets, seq in files:
                for split in self.file_splits(path, fmt, partition, records, size, offsets,
                                               spec_id, seq or INITIAL_SEQUENCE_NUMBER,
                                               snapshot_id, ordinal, deletes):
                    yield split
                    ordinal += 1
