"""The continuous enumerator: from a position, the next splits along a ref's lineage.

Runs on the enumerator thread (local stream, Ray enumerator actor) or the Spark
driver. The core call, :meth:`ContinuousEnumerator.enumerate`, is a function of
(table metadata, position, limits): the same inputs give the same splits and the
same end position in any process, which Spark's ``partitions(start, end)`` and
checkpoint restore rely on. A cursor keeps the open planning generator of the
unit in progress, so chunked enumeration of a big initial scan does not re-read
the manifests for every chunk in a long-lived process.

Units after a position, in order: the rest of the unit in progress (``scan(S)``
or ``changes(S)``), then ``changes(C)`` for every snapshot C after it up to the
ref head. Each ``changes(C)`` goes through the snapshot-kind policy: replace is
skipped, delete / overwrite fail unless an option allows them. Then ``onSchemaChange``
decides at the unit's boundary whether its snapshot's schema is a change and what to do
(:mod:`icefloe.enumerator.schema_track`): ``evolve`` puts a :class:`SchemaSwitch` before the
unit's splits, which then carry the new ``schema_id``. (About 450 lines: one class
whose starting strategies, lineage checks and unit enumeration share the cursor.)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Snapshot

from icefloe.catalog.handle import TableHandle
from icefloe.enumerator.discovery import ChangeFetcher
from icefloe.enumerator.event_time import EventTimeColumn, resolve_event_time
from icefloe.enumerator.lineage import ancestors, snapshots_between
from icefloe.enumerator.planner import SplitPlanner, TableSplitPlanner
from icefloe.enumerator.policy import Action, decide, operation_of
from icefloe.enumerator.row_lineage import with_row_lineage
from icefloe.enumerator.schema_track import (
    SCHEMA_EPOCH,
    SchemaChange,
    SchemaMode,
    SchemaPolicy,
    StreamSchema,
    new_table_change,
)
from icefloe.errors import (
    ExpiredPositionError,
    InvalidOptionError,
    LineageBreakError,
    SchemaChangedError,
    SnapshotNotFoundError,
    SnapshotPolicyError,
    TableReplacedError,
)
from icefloe.options import SourceOptions
from icefloe.reader.names import TypedNames, filter_references
from icefloe.retry import RetryPolicy, call_with_retry
from icefloe.splits.split import FileSplit
from icefloe.state.position import Phase, Position

log = logging.getLogger(__name__)


def _seq(snapshot: Snapshot) -> int:
    """A snapshot's sequence number (v1 metadata may leave it out: 0, as the spec says)."""
    return snapshot.sequence_number or 0


@dataclass(frozen=True, slots=True)
class Limits:
    """Admission limits of one enumeration call (None = unlimited). Soft: the first
    split is always admitted, so one file bigger than a limit still makes progress."""

    max_files: int | None = None
    max_bytes: int | None = None
    max_rows: int | None = None
    max_snapshots: int | None = None

    @classmethod
    def from_options(cls, options: SourceOptions) -> Limits:
        return cls(options.max_files_per_trigger, options.max_bytes_per_trigger,
                   options.max_rows_per_trigger, options.max_snapshots_per_trigger)

    def full(self, files: int, nbytes: int, rows: int) -> bool:
        """Whether admitting nothing more is required after these totals."""
        return any(
            limit is not None and total >= limit
            for limit, total in ((self.max_files, files), (self.max_bytes, nbytes),
                                 (self.max_rows, rows))
        )

    def admits(self, files: int, nbytes: int, rows: int, split: FileSplit) -> bool:
        """Whether ``split`` fits on top of the totals (always True for the first split)."""
        if files == 0:
            return True
        return not any(
            limit is not None and total + extra > limit
            for limit, total, extra in (
                (self.max_files, files, 1), (self.max_bytes, nbytes, split.length),
                (self.max_rows, rows, split.record_count))
        )


UNLIMITED = Limits()


