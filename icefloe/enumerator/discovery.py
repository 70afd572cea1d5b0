"""Manifest discovery: which manifests and entries a snapshot needs.

Runs on the enumerator. Full scans read the manifests of a snapshot (pruned by the
filter's partition summaries); incremental discovery reads ONLY the manifests the
snapshot itself added (``added_snapshot_id``), so its cost follows the size of the
change, not of the table. Manifests are decoded on a small thread pool, in
manifest-list order (results come back in order; at most ``lookahead`` in flight).

Full scans decode data manifests with the planning-only decoder
(:mod:`icefloe.enumerator.manifest_decoder`: no PyIceberg records;
:func:`live_data_files_of`); the manifest bytes are fetched on the pool and decoded in
the planning thread. With a row filter the decoder also reads the column stats the
metrics evaluator needs and offers each entry to :meth:`FilterEvaluators.stats_ok` (the
same PyIceberg partition and metrics evaluators, on the decoded values). For delete
manifests (position delete bounds on ``file_path`` narrow which data files a delete
applies to) and for incremental discovery, entries are PyIceberg's full records.

Incremental discovery finds the snapshot's own manifests with a skip-only scan of its
manifest list (:mod:`icefloe.enumerator.manifest_list_decoder`): the list grows with the
table, so the other entries are stepped over, never built; the matching ones are
PyIceberg's ``ManifestFile`` records. Full scans read the whole list with PyIceberg.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from pyiceberg.avro.decoder import new_decoder
from pyiceberg.avro.file import AvroFile
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.parser import parse as parse_filter
from pyiceberg.expressions.visitors import (
    _InclusiveMetricsEvaluator,
    expression_evaluator,
    extract_field_ids,
    inclusive_projection,
    manifest_evaluator,
)
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    _inherit_from_manifest,
)
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from icefloe.enumerator import columnar
from icefloe.enumerator.manifest_decoder import (
    ENTRY_SCHEMA,
    RECORD_READ_ENUMS,
    RECORD_READ_TYPES,
    FileStats,
    KeepFile,
    LiveDataFile,
    iter_live_data_files,
    own_entries,
    writer_schema,
)
from icefloe.enumerator.manifest_list_decoder import added_manifests
from icefloe.errors import DataFileError
from icefloe.reader.names import rename_references

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="icefloe-manifests")


def ordered_map(fn: Callable[[T], R], items: Iterable[T], lookahead: int = 8) -> Iterator[R]:
    """``map(fn, items)`` on the shared manifest pool, in order, ``lookahead`` in flight."""
    pending: list[Future[R]] = []
    for item in items:
        pending.append(_POOL.submit(fn, item))
        if len(pending) >= lookahead:
            yield pending.pop(0).result()
    for future in pending:
        yield future.result()


class FilterEvaluators:
    """Partition / metrics pruning for one row filter and read schema (cached per spec).

    ``renames``: ``(name as typed, name in schema)`` of the filter's columns renamed since
    it was typed (:mod:`icefloe.reader.names`).
    """

    def __init__(self, metadata: TableMetadata, schema: Schema, filter_text: str | None,
                 case_sensitive: bool, renames: tuple[tuple[str, str], ...] = ()) -> None:
        self.metadata = metadata
        self.schema = schema
        self.case_sensitive = case_sensitive
        self.row_filter: BooleanExpression = (
            rename_references(parse_filter(filter_text), dict(renames)) if filter_text
            else AlwaysTrue()
        )
        self.always_true = filter_text is None
        evaluator = (None if self.always_true
                     else _InclusiveMetricsEvaluator(schema, self.row_filter, case_sensitive,
                                                     False))
        self._metrics = None if evaluator is None else evaluator.eval
        self.metrics_ok: KeepFile | None = self._metrics  # type: ignore[assignment]
        """PyIceberg's metrics evaluator on a :class:`FileStats` (None without a filter)."""
        self.stats_ids: tuple[int, ...] = (
            () if evaluator is None else tuple(sorted(extract_field_ids(evaluator.expr))))
        """The field ids whose stats the metrics evaluator reads (ascending)."""
        self.prefilter = (None if evaluator is None
                          else columnar.MetricsPrefilter(evaluator.expr) or None)
        """What of the filter array operations prune exactly (None: nothing)."""

    @cache  # noqa: B019 - one instance per plan; bounded by the number of specs
    def _projection(self, spec_id: int) -> BooleanExpression | None:
        spec = self.metadata.specs()[spec_id]
        try:
            return inclusive_projection(self.schema, spec, self.case_sensitive)(self.row_filter)
        except Exception:  # a spec whose source column left the schema: no pruning
            log.debug("no partition pruning for spec %d", spec_id, exc_info=True)
            return None

    @cache  # noqa: B019
    def manifest_ok(self, spec_id: int) -> Callable[[ManifestFile], bool]:
        projected = self._projection(spec_id)
        if self.always_true or projected is None:
            return lambda _m: True
        spec = self.metadata.specs()[spec_id]
        return manifest_evaluator(spec, self.schema, projected, self.case_sensitive)

    @cache  # noqa: B019
    def partition_ok(self, spec_id: int) -> Callable[[DataFile], bool]:
        projected = self._projection(spec_id)
        if self.always_true or projected is None:
            return lambda _f: True
        spec = self.metadata.specs()[spec_id]
        part_schema = Schema(*spec.partition_type(self.schema).fields)
        evaluate = expression_evaluator(part_schema, projected, self.case_sensitive)
        return lambda data_file: evaluate(data_file.partition)

    @cache  # noqa: B019
    def stats_ok(self, spec_id: int) -> KeepFile | None:
        """What :meth:`file_ok` decides, on a decoded entry's :class:`FileStats` (partition
        tuple and stats dicts) of a file of spec ``spec_id``; None without a filter."""
        metrics = self._metrics
        if metrics is None:
            return None
        projected = self._projection(spec_id)
        if projected is None or isinstance(projected, AlwaysTrue):  # nothing to prune on
            return metrics  # type: ignore[return-value]  # FileStats has DataFile's fields
        spec = self.metadata.specs()[spec_id]
        part_schema = Schema(*spec.partition_type(self.schema).fields)
        evaluate = expression_evaluator(part_schema, projected, self.case_sensitive)

        def keep(stats: FileStats) -> bool:
            # partition values are a tuple: PyIceberg's accessors index it as a Record
            return evaluate(stats.partition) and metrics(stats)  # type: ignore[arg-type]
        return keep

    @cache  # noqa: B019
    def partition_value_ok(self, spec_id: int) -> Callable[[tuple[Any, ...]], bool] | None:
        """The partition pruning of :meth:`stats_ok` on one partition tuple of spec
        ``spec_id``; None when nothing is pruned on partitions (no filter, or one that
        projects to AlwaysTrue)."""
        if self._metrics is None:
            return None
        projected = self._projection(spec_id)
        if projected is None or isinstance(projected, AlwaysTrue):
            return None
        spec = self.metadata.specs()[spec_id]
        part_schema = Schema(*spec.partition_type(self.schema).fields)
        evaluate: Callable[[Any], bool] = expression_evaluator(part_schema, projected,
                                                               self.case_sensitive)
        return evaluate

    def file_ok(self, data_file: DataFile) -> bool:
        if self._metrics is None:
            return True
        return self.partition_ok(data_file.spec_id)(data_file) and self._metrics(data_file)


