"""Split planning behind a Protocol: full snapshot scans and per-snapshot changes.

Runs on the enumerator (driver). Determinism: for the same table metadata, the
same snapshot and the same options, the planner yields the same splits with the
same ids in the same order in any process: manifest-list order, then entry order,
then byte-range order. Splits are yielded lazily, so a million-file snapshot is
never held in memory at once; with ``watermarkColumn`` a unit is planned whole and yielded
in event-time order instead (:mod:`icefloe.enumerator.event_time`).
"""

from __future__ import annotations

import copy
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.transforms import VoidTransform

from icefloe.enumerator import columnar
from icefloe.enumerator.columnar import PartitionValues
from icefloe.enumerator.deletes import INITIAL_SEQUENCE_NUMBER, DeleteIndex, partition_tuple
from icefloe.enumerator.discovery import (
    ChangeFetcher,
    DecodedManifest,
    FilterEvaluators,
    decoded_manifests,
    live_entries,
    read_own_entries,
    snapshot_manifests,
)
from icefloe.enumerator.event_time import EventTimeColumn, order_unit
from icefloe.enumerator.manifest_decoder import FileStats
from icefloe.splits.sizing import AdaptiveCut, balanced_ranges, byte_ranges, prorate
from icefloe.splits.split import FileSplit, new_split, split_id_maker

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

log = logging.getLogger(__name__)


class ManifestFiles(NamedTuple):
    """The kept files of one decoded manifest as Python columns (one list item a file,
    file order); ``sequence_number`` has a null as :data:`INITIAL_SEQUENCE_NUMBER`."""

    path: list[str]
    file_format: list[str]
    partition: list[tuple[Any, ...]]
    record_count: list[int]
    file_size: list[int]
    split_offsets: pa.Array
    sequence_number: list[int]
    lower: list[bytes | None] | None
    batch: pa.RecordBatch
    """The kept rows as decoded (the Arrow columns of the lists above)."""
    split_ids: list[str] | None
    """Each file's whole-file split id, when they were made in arrays (else None)."""