@dataclass(frozen=True, slots=True)
class UnitEnd:
    """Marks the end of an enumeration unit (all its splits were handed out before it)."""

    phase: Phase
    snapshot_id: int
    sequence_number: int

    @property
    def position(self) -> Position:
        return Position.after(self.snapshot_id, self.sequence_number)


@dataclass(frozen=True, slots=True)
class SchemaSwitch:
    """``onSchemaChange=evolve``: the splits after this marker are read in ``schema`` (the
    snapshot ``snapshot_id``'s); ``change`` says what changed."""

    snapshot_id: int
    sequence_number: int
    schema: StreamSchema
    change: SchemaChange
    tag: int | None = None

    @property
    def position(self) -> Position:
        """The position from which the new schema applies (the unit's start)."""
        return Position("incremental", self.snapshot_id, self.sequence_number, 0)

    @property
    def key(self) -> int:
        """The schema tag the splits after it carry (:data:`SCHEMA_EPOCH`)."""
        return self.tag if self.tag is not None else self.schema.schema_id


Item = FileSplit | UnitEnd | SchemaSwitch


@dataclass(frozen=True)
class EnumerationResult:
    """What one :meth:`ContinuousEnumerator.enumerate` call found.

    ``from_position`` is exclusive and ``to_position`` is the exclusive position after
    the last item; ``reset`` is True when a lineage strategy moved ``from_position``
    (the caller's tracked state before it is void). ``schema_reset`` is set when that
    reset moved onto a re-created table: the stream schema starts again there (its
    ``tag`` keys the new table's read context, its ``change`` says what changed).
    """

    from_position: Position
    to_position: Position
    items: tuple[Item, ...]
    head_snapshot_id: int | None
    reset: bool = False
    schema_reset: SchemaSwitch | None = None
    splits: tuple[FileSplit, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "splits", tuple(i for i in self.items if isinstance(i, FileSplit)))


@dataclass
class _Cursor:
    phase: Phase
    snapshot_id: int
    next_ordinal: int
    splits: Iterator[FileSplit]
    peeked: FileSplit | None = None