def decode_entries(io: FileIO, manifest: ManifestFile) -> list[ManifestEntry]:
    """All entries (live and deleted) of one manifest, in file order, with inherited
    sequence numbers and snapshot ids (as PyIceberg's ``fetch_manifest_entry``)."""
    entries: list[ManifestEntry] = []
    with AvroFile[ManifestEntry](io.new_input(manifest.manifest_path), ENTRY_SCHEMA,
                                 read_types=RECORD_READ_TYPES,
                                 read_enums=RECORD_READ_ENUMS) as avro:
        read = avro.reader.read
        decoder = avro.decoder
        codec = avro.header.compression_codec()
        sync = avro.header.sync
        first = True
        while True:  # the container's blocks, as AvroFile.__next__ (PyIceberg writes many)
            try:
                if not first and decoder.read(len(sync)) != sync:
                    raise ValueError(f"bad sync marker in manifest {manifest.manifest_path}")
                count = decoder.read_int()
            except EOFError:
                break
            first = False
            data = decoder.read_bytes()
            block = new_decoder(codec.decompress(data) if codec else data)
            for _ in range(count):
                entries.append(_inherit_from_manifest(read(block), manifest))
    return entries


def read_entries(io: FileIO, manifest: ManifestFile, snapshot_id: int) -> list[ManifestEntry]:
    """All entries (live and deleted) of one manifest (see :func:`decode_entries`).

    Raises:
        DataFileError: the manifest is missing or unreadable (names it and the snapshot).
    """
    try:
        return decode_entries(io, manifest)
    except Exception as exc:
        raise DataFileError(
            f"cannot read manifest {manifest.manifest_path} of snapshot {snapshot_id}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def fetch_bytes(io: FileIO, location: str) -> bytes | Exception:
    """The whole file at ``location``, or the exception reading it raised (returned, so
    a fetch on the pool is raised in order, in the planning thread)."""
    try:
        with io.new_input(location).open() as f:
            return f.read()
    except Exception as exc:
        return exc


def live_data_files_of(io: FileIO, manifests: list[ManifestFile], snapshot_id: int,
                       keep_for: Callable[[int], KeepFile | None] | None = None,
                       *, added_only: bool = False,
                       contents: Iterable[bytes | Exception] | None = None,
                       ) -> Iterator[tuple[ManifestFile, Iterator[LiveDataFile]]]:
    """Each data manifest with its live data files (:func:`iter_live_data_files`: decoded
    as they are iterated), in order; with ``keep_for`` (a filtered scan:
    :meth:`FilterEvaluators.stats_ok`), only the files that ``keep_for(manifest's spec id)``
    keeps. Iterate each manifest's files before the next manifest. With ``added_only``
    (incremental discovery: ``manifests`` are those ``snapshot_id`` added), only the files
    ``snapshot_id`` added.

    No PyIceberg records (and no stats without a filter). The manifests'
    bytes are fetched on the manifest pool (``lookahead`` in flight, so a remote FileIO
    overlaps requests), or taken from ``contents`` (what :func:`fetch_bytes` returned for
    each manifest, in order: fetched ahead); decoding runs in the calling thread, one
    manifest at a time, which keeps the pool's threads from contending for the GIL with it.

    Raises:
        DataFileError: a manifest is missing or unreadable (names it and the snapshot),
            when it is reached or while its files are iterated.
    """
    def fetch(manifest: ManifestFile) -> bytes | Exception:
        return fetch_bytes(io, manifest.manifest_path)

    def unreadable(manifest: ManifestFile, exc: Exception) -> DataFileError:
        return DataFileError(
            f"cannot read manifest {manifest.manifest_path} of snapshot {snapshot_id}: "
            f"{type(exc).__name__}: {exc}"
        )

    def files_of(manifest: ManifestFile, content: bytes, keep: KeepFile | None
                 ) -> Iterator[LiveDataFile]:
        try:
            yield from iter_live_data_files(content, manifest, keep, added_only=added_only)
        except Exception as exc:
            raise unreadable(manifest, exc) from exc

    if contents is None:
        contents = ordered_map(fetch, manifests)
    for manifest, content in zip(manifests, contents, strict=True):
        if isinstance(content, Exception):
            raise unreadable(manifest, content) from content
        keep = keep_for(manifest.partition_spec_id) if keep_for else None
        yield manifest, files_of(manifest, content, keep)


class DecodedManifest(NamedTuple):
    """One data manifest decoded into columns (:mod:`icefloe.enumerator.columnar`)."""

    manifest: ManifestFile
    writer_schema: str
    """The manifest's Avro writer schema: what its raw ``partition`` values decode with."""
    batch: pa.RecordBatch
    """Its live (``added_only``: added) data files, one row each, in file order."""
    prepared: Any = None
    """What ``prepare`` made of the batch (None without ``prepare``)."""


def decoded_manifests(io: FileIO, manifests: list[ManifestFile], snapshot_id: int, *,
                      added_only: bool = False, stats_ids: tuple[int, ...] = (),
                      contents: Iterable[bytes | Exception] | None = None,
                      prepare: Callable[[pa.RecordBatch], Any] | None = None,
                      ) -> Iterator[DecodedManifest]:
    """Each of the data ``manifests`` decoded into columns
    (:func:`icefloe.enumerator.columnar.decode_manifest`'s contract; ``stats_ids``: the
    stats columns to decode), in order; with ``added_only`` (``manifests`` are those
    ``snapshot_id`` added), only the files ``snapshot_id`` added.

    With the compiled decoder (it releases the GIL) each manifest is fetched and decoded
    on the decoding pool, several at once, a bounded number ahead of the caller; with the
    pure-Python one the bytes are fetched on the manifest pool (``lookahead`` in flight)
    and decoded in the calling thread, one manifest at a time. ``contents``: what
    :func:`fetch_bytes` returned for each manifest, in order (fetched ahead).
    ``prepare``: run on each batch where it was decoded (on the pool with the compiled
    decoder: array work that releases the GIL belongs there, where it does not stall the
    caller), its result is :attr:`DecodedManifest.prepared`.

    Raises:
        DataFileError: a manifest is missing or unreadable (names it and the snapshot),
            when it is reached.
    """
    decode, parallel = columnar.decoder()

    def work(item: tuple[ManifestFile, bytes | Exception | None]
             ) -> tuple[str, pa.RecordBatch, Any] | Exception:
        manifest, content = item
        if content is None:
            content = fetch_bytes(io, manifest.manifest_path)
        if isinstance(content, Exception):
            return content
        try:
            schema = writer_schema(content)
            batch = decode(content, manifest_seq=manifest.sequence_number,
                           added_by=manifest.added_snapshot_id, added_only=added_only,
                           stats_ids=stats_ids)
        except Exception as exc:
            return exc
        return schema, batch, None if prepare is None else prepare(batch)

    fetched: Iterable[bytes | Exception | None]
    if contents is not None:
        fetched = contents
    elif parallel:
        fetched = itertools.repeat(None)
    else:
        fetched = ordered_map(lambda m: fetch_bytes(io, m.manifest_path), manifests)
    items = zip(manifests, fetched, strict=contents is not None)
    for manifest, got in zip(manifests, columnar.decode_in_order(work, items, parallel),
                             strict=False):
        if isinstance(got, Exception):
            raise DataFileError(
                f"cannot read manifest {manifest.manifest_path} of snapshot {snapshot_id}: "
                f"{type(got).__name__}: {got}"
            ) from got
        yield DecodedManifest(manifest, *got)


def snapshot_manifests(io: FileIO, snapshot: Snapshot) -> list[ManifestFile]:
    """The manifest list of ``snapshot``, in manifest-list order."""
    try:
        return list(snapshot.manifests(io))
    except Exception as exc:
        raise DataFileError(
            f"cannot read manifest list {snapshot.manifest_list} of snapshot "
            f"{snapshot.snapshot_id}: {type(exc).__name__}: {exc}"
        ) from exc


def snapshot_added_manifests(io: FileIO, snapshot: Snapshot) -> list[ManifestFile]:
    """The manifests ``snapshot`` itself added (``added_snapshot_id``), in manifest-list
    order: the entries of ``snapshot_manifests`` that match, without building the others
    (:func:`icefloe.enumerator.manifest_list_decoder.added_manifests`).

    Raises:
        DataFileError: the manifest list is missing or unreadable (names it and the
            snapshot).
    """
    try:
        with io.new_input(snapshot.manifest_list).open() as f:
            content = f.read()
        return added_manifests(content, snapshot.snapshot_id)
    except Exception as exc:
        raise DataFileError(
            f"cannot read manifest list {snapshot.manifest_list} of snapshot "
            f"{snapshot.snapshot_id}: {type(exc).__name__}: {exc}"
        ) from exc


class SnapshotFiles(NamedTuple):
    """What incremental planning of one snapshot reads, fetched: the manifests it added
    and the bytes of each of its data manifests (or the exception reading it raised);
    None when they were not fetched (read them with :func:`live_data_files_of`)."""

    added: list[ManifestFile]
    data_contents: list[bytes | Exception] | None


class ChangeFetcher:
    """Fetches ahead, on the manifest pool, what incremental planning of the next
    snapshots of a catch-up reads: each one's manifest list (scanned for the manifests it
    added) and the bytes of the data manifests it added.

    A backlog is otherwise walked one snapshot at a time, two dependent reads each
    (manifest list, then manifest): on an object store that is two round trips per
    snapshot in series. Runs on the enumerator: :meth:`ahead` from the enumeration loop,
    :meth:`take` from ``plan_added``, both in the planning thread. At most ``depth``
    snapshots are fetched or held at once (their manifests' bytes); a snapshot never
    taken is dropped when the fetcher is. A failed fetch is raised by :meth:`take` (as
    :func:`snapshot_added_manifests` raises) and not kept: a retry reads again.

    A snapshot that added more than ``max_manifests`` data manifests (a big commit) has
    only its manifest list fetched ahead: its manifests are read when it is planned,
    ``lookahead`` at a time (:func:`live_data_files_of`), not one by one in a pool task.
    """

    def __init__(self, io: FileIO, depth: int = 8, max_manifests: int = 4) -> None:
        self.io = io
        self.depth = depth
        self.max_manifests = max_manifests
        self._pending: dict[int, Future[SnapshotFiles | DataFileError]] = {}

    def _fetch(self, snapshot: Snapshot) -> SnapshotFiles | DataFileError:
        """Runs on the manifest pool (or in the planning thread, for a snapshot that was
        not fetched ahead)."""
        try:
            added = snapshot_added_manifests(self.io, snapshot)
        except DataFileError as exc:
            return exc
        data = [m.manifest_path for m in added if m.content == ManifestContent.DATA]
        if len(data) > self.max_manifests:
            return SnapshotFiles(added, None)
        return SnapshotFiles(added, [fetch_bytes(self.io, path) for path in data])

    def ahead(self, snapshots: Iterable[Snapshot]) -> None:
        """Start fetching the first ``depth`` of ``snapshots`` (the next ones to be
        planned, in order). What was fetched for a snapshot outside them (one the stream
        skipped by policy, or moved past) is dropped."""
        window = list(itertools.islice(snapshots, self.depth))
        wanted = {snapshot.snapshot_id for snapshot in window}
        for stale in [sid for sid in self._pending if sid not in wanted]:
            self._pending.pop(stale).cancel()
        for snapshot in window:
            if snapshot.snapshot_id not in self._pending:
                self._pending[snapshot.snapshot_id] = _POOL.submit(self._fetch, snapshot)

    def take(self, snapshot: Snapshot) -> SnapshotFiles:
        """The fetched files of ``snapshot`` (read now if it was not fetched ahead).

        Raises:
            DataFileError: its manifest list is missing or unreadable.
        """
        future = self._pending.pop(snapshot.snapshot_id, None)
        got = future.result() if future is not None else self._fetch(snapshot)
        if isinstance(got, DataFileError):
            raise got
        return got


def live_entries(
    io: FileIO, manifests: list[ManifestFile], snapshot_id: int,
    keep: Callable[[ManifestEntry], bool],
) -> Iterator[ManifestEntry]:
    """Live (ADDED / EXISTING) entries of ``manifests`` that ``keep`` accepts, in order
    (PyIceberg's full records, column stats included)."""
    def load(manifest: ManifestFile) -> list[ManifestEntry]:
        return [
            e for e in read_entries(io, manifest, snapshot_id)
            if e.status != ManifestEntryStatus.DELETED and keep(e)
        ]
    for entries in ordered_map(load, manifests):
        yield from entries


def read_own_entries(io: FileIO, manifests: list[ManifestFile], snapshot_id: int
                     ) -> Iterator[list[ManifestEntry]]:
    """For each of ``manifests`` (manifests ``snapshot_id`` added), in order, the entries
    it ADDED or DELETED as PyIceberg's records (:func:`own_entries`: the others are
    stepped over); read on the manifest pool.

    Raises:
        DataFileError: a manifest is missing or unreadable (names it and the snapshot).
    """
    def load(manifest: ManifestFile) -> list[ManifestEntry]:
        content = fetch_bytes(io, manifest.manifest_path)
        try:
            if isinstance(content, Exception):
                raise content
            return own_entries(content, manifest)
        except Exception as exc:
            raise DataFileError(
                f"cannot read manifest {manifest.manifest_path} of snapshot {snapshot_id}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    return ordered_map(load, manifests)


class SnapshotChanges:
    """What one snapshot itself changed: entries of the manifests it wrote."""

    def __init__(self) -> None:
        self.added_data: list[ManifestEntry] = []
        self.deleted_data: list[ManifestEntry] = []
        self.added_deletes: list[ManifestEntry] = []
        self.removed_deletes: list[ManifestEntry] = []


def snapshot_changes(io: FileIO, snapshot: Snapshot) -> SnapshotChanges:
    """Entries ``snapshot`` added or deleted. Only manifests whose ``added_snapshot_id``
    is the snapshot are built and opened (:func:`snapshot_added_manifests`); the rest of
    the manifest list is stepped over, so the cost follows the size of the change (plus
    a scan of the list that is cheap per manifest). In those manifests only the
    snapshot's own entries are built (:func:`own_entries`): a merged manifest's EXISTING
    entries are stepped over.

    Raises:
        DataFileError: the manifest list or a manifest is missing or unreadable.
    """
    own = snapshot_added_manifests(io, snapshot)
    changes = SnapshotChanges()
    for manifest, entries in zip(own, read_own_entries(io, own, snapshot.snapshot_id),
                                 strict=True):
        for entry in entries:
            if manifest.content == ManifestContent.DELETES:
                if entry.status == ManifestEntryStatus.ADDED:
                    changes.added_deletes.append(entry)
                elif entry.status == ManifestEntryStatus.DELETED:
                    changes.removed_deletes.append(entry)
            elif entry.status == ManifestEntryStatus.ADDED:
                changes.added_data.append(entry)
            elif entry.status == ManifestEntryStatus.DELETED:
                changes.deleted_data.append(entry)
    return changes