class Prepared(NamedTuple):
    """:meth:`TableSplitPlanner.prepare` of one decoded batch."""

    partitions: pa.Array
    """The distinct raw partition values (first-seen order)."""
    indices: np.ndarray
    """Per row, the index of its partition among them."""
    sequence_numbers: pa.Array
    split_ids: pa.Array | None


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

    Attributes:
        adaptive: None (the default): files are cut by ``split_size``
            (:func:`~icefloe.splits.sizing.byte_ranges`); an
            :class:`~icefloe.splits.sizing.AdaptiveCut`: each file into the pieces it
            gives (:func:`~icefloe.splits.sizing.balanced_ranges`). Set on a copy by a
            bounded plan only (:meth:`with_cut`), never by a stream's enumerator.
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
        self.partitions = PartitionValues()
        self.adaptive: AdaptiveCut | None = None

    def with_cut(self, cut: AdaptiveCut | None) -> TableSplitPlanner:
        """A planner like this one whose files are cut by ``cut`` (this one is unchanged;
        the copy shares its caches)."""
        other = copy.copy(self)
        other.adaptive = cut
        return other

    def ranges(self, size: int, split_offsets: list[int] | None) -> list[tuple[int, int]]:
        """The ``(start, length)`` ranges a file of ``size`` bytes is cut into."""
        cut = self.adaptive
        if cut is None:
            return byte_ranges(size, split_offsets, self.split_size)
        return balanced_ranges(size, split_offsets, cut.pieces(size, self.split_size))

    def whole(self, size: int) -> bool:
        """Whether a file of ``size`` bytes is one split (a larger one never is less)."""
        cut = self.adaptive
        if cut is None:
            return size <= self.split_size
        return cut.pieces(size, self.split_size) == 1

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
        if self.whole(size):  # one range: what ranges() returns, without the call
            return [new_split(split_id(path, 0, size), path, fmt, 0, size,
                              records, size, records, spec_id, partition, snapshot_id, seq,
                              first_ordinal, applied)]
        ranges = self.ranges(size, split_offsets)
        out = []
        for i, ((start, length), part_records) in enumerate(
                zip(ranges, prorate(records, [n for _, n in ranges]), strict=True)):
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
        yield from self._splits(snapshot.snapshot_id, data,
                                deletes if deletes.count else None, start_ordinal)

    def _bounded_files(self, snapshot_id: int, data: list[ManifestFile],
                       deletes: DeleteIndex | None, added_only: bool,
                       contents: Iterable[bytes | Exception] | None = None,
                       ) -> Iterator[tuple[list[FileSplit], int | None]]:
        """Each live (``added_only``: added) file of ``data`` that the filter keeps, as its
        splits (file-order ordinals) with the watermark column's lower bound (decoded as
        a stats column of the watermark column's field id)."""
        column = self.event_time
        assert column is not None
        field_id = column.field_id
        ordinal = 0
        for decoded in self._decoded(snapshot_id, data, added_only, contents, field_id):
            files = self.files_of(decoded, field_id)
            spec_id = decoded.manifest.partition_spec_id
            assert files.lower is not None
            for path, fmt, partition, records, size, offsets, seq, raw in zip(
                    files.path, files.file_format, files.partition, files.record_count,
                    files.file_size, files.split_offsets.to_pylist(), files.sequence_number,
                    files.lower, strict=True):
                splits = self.file_splits(path, fmt, partition, records, size, offsets,
                                          spec_id, seq, snapshot_id, ordinal, deletes)
                ordinal += len(splits)
                yield splits, None if raw is None else column.bound({field_id: raw})

    def _decoded(self, snapshot_id: int, data: list[ManifestFile], added_only: bool,
                 contents: Iterable[bytes | Exception] | None, extra_stats: int | None = None,
                 whole_file_ids: bool = False) -> Iterator[DecodedManifest]:
        """:func:`decoded_manifests` of ``data`` with the stats columns the filter reads
        (and those of ``extra_stats``, a field id), each batch prepared where it was
        decoded (:meth:`prepare`; ``whole_file_ids``: with every file's whole-file split
        id, where the compiled module makes them)."""
        stats_ids = self.filters.stats_ids
        if extra_stats is not None and extra_stats not in stats_ids:
            stats_ids = tuple(sorted((*stats_ids, extra_stats)))
        many_ids = columnar.native_split_ids() if whole_file_ids else None

        def prepare(batch: pa.RecordBatch) -> Prepared:
            return self.prepare(batch, snapshot_id, many_ids)

        return decoded_manifests(self.io, data, snapshot_id, added_only=added_only,
                                 stats_ids=stats_ids, contents=contents, prepare=prepare)

    @staticmethod
    def prepare(batch: pa.RecordBatch, snapshot_id: int,
                many_ids: Callable[..., pa.Array] | None) -> Prepared:
        """The array work on one decoded batch that needs no Python object per file: the
        partition column dictionary-encoded, null sequence numbers as
        :data:`INITIAL_SEQUENCE_NUMBER` and, with ``many_ids``, every file's whole-file
        split id. Runs where the batch was decoded (a pool thread with the compiled
        decoder), so the planning thread does not give up the GIL for it."""
        import numpy as np
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(batch.column("partition"))
        n = batch.num_rows
        ids = None
        if many_ids is not None and n:
            ids = many_ids(snapshot_id, batch.column("file_path"), np.arange(n),
                           np.zeros(n, np.int64), batch.column("file_size").to_numpy())
        return Prepared(encoded.dictionary, encoded.indices.to_numpy(zero_copy_only=False),
                        batch.column("sequence_number").fill_null(INITIAL_SEQUENCE_NUMBER),
                        ids)

    def files_of(self, decoded: DecodedManifest, lower_of: int | None = None,
                 unfiltered: bool = False) -> ManifestFiles:
        """The files of one decoded manifest that the filter keeps (``unfiltered``: all of
        them), as Python columns (``lower_of``: with that field id's lower bounds). The same files
        :meth:`FilterEvaluators.stats_ok` keeps, in file order: partition pruning per
        distinct partition value, the array pre-filter (:class:`MetricsPrefilter`), then
        PyIceberg's metrics evaluator on the survivors only."""
        batch = decoded.batch
        prepared: Prepared = decoded.prepared
        values = self.partitions.values(decoded.writer_schema, prepared.partitions)
        indices = prepared.indices
        sequence_numbers = prepared.sequence_numbers
        ids = prepared.split_ids
        if self.filters.metrics_ok is not None and batch.num_rows and not unfiltered:
            rows = self._survivors(batch, decoded.manifest.partition_spec_id, values, indices)
            if rows is not None:
                batch = batch.take(rows)
                indices = indices[rows]
                sequence_numbers = sequence_numbers.take(rows)
                ids = None if ids is None else ids.take(rows)
        if len(values) == 1:
            partition: list[Any] = [values[0]] * batch.num_rows
        else:
            partition = [values[i] for i in indices.tolist()]
        return ManifestFiles(
            batch.column("file_path").to_pylist(), batch.column("file_format").to_pylist(),
            partition, batch.column("record_count").to_pylist(),
            batch.column("file_size").to_pylist(), batch.column("split_offsets"),
            sequence_numbers.to_pylist(),
            None if lower_of is None else batch.column(f"lower_{lower_of}").to_pylist(),
            batch, None if ids is None else ids.to_pylist(),
        )

    def _survivors(self, batch: pa.RecordBatch, spec_id: int, values: list[tuple[Any, ...]],
                   indices: np.ndarray) -> np.ndarray | None:
        """The rows of ``batch`` the filter keeps (None: all of them)."""
        import numpy as np

        filters = self.filters
        metrics = filters.metrics_ok
        assert metrics is not None
        keep = np.ones(batch.num_rows, dtype=bool)
        partition_ok = filters.partition_value_ok(spec_id)
        if partition_ok is not None:
            per_value = np.fromiter((bool(partition_ok(v)) for v in values), dtype=bool,
                                    count=len(values))
            keep &= per_value[indices]
        if filters.prefilter is not None:
            keep &= filters.prefilter.keep_mask(batch)
        candidates = np.flatnonzero(keep)
        sub = batch.take(candidates)
        ids = filters.stats_ids
        records = sub.column("record_count").to_pylist()
        maps = [[sub.column(f"{name}_{k}").to_pylist() for k in ids]
                for name in ("value_count", "null_count", "nan_count", "lower", "upper")]
        kept = []
        for j, row in enumerate(candidates.tolist()):
            stats = [{k: col[j] for k, col in zip(ids, group, strict=True)
                      if col[j] is not None} for group in maps]
            if metrics(FileStats(values[indices[row]], records[j], *stats)):
                kept.append(row)
        if len(kept) == batch.num_rows:
            return None
        return np.asarray(kept, dtype=np.int64)

    def _splits(self, snapshot_id: int, data: list[ManifestFile], deletes: DeleteIndex | None,
                start_ordinal: int = 0, added_only: bool = False,
                contents: Iterable[bytes | Exception] | None = None) -> Iterator[FileSplit]:
        """Every live (``added_only``: added) file of ``data`` the filter keeps, as
        splits from ``start_ordinal`` (inclusive): manifest order, file order, byte-range
        order, ordinals from 0. A manifest at a time: split ids and splits built in one
        loop over its columns; a manifest wholly before ``start_ordinal`` whose files are
        one split each is counted, never built."""
        import numpy as np  # imported when planning, not with the module

        split_id = self.split_ids(snapshot_id)
        many_ids = columnar.native_split_ids()
        unfiltered = self.filters.metrics_ok is None
        ordinal = 0
        for decoded in self._decoded(snapshot_id, data, added_only, contents,
                                     whole_file_ids=deletes is None and unfiltered):
            files = self.files_of(decoded)
            n = len(files.path)
            if not n:
                continue
            spec_id = decoded.manifest.partition_spec_id
            if deletes is None and self.whole(max(files.file_size)):  # one split a file
                if ordinal + n <= start_ordinal:
                    ordinal += n
                    continue
                skip = max(0, start_ordinal - ordinal)
                if files.split_ids is not None:  # made where the batch was decoded
                    ids = files.split_ids
                elif many_ids is not None:  # whole-file ranges: (path, 0, size) per file
                    ids = many_ids(snapshot_id, files.batch.column("file_path"),
                                   np.arange(n), np.zeros(n, np.int64),
                                   files.batch.column("file_size").to_numpy()).to_pylist()
                else:
                    ids = [split_id(path, 0, size)
                           for path, size in zip(files.path, files.file_size, strict=True)]
                columns: list[list[Any]] = [ids, files.path, files.file_format,
                                            files.partition, files.record_count,
                                            files.file_size, files.sequence_number]
                if skip:
                    columns = [c[skip:] for c in columns]
                for at, sid, path, fmt, partition, records, size, seq in zip(
                        itertools.count(ordinal + skip), *columns):
                    yield new_split(sid, path, fmt, 0, size, records, size, records, spec_id,
                                    partition, snapshot_id, seq, at, ())
                ordinal += n
                continue
            for path, fmt, partition, records, size, offsets, seq in zip(
                    files.path, files.file_format, files.partition, files.record_count,
                    files.file_size, files.split_offsets.to_pylist(), files.sequence_number,
                    strict=True):
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
        yield from self._splits(snapshot_id, data, deletes, added_only=True,
                                contents=contents)
