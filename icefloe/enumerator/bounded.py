"""The bounded enumerator: resolve a bounded read's options to a plan.

Runs on the driver. Cases (all on the configured ref):
- the head of ``ref`` (branch or tag), read with the table's current schema;
- ``snapshotId`` / ``asOfTimestamp``: time travel, read with that snapshot's schema;
- ``startSnapshotId`` (exclusive) / ``endSnapshotId`` (inclusive): the data files the
  snapshots in between added, oldest snapshot first, under the snapshot-kind policy;
- ``changelog``: the changes of the snapshots of that range (default: every ancestor of
  the head of ``ref``), as change rows (:mod:`icefloe.enumerator.changelog`).
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field

from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Snapshot

from icefloe.catalog.handle import TableHandle
from icefloe.enumerator.changelog import ChangelogPlanner
from icefloe.enumerator.event_time import EventTimeColumn, merge_units, resolve_event_time
from icefloe.enumerator.lineage import snapshot_current_at, snapshots_between
from icefloe.enumerator.planner import SplitPlanner, TableSplitPlanner
from icefloe.enumerator.policy import Action, decide
from icefloe.enumerator.row_lineage import with_row_lineage
from icefloe.errors import LineageBreakError, SnapshotNotFoundError
from icefloe.options import SourceOptions
from icefloe.reader.context import ReadContext
from icefloe.splits.sizing import AdaptiveCut
from icefloe.splits.split import FileSplit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BoundedPlan:
    """A resolved bounded read.

    Attributes:
        snapshot: the snapshot read (the range's end for incremental reads); None for a
            table without snapshots (the plan is empty).
        start_snapshot_id_exclusive: the range's start for incremental reads, else None.
        context: the read context to ship to readers.
        planner: plans the splits (iterate :meth:`splits`, lazily).
        event_time: ``watermarkColumn`` resolved (None: file order): the splits come in
            event-time order, a range's snapshots merged into one order.
        recut: the planner with its files cut by an :class:`AdaptiveCut` (None: the plan
            is never cut adaptively: a changelog read).
    """

    snapshot: Snapshot | None
    start_snapshot_id_exclusive: int | None
    incremental: bool
    context: ReadContext
    planner: SplitPlanner | None
    options: SourceOptions
    handle: TableHandle
    event_time: EventTimeColumn | None = None
    recut: Callable[[AdaptiveCut], SplitPlanner] | None = None
    _cuts: dict[tuple[int, bool], AdaptiveCut | None] = field(
        default_factory=dict, compare=False, repr=False)

    def splits(self, target_splits: int | None = None,
               local_only: bool = False) -> Iterator[FileSplit]:
        """The plan's splits in deterministic order (lazily; safe to call again).

        ``target_splits`` (the engine's readers; None: cut by ``splitSize`` alone): the
        adaptive split size (:meth:`adaptive_cut`; ``local_only``: only of files on the
        local file system). The same plan and arguments give the same splits in every
        call.

        The first call with a target plans once: its first ``target_splits`` splits at the
        configured size decide (a file not local with ``local_only``, or that many splits:
        no cut, and they are yielded as planned, then the rest of the same planning); only
        a plan of fewer splits, which the cut changes, is planned again with the cut. So a
        read that is not cut reads its manifests once (on an object store, each manifest
        read is round trips).
        """
        if target_splits is None or not self._may_cut(target_splits):
            yield from self._planned(self.planner)
            return
        key = (target_splits, local_only)
        if key in self._cuts:
            cut = self._cuts[key]
            yield from self._planned(self.planner if cut is None or self.recut is None
                                     else self.recut(cut))
            return
        planned = self._planned(self.planner)
        try:
            head, cut = self._decide(planned, key)
            if cut is None or self.recut is None:
                yield from head
                yield from planned
                return
        finally:
            planned.close()
        yield from self._planned(self.recut(cut))

    def _decide(self, planned: Iterator[FileSplit], key: tuple[int, bool]
                ) -> tuple[list[FileSplit], AdaptiveCut | None]:
        """Takes splits of ``planned`` (at the configured size) until the cut for ``key``
        (``(target_splits, local_only)``) is decided, and records it: no cut once there
        are ``target_splits`` of them or, with ``local_only``, one of a file not on the
        local file system (the rest of ``planned`` is then the plan's rest); else, the
        plan exhausted, :meth:`_cut_of` them. Returns the splits taken and the cut."""
        target_splits, local_only = key
        head: list[FileSplit] = []
        for split in planned:
            head.append(split)
            if len(head) >= target_splits or (local_only and not is_local(split.file_path)):
                self._cuts[key] = None
                return head, None
        cut = self._cut_of(head, target_splits)
        self._cuts[key] = cut
        return head, cut

    def _may_cut(self, target_splits: int) -> bool:
        """Whether the adaptive split size can apply at all: no ``splitSize`` given, more
        than one split wanted, a planner that can cut (not a changelog read)."""
        return self.recut is not None and "splitSize" not in self.options.given \
            and target_splits > 1 and self.planner is not None

    def _cut_of(self, head: list[FileSplit], target_splits: int) -> AdaptiveCut | None:
        """The cut of a plan whose splits at the configured size are ``head`` (all of
        them when fewer than ``target_splits``), or None."""
        total = sum(s.length for s in head)
        if not 0 < len(head) < target_splits or total <= 0:
            return None
        cut = AdaptiveCut(total, target_splits)
        per_file = Counter(s.file_path for s in head)
        if all(cut.pieces(s.file_size, self.options.split_size) <= per_file[s.file_path]
               for s in head):
            return None  # no file would be cut finer: the plan as it is
        log.info("adaptive split size of %s: %d splits of %d bytes at splitSize %d, cut for "
                 "%d readers", self.handle.identifier, len(head), total,
                 self.options.split_size, target_splits)
        return cut

    def adaptive_cut(self, target_splits: int, local_only: bool = False,
                     planned: Iterable[FileSplit] | None = None) -> AdaptiveCut | None:
        """Iceberg's adaptive split size (``read.split.adaptive-size.enabled``, as
        ``TableScanUtil.adjustSplitSize``) for ``target_splits`` readers: when the user set
        no ``splitSize`` and the plan at the configured size has fewer than
        ``target_splits`` splits, the cut that makes about ``target_splits`` of them, none
        smaller than 32 MiB on average (:class:`AdaptiveCut`); else None (the configured
        size). Counts the splits of the configured size up to ``target_splits`` (planning
        stops there: a big scan pays for its first manifest only), or of ``planned`` (the
        plan's :meth:`splits` at the configured size, which the caller has already: no
        planning); computed once per count, so a re-planned read (a transient fault) cuts
        the same splits. With ``local_only``, None when a file of those splits is not on
        the local file system (the local engine: on an object store a split's own open
        costs round trips)."""
        key = (target_splits, local_only)
        if key in self._cuts:
            return self._cuts[key]
        if not self._may_cut(target_splits):
            self._cuts[key] = None
            return None
        if planned is not None:
            return self._decide(iter(planned), key)[1]
        own = self._planned(self.planner)
        try:
            return self._decide(own, key)[1]
        finally:
            own.close()

    def _planned(self, planner: SplitPlanner | None) -> Generator[FileSplit, None, None]:
        if self.snapshot is None or planner is None:
            return
        if not self.incremental:
            yield from planner.plan_snapshot(self.snapshot)
            return
        chain = snapshots_between(
            self.handle.metadata, self.snapshot, self.start_snapshot_id_exclusive,
            what=f"table {self.handle.identifier}",
        )
        emitted = (s for s in chain if self._emits(s))
        if self.event_time is not None:
            yield from merge_units([planner.plan_added(s) for s in emitted], self.event_time)
            return
        for snapshot in emitted:
            yield from planner.plan_added(snapshot)

    def _emits(self, snapshot: Snapshot) -> bool:
        if decide(snapshot, self.options) is Action.EMIT:
            return True
        log.info("skipping snapshot %d (%s) by policy", snapshot.snapshot_id,
                 snapshot.summary.operation if snapshot.summary else "?")
        return False


def _schema_of(handle: TableHandle, snapshot: Snapshot | None, time_travel: bool) -> Schema:
    metadata = handle.metadata
    if time_travel and snapshot is not None and snapshot.schema_id is not None:
        for schema in metadata.schemas:
            if schema.schema_id == snapshot.schema_id:
                return schema
    return metadata.schema()


def plan_bounded(handle: TableHandle, options: SourceOptions) -> BoundedPlan:
    """Resolve ``options`` (already checked for bounded mode) against the table.

    Raises:
        SnapshotNotFoundError: a snapshot id / timestamp that does not resolve.
        RefNotFoundError: an unknown branch or tag.
        LineageBreakError: startSnapshotId is not an ancestor of the range end.
        InvalidOptionError: columns / filter / watermarkColumn that do not resolve against
            the schema (before any manifest is read).
    """
    what = f"table {handle.identifier}"
    time_travel = False
    start: int | None = None
    incremental = False
    if options.snapshot_id is not None:
        snapshot: Snapshot | None = handle.snapshot(options.snapshot_id)
        time_travel = True
    elif options.as_of_timestamp_ms is not None:
        snapshot = snapshot_current_at(handle.metadata, options.as_of_timestamp_ms, what)
        time_travel = True
    elif options.start_snapshot_id is not None or options.end_snapshot_id is not None \
            or options.changelog:
        incremental = True
        if options.end_snapshot_id is not None:
            snapshot = handle.snapshot(options.end_snapshot_id)
        else:
            snapshot = handle.head(options.ref, options.ref_kind)
            # a changelog of a table without snapshots is empty; a range needs an end
            if snapshot is None and not (options.changelog
                                         and options.start_snapshot_id is None):
                raise SnapshotNotFoundError(f"{what} has no snapshot to end the range at")
        if options.start_snapshot_id is not None and snapshot is not None:
            start = handle.snapshot(options.start_snapshot_id).snapshot_id
            # fail early (before any split is read) when start is not an ancestor
            try:
                snapshots_between(handle.metadata, snapshot, start, what=what)
            except LineageBreakError:
                raise LineageBreakError(
                    f"startSnapshotId {start} is not an ancestor of snapshot "
                    f"{snapshot.snapshot_id} (the range's end) in {what}: the start must come "
                    "before the end on one lineage (reversed range?); list the lineage with "
                    f"`icefloe snapshots {handle.identifier}`") from None
    else:
        snapshot = handle.head(options.ref, options.ref_kind)
        time_travel = handle.ref_type(options.ref) == "tag"
    schema = _schema_of(handle, snapshot, time_travel)
    context = ReadContext.create(handle.metadata, handle.io, schema, options)
    event_time = resolve_event_time(schema, options)
    table_planner = TableSplitPlanner(
        handle.metadata, handle.io, schema, options.filter, options.case_sensitive,
        options.split_size, event_time=event_time,
    )
    planner: SplitPlanner
    recut = None
    if options.changelog:
        chain = [] if snapshot is None else \
            snapshots_between(handle.metadata, snapshot, start, what=what)
        planner = ChangelogPlanner(
            table_planner, handle.io, options.compute_updates,
            ordinals={s.snapshot_id: i for i, s in enumerate(chain)})
    else:
        planner = with_row_lineage(table_planner, handle.io, options.metadata_columns,
                                   handle.metadata.format_version)
        recut = functools.partial(_recut, table_planner, handle, options)
    log.info("bounded plan of %s: snapshot %s%s", handle.identifier,
             snapshot.snapshot_id if snapshot else None,
             f", after snapshot (exclusive) {start}" if incremental else "")
    return BoundedPlan(snapshot, start, incremental, context, planner, options, handle,
                       event_time, recut)


def is_local(path: str) -> bool:
    """Whether a data file's location is on the local file system (``file:`` or a path
    without a scheme)."""
    return path.startswith(("file:", "/")) or "://" not in path


def _recut(table_planner: TableSplitPlanner, handle: TableHandle, options: SourceOptions,
           cut: AdaptiveCut) -> SplitPlanner:
    """:func:`plan_bounded`'s planner with its files cut by ``cut``."""
    return with_row_lineage(table_planner.with_cut(cut), handle.io, options.metadata_columns,
                            handle.metadata.format_version)