class ContinuousEnumerator:
    """Enumerates a ref of one table continuously.

    Args:
        handle: the table (refreshed by :meth:`refresh`).
        options: options checked for continuous mode.
        expected_identity: the table uuid / content id the position belongs to (None:
            take the current one).
        planner: a planner (test double) to use instead of the table's.
        schema_mode: ``onSchemaChange`` in force (None: the option, else ``evolve``; the
            Spark reader passes :meth:`SourceOptions.schema_mode` of ``spark``).

    Attributes:
        schema: the stream schema after the last successful :meth:`enumerate` (set by
            :meth:`start_schema`, else fresh at the first call).
        base_schema_id: the schema the stream's readers were started with; splits read in
            another schema carry its id (``FileSplit.schema_id``).
        event_time: ``watermarkColumn`` resolved in the start schema (set by
            :meth:`start_schema`, again by a reset onto a re-created table; None without
            the option): every unit is planned in event-time order, its ordinals
            event-time ranks (:mod:`icefloe.enumerator.event_time`).
        names: the options' column names resolved by field id in the start schema (set
            with ``event_time``; :mod:`icefloe.reader.names`): every schema the stream
            reads in names them its own way (a rename).
    """

    def __init__(self, handle: TableHandle, options: SourceOptions,
                 expected_identity: str | None = None,
                 planner: SplitPlanner | None = None,
                 schema_mode: SchemaMode | None = None) -> None:
        self.handle = handle
        self.options = options
        self.identity = expected_identity or handle.identity
        self._fixed_planner = planner
        self._planner: SplitPlanner | None = planner
        self._planner_key: object = None
        self._cursor: _Cursor | None = None
        self._fetcher: ChangeFetcher | None = None
        mode = schema_mode or options.schema_mode("local")
        self.schema_policy = SchemaPolicy(mode, options.allow_column_rename,
                                          options.allow_column_drop, handle.identifier)
        self.schema: StreamSchema | None = None
        self.base_schema_id: int | None = None
        self._idle: tuple[object, EnumerationResult] | None = None
        self._epoch = 0  # tables followed after the first (SCHEMA_EPOCH)
        self._left: Schema | None = None  # the schema read when the table was replaced
        self._replaced = False  # a reset onto a re-created table waits for its schema
        self.event_time: EventTimeColumn | None = None
        self.names: TypedNames | None = None

    # -- the stream schema ---------------------------------------------------------

    def start_schema(self, restored: StreamSchema | None = None) -> StreamSchema:
        """Set the stream schema at a (re)start (:meth:`SchemaPolicy.start`): fresh, the
        current schema with ``since`` the head; restored, the checkpoint's (``fail``: the
        current one, if the change since may pass). It is also the readers' base schema.

        Raises:
            SchemaChangedError: ``fail`` restarted across a rename / drop not allowed.
            InvalidOptionError: a ``watermarkColumn`` that is not a timestamp or long
                column of that schema (no manifest was read yet).
        """
        self.schema = self.schema_policy.start(self.handle.metadata, self.head(), restored)
        self.base_schema_id = self.schema.schema_id
        schema = self.read_schema()
        self.names = TypedNames.resolve(self.options, self.handle.metadata, schema)
        self.event_time = self._event_time_in(schema)
        self._cursor = None
        self._planner = self._fixed_planner
        return self.schema

    def _event_time_in(self, schema: Schema) -> EventTimeColumn | None:
        """``watermarkColumn`` resolved in ``schema`` under the name it has there (the
        option's column followed by field id, :attr:`names`)."""
        typed = self.options.watermark_column
        if typed is None:
            return None
        name = self.names.name_in(typed, schema) if self.names is not None else typed
        return resolve_event_time(schema, self.options, name or typed)

    def _check_names(self, schema: Schema, change: SchemaChange, where: str,
                     snapshot_id: int | None, columns: bool = False) -> None:
        """The filter and ``watermarkColumn`` (with ``columns``: ``columns`` and
        ``identifierColumns`` too) still name columns of ``schema``.

        Raises:
            SchemaChangedError: one names a column ``schema`` lacks (dropped, or not in a
                re-created table), naming it and ``where`` the stream met that schema.
        """
        names = self.names
        opts = self.options
        if names is None:
            return
        wanted = {"filter": filter_references(opts.filter),
                  "watermarkColumn": (opts.watermark_column,) if opts.watermark_column else ()}
        if columns:  # a dropped column leaves ``columns``; a re-created table must have it
            wanted.update(columns=opts.columns or (),
                          identifierColumns=opts.identifier_columns or ())
        for option, typed in wanted.items():
            gone = names.gone_in(schema, typed) + names.unresolved(typed)
            if gone:
                raise SchemaChangedError(
                    snapshot_id, change, f"{where}: the {option} option names column "
                    f"{gone[0]!r}, which schema {schema.schema_id} of table "
                    f"{self.handle.identifier} does not have ({change.describe()}). Stop "
                    f"the stream and restart it without that column in {option} (a new "
                    "checkpoint location, or this one at a snapshot boundary)")

    def read_schema(self) -> Schema:
        """The Iceberg schema of the stream schema (the current one before a start)."""
        metadata = self.handle.metadata
        if self.schema is None:
            return metadata.schema()
        schema = metadata.schema_by_id(self.schema.schema_id)
        return schema if schema is not None else metadata.schema()

    # -- table state ---------------------------------------------------------------

    def refresh(self) -> None:
        """Reload the table metadata from the catalog.

        Transient failures (catalog unreachable, I/O errors) are retried with backoff per
        the ``maxAttempts`` / ``retryBackoffMs`` options; after the last attempt the
        error is raised (the metadata loaded before stays in place).
        """
        identity, metadata = self.handle.identity, self.handle.metadata
        call_with_retry(self.handle.refresh, RetryPolicy.from_options(self.options),
                        f"refresh of table {self.handle.identifier}")
        if self.handle.identity != identity and self.schema is not None:
            self._left = metadata.schema_by_id(self.schema.schema_id)

    def schema_tag(self, schema: StreamSchema) -> int:
        """The tag splits read in ``schema`` carry (its id, offset by the tables followed
        since the start: :data:`~icefloe.enumerator.schema_track.SCHEMA_EPOCH`)."""
        return schema.schema_id + self._epoch * SCHEMA_EPOCH

    def _restart_schema(self) -> SchemaSwitch | None:
        """After a reset onto a re-created table: the stream schema starts again there
        (None: no stream schema had started, so nothing of the old table is in use)."""
        self._replaced = False
        if self.schema is None:
            self.start_schema()
            return None
        metadata = self.handle.metadata
        head = self.head()
        fresh = self.schema_policy.start(metadata, head, None)
        self.schema_policy.forget()
        self._epoch += 1
        self._replaced = False
        self.schema = fresh
        schema = metadata.schema_by_id(fresh.schema_id) or metadata.schema()
        change = new_table_change(self._left, schema)
        self._left = None
        # another table: the names mean its columns, under their field ids there
        self.names = TypedNames.resolve(self.options, metadata, schema)
        where = f"table {self.handle.identifier} was re-created and the stream moved onto " \
            f"it (onLineageBreak={self.options.on_lineage_break})"
        self._check_names(schema, change, where, None, columns=True)
        try:
            self.event_time = self._event_time_in(schema)
        except InvalidOptionError as exc:
            raise SchemaChangedError(None, change, f"{where}: {exc}") from exc
        log.info("stream schema restarts on the re-created table %s: schema %d (%s)",
                 self.handle.identifier, fresh.schema_id, change.describe())
        return SchemaSwitch(head.snapshot_id if head else 0, _seq(head) if head else 0, fresh,
                            change, tag=self.schema_tag(fresh))

    def head(self) -> Snapshot | None:
        """The head snapshot of the configured branch (None: the table has none yet)."""
        return self.handle.head(self.options.ref, self.options.ref_kind)

    def _planner_for_metadata(self, schema_id: int | None = None) -> SplitPlanner:
        """The planner of the current metadata binding the filter in ``schema_id`` (the
        stream schema of the unit; None: the current schema)."""
        if self._fixed_planner is not None:
            return self._fixed_planner
        metadata = self.handle.metadata
        key = (metadata.metadata_log[-1].metadata_file if metadata.metadata_log
               else id(metadata), schema_id)
        if self._planner is None or key != self._planner_key:
            schema = (metadata.schema_by_id(schema_id) if schema_id is not None
                      else None) or metadata.schema()
            names = self.names
            event_time = self.event_time
            if event_time is not None:  # a rename names it otherwise (messages)
                event_time = dataclasses.replace(
                    event_time, name=schema.find_column_name(event_time.field_id)
                    or event_time.name)
            planner = TableSplitPlanner(
                self.handle.metadata, self.handle.io, schema, self.options.filter,
                self.options.case_sensitive, self.options.split_size, self._fetcher_for_io(),
                event_time, names.renames_in(schema) if names is not None else ())
            if self.options.changelog:
                from icefloe.enumerator.changelog import ChangelogPlanner

                self._planner = ChangelogPlanner(planner, self.handle.io,
                                                 self.options.compute_updates)
            else:
                self._planner = with_row_lineage(
                    planner, self.handle.io, self.options.metadata_columns,
                    self.handle.metadata.format_version)
            self._planner_key = key
        return self._planner

    def _fetcher_for_io(self) -> ChangeFetcher | None:
        """The fetcher of the table's FileIO that plain incremental planning reads
        through (None for a changelog, which reads the snapshots' changes itself)."""
        if self.options.changelog:
            return None
        if self._fetcher is None or self._fetcher.io is not self.handle.io:
            self._fetcher = ChangeFetcher(self.handle.io)
        return self._fetcher

    def _fetch_ahead(self, units: list[tuple[Phase, Snapshot, int]], index: int) -> None:
        """Start fetching the files of the incremental units from ``units[index]`` on."""
        fetcher = self._fetcher
        if fetcher is None or self._fixed_planner is not None:
            return
        fetcher.ahead(snap for phase, snap, start in units[index:index + fetcher.depth]
                      if phase == "incremental" and start == 0)

    # -- starting strategies -----------------------------------------------------

    def initial_position(self) -> Position:
        """Resolve the starting strategy on the configured branch.

        - default: full scan of the head, then its successors;
        - ``startingVersion=<id>``: that snapshot's own changes onward;
        - ``latest``: only what is committed after now; ``earliest``: the oldest
          snapshot's changes onward;
        - ``startingTimestamp``: the changes of the first snapshot committed at or after it.

        Raises:
            SnapshotNotFoundError: a starting snapshot that is not on the branch.
        """
        opts = self.options
        head = self.head()
        what = f"branch {opts.ref!r} of table {self.handle.identifier}"
        if head is None:
            return Position.beginning()
        lineage = list(ancestors(head, self.handle.metadata))  # newest first
        version = opts.starting_version
        if version == "latest":
            return Position.after(head.snapshot_id, _seq(head))
        if version == "earliest":
            oldest = lineage[-1]
            return Position("incremental", oldest.snapshot_id, _seq(oldest), 0)
        if isinstance(version, int):
            for snap in lineage:
                if snap.snapshot_id == version:
                    return Position("incremental", snap.snapshot_id, _seq(snap), 0)
            raise SnapshotNotFoundError(
                f"startingVersion {version} is not a snapshot on {what}; pick one of its "
                "ancestors (or 'earliest' / 'latest')")
        if opts.starting_timestamp_ms is not None:
            later = [s for s in lineage if s.timestamp_ms >= opts.starting_timestamp_ms]
            if not later:
                return Position.after(head.snapshot_id, _seq(head))
            first = later[-1]
            return Position("incremental", first.snapshot_id, _seq(first), 0)
        return Position("scan", head.snapshot_id, _seq(head), 0)

    # -- lineage safety -----------------------------------------------------------

    def _check_identity(self) -> None:
        current = self.handle.identity
        if current != self.identity:
            raise TableReplacedError(
                f"table {self.handle.identifier} was dropped and re-created (identity "
                f"{self.identity} is now {current}); its old position means nothing in the new "
                "table. Set onLineageBreak=restartFromStart or restartFromHead to continue")

    def snapshots_after(self, position: Position, head: Snapshot) -> list[Snapshot]:
        """Snapshots whose changes come after ``position`` (oldest first), up to ``head``.

        The snapshot of a unit in progress is not included (its rest is not a new unit).

        Raises:
            LineageBreakError / ExpiredPositionError: ``position`` left the lineage.
        """
        metadata = self.handle.metadata
        what = f"branch {self.options.ref!r} of table {self.handle.identifier}"
        if position.snapshot_id is None:
            return snapshots_between(metadata, head, None, what=what)
        return snapshots_between(metadata, head, position.snapshot_id, what=what)

    def _recover(self, position: Position, head: Snapshot | None,
                 exc: Exception) -> Position:
        """Apply onLineageBreak / failOnDataLoss to a broken position, or re-raise."""
        opts = self.options
        if isinstance(exc, ExpiredPositionError) and not opts.fail_on_data_loss and head:
            oldest = list(ancestors(head, self.handle.metadata))[-1]
            log.warning("position %s expired; failOnDataLoss=false: continuing from the "
                        "oldest snapshot still in the lineage, %d (data in between is lost)",
                        position.describe(), oldest.snapshot_id)
            return Position("incremental", oldest.snapshot_id, _seq(oldest), 0)
        if opts.on_lineage_break != "fail" and isinstance(exc, TableReplacedError):
            self._replaced = True
        if opts.on_lineage_break == "restartFromStart":
            self.identity = self.handle.identity
            start = self.initial_position()
            log.warning("lineage broken at %s (%s); onLineageBreak=restartFromStart: "
                        "restarting at %s", position.describe(), exc, start.describe())
            return start
        if opts.on_lineage_break == "restartFromHead":
            self.identity = self.handle.identity
            start = Position.after(head.snapshot_id, _seq(head)) if head \
                else Position.beginning()
            log.warning("lineage broken at %s (%s); onLineageBreak=restartFromHead: "
                        "continuing %s", position.describe(), exc, start.describe())
            return start
        raise exc

    def validate(self, position: Position) -> tuple[Position, bool]:
        """Check ``position`` against the current metadata; returns (position, reset).

        Raises:
            TableReplacedError / LineageBreakError / ExpiredPositionError: per strategy.
        """
        head = self.head()
        try:
            self._check_identity()
            if position.snapshot_id is not None:
                if head is None:
                    raise LineageBreakError(
                        f"branch {self.options.ref!r} of table {self.handle.identifier} has no "
                        f"snapshot any more, but the position is {position.describe()}")
                self.snapshots_after(position, head)
        except (TableReplacedError, LineageBreakError, ExpiredPositionError) as exc:
            recovered = self._recover(position, head, exc)
            self._cursor = None
            return recovered, True
        return position, False

    def drop_planning_state(self) -> None:
        """Forget the open planning generator of the unit in progress (memory; the next
        :meth:`enumerate` re-plans from its position)."""
        self._cursor = None

    # -- enumeration ----------------------------------------------------------------

    def _unit_splits(self, phase: Phase, snapshot: Snapshot, start: int,
                     schema_id: int | None) -> _Cursor:
        cursor = self._cursor
        if cursor is not None and cursor.phase == phase and \
                cursor.snapshot_id == snapshot.snapshot_id and cursor.next_ordinal == start:
            return cursor
        planner = self._planner_for_metadata(schema_id)
        if phase == "scan":
            splits: Iterator[FileSplit] = planner.plan_snapshot(snapshot, start)
        else:
            splits = (s for s in planner.plan_added(snapshot) if s.ordinal >= start)
        self._cursor = _Cursor(phase, snapshot.snapshot_id, start, splits)
        return self._cursor

    def enumerate(self, position: Position, limits: Limits = UNLIMITED,
                  until_snapshot_id: int | None = None,
                  stop_at: Position | None = None) -> EnumerationResult:
        """Items after ``position`` (exclusive), within ``limits``.

        Args:
            position: where to start (exclusive).
            limits: soft admission limits.
            until_snapshot_id: do not go past this snapshot (inclusive), e.g. the head
                pinned by ``Trigger.AvailableNow``; None = the current head.
            stop_at: stop when the position reaches this one (an end offset that an
                earlier call returned: re-planning ``(position, stop_at]`` gives the same
                items as then).

        Returns:
            The items and the position after them. An empty result (no new snapshot)
            has ``to_position == from_position``.

        A failed call (e.g. a manifest read error) advances nothing: the planning cursor
        is dropped, so calling again re-plans from ``position``.
        """
        # an idle poll: the same call on the same metadata found nothing before
        key = (self.handle.version, id(self.handle.table), position, limits,
               until_snapshot_id, stop_at, self.schema)
        if self._idle is not None and self._idle[0] == key:
            return self._idle[1]
        try:
            result = self._enumerate(position, limits, until_snapshot_id, stop_at)
        except BaseException:
            self._cursor = None  # its generator may be dead: never mistake it for "done"
            raise
        self._idle = (key, result) if not result.items and not result.reset else None
        return result

    def _enumerate(self, position: Position, limits: Limits, until_snapshot_id: int | None,
                   stop_at: Position | None) -> EnumerationResult:
        position, reset = self.validate(position)
        schema_reset = self._restart_schema() if reset and self._replaced else None
        head = self.head()
        if until_snapshot_id is not None:
            head = self.handle.snapshot(until_snapshot_id)
        head_id = head.snapshot_id if head else None
        if head is None:
            return EnumerationResult(position, position, (), head_id, reset, schema_reset)
        units: list[tuple[Phase, Snapshot, int]] = []
        if position.snapshot_id is not None and position.next_ordinal is not None:
            units.append((position.phase, self.handle.snapshot(position.snapshot_id),
                          position.next_ordinal))
        chain = [] if position.snapshot_id == head_id and position.next_ordinal is None \
            else self.snapshots_after(position, head)
        units.extend(("incremental", snap, 0) for snap in chain)

        items: list[Item] = []
        files = nbytes = rows = 0
        current = position
        schema = self.schema
        if schema is None:
            schema = self.start_schema()
        metadata = self.handle.metadata
        for unit_index, (phase, snap, start) in enumerate(units):
            if current == stop_at:
                break
            if limits.max_snapshots is not None and unit_index >= limits.max_snapshots:
                break
            try:
                action = decide(snap, self.options) if phase == "incremental" else Action.EMIT
            except SnapshotPolicyError:
                if items:  # deliver what precedes the refused snapshot; the next call raises
                    break
                raise
            if action is Action.SKIP:
                log.info("skipping snapshot %d (%s) by policy", snap.snapshot_id,
                         operation_of(snap))
                items.append(UnitEnd(phase, snap.snapshot_id, _seq(snap)))
                current = Position.after(snap.snapshot_id, _seq(snap))
                continue
            if phase == "incremental" and start == 0:
                try:
                    schema, change = self.schema_policy.at_unit(metadata, schema, snap)
                    if change is not None:
                        self._check_names(
                            metadata.schema_by_id(schema.schema_id) or metadata.schema(),
                            change, f"snapshot {snap.snapshot_id} was committed under "
                            f"schema {schema.schema_id}", snap.snapshot_id)
                except SchemaChangedError:
                    if items:  # deliver what precedes the change; the next call raises
                        break
                    raise
                if change is not None:
                    log.info("schema change at snapshot %d: %s (schema %d -> %d)",
                             snap.snapshot_id, change.describe(), change.from_schema_id,
                             change.to_schema_id)
                    items.append(SchemaSwitch(snap.snapshot_id, _seq(snap), schema, change,
                                              tag=self.schema_tag(schema)))
            key = self.schema_tag(schema)
            tag = key if key != self.base_schema_id else None
            if phase == "incremental" and start == 0:
                self._fetch_ahead(units, unit_index)
            cursor = self._unit_splits(phase, snap, start, schema.schema_id)
            stopped = False
            while True:
                split = cursor.peeked if cursor.peeked is not None else next(cursor.splits, None)
                cursor.peeked = None
                if split is None:
                    break
                if current == stop_at or not limits.admits(files, nbytes, rows, split):
                    cursor.peeked = split
                    stopped = True
                    break
                items.append(split if tag is None else dataclasses.replace(split, schema_id=tag))
                files, nbytes, rows = files + 1, nbytes + split.length, rows + split.record_count
                cursor.next_ordinal = split.ordinal + 1
                current = Position(phase, snap.snapshot_id, _seq(snap),
                                   split.ordinal + 1)
            if stopped or current == stop_at:
                break
            self._cursor = None
            items.append(UnitEnd(phase, snap.snapshot_id, _seq(snap)))
            current = Position.after(snap.snapshot_id, _seq(snap))
            if limits.full(files, nbytes, rows):
                break
        self.schema = schema
        log.info("enumerated %d splits: after %s, through %s (head %s)",
                 sum(isinstance(i, FileSplit) for i in items), position.describe(),
                 current.describe(), head_id)
        return EnumerationResult(position, current, tuple(items), head_id, reset, schema_reset)
