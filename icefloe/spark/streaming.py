"""Spark Structured Streaming: icefloe's continuous enumerator as a DataSourceStreamReader.

Who runs what:

- ``initialOffset`` / ``latestOffset`` / ``partitions`` / ``commit`` /
  ``prepareForTriggerAvailableNow`` / ``reportLatestOffset``: the driver (Spark's
  streaming source runner). The table handle and the enumerator live there only.
- ``read``: executors, through the same module-level read function as batch reads.

Offsets are the enumerator :class:`~icefloe.state.position.Position` plus the table
identity and the query's schema id (``onSchemaChange``: a query's schema is fixed when
it starts, so ``fail``, the default, stops before the first snapshot of another schema
and a restart reads on in the new one, after checking the change since the offset's
schema against ``allowColumnRename`` / ``allowColumnDrop``), as a small versioned dict
of strings and integers in a fixed key order (Spark compares offsets as JSON strings):
the same table state gives byte-identical offsets in any driver process. Spark's
checkpoint holds them; icefloe keeps no state of its own, so Spark's commit log gives
exactly-once with an idempotent sink.
``partitions(start, end)`` re-plans ``(start, end]`` deterministically from immutable
manifests, so a restarted driver produces the same partitions for the same offsets.

Metrics: what the Python Data Source API lets a source report is its latest offset
(``reportLatestOffset``: the branch head, so Spark's progress shows ``latestOffset``
next to ``endOffset``). :func:`progress_lag` turns a query's progress (its last
``endOffset``) into icefloe's :class:`~icefloe.coordinator.lag.Lag` against the head
now: snapshots, records, files, bytes and seconds behind, as ``stream.metrics()`` counts
them on the other engines.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pickle
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from icefloe.errors import InvalidOptionError

log = logging.getLogger(__name__)

OFFSET_VERSION = 2
"""1: position and table identity; 2 adds ``schema``, the query's schema id."""
ORDERED_OFFSET_VERSION = 3
"""3: version 2 plus ``order``, written only with ``watermarkColumn`` (the ordinals are
event-time ranks, :mod:`icefloe.enumerator.event_time`): an offset without it was cut in
file order, and an icefloe that predates it refuses it instead of misreading it."""


def position_to_offset(position: Any, identity: str, schema_id: int,
                       order: str | None = None) -> dict[str, Any]:
    """The canonical offset dict of ``position`` read in ``schema_id`` (fixed key order,
    no floats, no nulls); ``order`` (:func:`offset_order`) makes it a version-3 offset."""
    offset = {
        "v": OFFSET_VERSION if order is None else ORDERED_OFFSET_VERSION,
        "table": identity,
        "phase": position.phase,
        "snapshot": "" if position.snapshot_id is None else str(position.snapshot_id),
        "seq": int(position.sequence_number),
        "ordinal": -1 if position.next_ordinal is None else int(position.next_ordinal),
        "schema": int(schema_id),
    }
    if order is not None:
        offset["order"] = order
    return offset


def offset_order(options: Any) -> str | None:
    """The ordering an offset records: ``"<watermarkColumn>/<watermarkMissingStats>"``, or
    None for file order (no ``watermarkColumn``)."""
    if options.watermark_column is None:
        return None
    return f"{options.watermark_column}/{options.watermark_missing_stats}"


def check_offset_order(offset: dict[str, Any], order: str | None) -> None:
    """Refuse an offset that stands inside a unit cut in another order than the query's
    (a restart with ``watermarkColumn`` switched): its ordinal would name other splits.
    At a unit boundary (ordinal -1) or a unit's start (ordinal 0) any order goes on.

    Raises:
        InvalidOptionError: naming watermarkColumn, the two orders and the fix.
    """
    if offset.get("ordinal", -1) <= 0 or offset.get("order") == order:
        return
    def said(o: Any) -> str:
        return "file order" if o is None else f"event-time order {o!r}"
    raise InvalidOptionError(
        "watermarkColumn", f"the query's checkpoint stands inside snapshot "
        f"{offset.get('snapshot')} in {said(offset.get('order'))}, and this run plans "
        f"{said(order)}: the offsets' ordinals would name other splits. Restore the option "
        "as it was until the query passes that snapshot, or start a new checkpoint")


def offset_schema_id(offset: dict[str, Any]) -> int | None:
    """The schema id an offset was read in (None: a version-1 offset)."""
    value = offset.get("schema")
    return None if value is None else int(value)


def offset_to_position(offset: dict[str, Any]) -> Any:
    """Inverse of :func:`position_to_offset` (any offset version ever written)."""
    from icefloe.state.position import Position

    version = offset.get("v")
    if version not in (1, OFFSET_VERSION, ORDERED_OFFSET_VERSION):
        raise InvalidOptionError(
            "offset", f"offset version {version!r} is not readable by this icefloe (reads "
            f"1 to {ORDERED_OFFSET_VERSION}); was the query's checkpoint written by a newer "
            "icefloe?")
    snapshot = offset["snapshot"]
    return Position(
        offset["phase"], int(snapshot) if snapshot else None, int(offset["seq"]),
        None if offset["ordinal"] < 0 else int(offset["ordinal"]),
    )


class IcefloeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reads of one table's branch. Picklable: options and bytes only.

    Args:
        table: table identifier.
        options: icefloe options (icefloe spelling), checked for continuous mode.
        schema: the DataFrame schema.
    """

    def __init__(self, table: str, options: dict[str, str], schema: StructType) -> None:
        from icefloe.options import SourceOptions

        self.table = table
        self.options = dict(options)
        self.schema_json = schema.json()
        SourceOptions.parse(self.options).for_mode("continuous")
        self._driver: Any = None
        self._pinned: int | None = None
        self._initial: dict[str, Any] | None = None
        self._checked_schemas: set[int] = set()
        self.context_bytes = self._state().context_bytes

    # -- driver-side state --------------------------------------------------------

    def _state(self) -> Any:
        if self._driver is None:
            self._driver = _DriverState(self.table, self.options)
        return self._driver

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_driver"] = None  # catalog, table handle, enumerator stay on the driver
        return state

    # -- offsets ------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        """The resolved starting strategy on the branch (driver), resolved once per reader.

        Spark asks for it more than once for the first micro-batch (to plan its end with
        ``latestOffset`` and again as the start of ``partitions``). The default strategy
        (a scan of the head) and ``latest`` depend on the head at call time, so a commit
        in between would give ``partitions`` a start after the logged end (a
        ``LineageBreakError``, or a skipped range): the first answer is kept.
        """
        if self._initial is None:
            driver = self._state()
            self._initial = driver.offset(driver.enumerator.initial_position(),
                                          driver.identity())
        return dict(self._initial)

    def _moving_start(self) -> bool:
        """Whether the starting strategy depends on the head at the time it is resolved
        (a scan of the head, the default; or ``latest``)."""
        opts = self._state().options
        return opts.starting_timestamp_ms is None and opts.starting_version in (None, "latest")

    def _first_batch_start(self, end: dict[str, Any]) -> dict[str, Any]:
        """The start of batch 0 derived from its logged ``end`` (driver).

        A driver restarted while batch 0 was open resolves :meth:`initialOffset` again,
        maybe at a newer head. Batch 0 never leaves one unit (:meth:`latestOffset`), so
        its start is the scan of the end's snapshot (default strategy) or the position
        after the parent of the end's snapshot (``latest``). Equal to the first answer
        when nothing was committed in between.
        """
        from icefloe.state.position import Position

        driver = self._state()
        stop = offset_to_position(end)
        if stop.snapshot_id is None:
            return dict(self.initialOffset())
        handle = driver.enumerator.handle
        if offset_to_position(self.initialOffset()).phase == "scan":
            snapshot = handle.snapshot(stop.snapshot_id)
            start = Position("scan", snapshot.snapshot_id, snapshot.sequence_number or 0, 0)
        else:
            parent_id = handle.snapshot(stop.snapshot_id).parent_snapshot_id
            if parent_id is None:
                start = Position.beginning()
            else:
                parent = handle.snapshot(parent_id)
                start = Position.after(parent.snapshot_id, parent.sequence_number or 0)
        return self._state().offset(start, end["table"])

    def getDefaultReadLimit(self) -> ReadLimit:
        """The first of maxFilesPerTrigger / maxBytesPerTrigger / maxRowsPerTrigger set."""
        opts = self._state().options
        if opts.max_files_per_trigger is not None:
            return ReadMaxFiles(opts.max_files_per_trigger)
        if opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(opts.max_bytes_per_trigger)
        if opts.max_rows_per_trigger is not None:
            return ReadMaxRows(opts.max_rows_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end offset of the next micro-batch from ``start`` within ``limit`` (driver).

        ``ReadAllAvailable`` ignores the options' limits (Spark's contract); any other
        limit is combined with the limits the options set. Soft: one split always fits.

        Raises:
            SnapshotPolicyError / LineageError: per the policy and lineage options.
            SchemaChangedError: the next snapshot has another schema (``fail``), or the
                query restarted across a rename / drop not allowed.
        """
        from icefloe.enumerator.continuous import Limits

        driver = self._state()
        check_offset_order(start, driver.order)
        driver.enumerator.refresh()
        driver.enumerator.identity = start["table"]
        self._check_restart_schema(start)
        if isinstance(limit, ReadAllAvailable):
            limits = Limits()
        else:
            opts = driver.options
            limits = Limits(
                limit.max_files if isinstance(limit, ReadMaxFiles) else opts.max_files_per_trigger,
                limit.max_bytes if isinstance(limit, ReadMaxBytes) else opts.max_bytes_per_trigger,
                limit.max_rows if isinstance(limit, ReadMaxRows) else opts.max_rows_per_trigger,
                opts.max_snapshots_per_trigger,
            )
        until = self._pinned
        if self._moving_start() and start == self._initial:
            # batch 0 from a start that depends on the head: keep its end within one unit,
            # so a restarted driver can derive this start from the logged end
            # (:meth:`_first_batch_start`)
            position = offset_to_position(start)
            if position.phase == "scan":
                until = position.snapshot_id
            else:
                limits = dataclasses.replace(limits, max_snapshots=1)
        result = driver.enumerator.enumerate(offset_to_position(start), limits, until)
        end = driver.offset(result.to_position, driver.enumerator.identity)
        driver.last = (start, end, result.splits)
        log.info("latestOffset: %d splits after %s, through %s", len(result.splits),
                 result.from_position.describe(), result.to_position.describe())
        return end

    def _check_restart_schema(self, start: dict[str, Any]) -> None:
        """An offset of another schema than the query's: the query restarted after a
        schema change (``fail``), or the table changed while it was down. A rename or drop
        in between needs its allow option (once per schema id and reader)."""
        schema_id = offset_schema_id(start)
        if schema_id is None or schema_id in self._checked_schemas:
            return
        enumerator = self._state().enumerator
        current = enumerator.schema
        if current is not None and schema_id != current.schema_id:
            enumerator.schema_policy.check_restart(enumerator.handle.metadata, schema_id)
            log.info("query restarted in schema %d after offsets of schema %d",
                     current.schema_id, schema_id)
        self._checked_schemas.add(schema_id)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """Splits of ``(start, end]``, packed by :func:`~icefloe.spark.planning.spark_tasks`
        (driver); none when equal."""
        from icefloe.enumerator.continuous import Limits
        from icefloe.spark.planning import spark_tasks
        from icefloe.splits import serialize_split

        if start == end:
            return []
        driver = self._state()
        check_offset_order(start, driver.order)
        check_offset_order(end, driver.order)
        if self._moving_start() and start == self.initialOffset():
            start = self._first_batch_start(end)
            if start == end:
                return []
        if driver.last is not None and driver.last[:2] == (start, end):
            splits = driver.last[2]  # planned by latestOffset just now
        else:  # a restarted driver: re-plan (start, end] from the immutable manifests
            driver.enumerator.identity = start["table"]
            stop = offset_to_position(end)
            splits = driver.enumerator.enumerate(
                offset_to_position(start), Limits(), stop.snapshot_id, stop_at=stop).splits
        opts = driver.options
        return [
            InputPartition(tuple(serialize_split(s) for s in task))
            for task in spark_tasks(splits, opts)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of ``partition`` (executor)."""
        from icefloe.spark.executor import read_splits  # what datasource.read_partition calls

        if not partition.value:
            return iter(())
        return read_splits(self.context_bytes, self.schema_json, partition.value)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark committed ``end``: drop planning state before it (driver)."""
        if self._driver is not None:
            self._driver.enumerator.drop_planning_state()

    def prepareForTriggerAvailableNow(self) -> None:
        """Pin the target: never go past the head as of now (driver)."""
        head = self._state().enumerator.head()
        self._pinned = head.snapshot_id if head is not None else None
        if self._pinned is None:
            log.info("Trigger.AvailableNow on an empty table: nothing to read")

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The branch head, so Spark's progress shows the lag (driver)."""
        from icefloe.state.position import Position

        driver = self._state()
        head = driver.enumerator.head()
        if head is None:
            return None
        return driver.offset(Position.after(head.snapshot_id, head.sequence_number),
                             driver.identity())


class _DriverState:
    """The driver-side half of a stream reader (never pickled)."""

    def __init__(self, table: str, options: dict[str, str]) -> None:
        from icefloe.enumerator.continuous import ContinuousEnumerator
        from icefloe.reader.context import ReadContext
        from icefloe.source import IcebergSource

        source = IcebergSource(table, options=options)
        self.options = source.options.for_mode("continuous")
        handle = source.handle
        self.enumerator = ContinuousEnumerator(handle, self.options,
                                               schema_mode=self.options.schema_mode("spark"))
        self.schema = self.enumerator.start_schema()  # the query's, fixed for its run
        context = ReadContext.create(handle.metadata, handle.io,
                                     self.enumerator.read_schema(), self.options,
                                     self.enumerator.names)
        self.context_bytes = pickle.dumps(context)
        self.arrow_schema = context.arrow_schema
        self.last: tuple[dict[str, Any], dict[str, Any], tuple[Any, ...]] | None = None
        self.order = offset_order(self.options)

    def identity(self) -> str:
        return self.enumerator.handle.identity

    def offset(self, position: Any, identity: str) -> dict[str, Any]:
        """The offset of ``position`` in the query's schema (and order)."""
        return position_to_offset(position, identity, self.schema.schema_id, self.order)


def _progress_dict(progress: Any) -> dict[str, Any]:
    """A query progress as a dict (a dict already, a ``StreamingQueryProgress``, JSON)."""
    if isinstance(progress, dict):
        return progress
    if isinstance(progress, str):
        return dict(json.loads(progress))
    text = getattr(progress, "json", None)
    if text is not None:
        return dict(json.loads(text() if callable(text) else text))
    raise InvalidOptionError("progress", f"{type(progress).__name__} is not a streaming "
                             "query progress; pass query.lastProgress")


def _icefloe_offset(value: Any) -> dict[str, Any] | None:
    """An icefloe offset dict from a progress source's offset (JSON text or dict)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, dict) and {"v", "table", "phase", "snapshot"} <= value.keys():
        return value
    return None


def progress_lag(progress: Any, table: str, options: dict[str, str] | None = None) -> Any:
    """icefloe's lag of a Spark streaming query reading ``table``, from its progress.

    Measured from the ``endOffset`` of the query's icefloe source in ``progress`` (what
    the last micro-batch processed through) to the branch head now. Runs on the driver
    (or anywhere the catalog is reachable): it opens the table, nothing else.

    Args:
        progress: ``query.lastProgress`` (a dict or a ``StreamingQueryProgress``), or its
            JSON text.
        table: the table the query reads (``namespace.table``).
        options: the query's icefloe options (``catalog``, ``catalog.<prop>``, ``ref``...).

    Returns:
        An :class:`icefloe.coordinator.lag.Lag`.

    Raises:
        InvalidOptionError: no source of ``progress`` has an icefloe ``endOffset`` (a
            progress before the first batch, or another query's).
    """
    from icefloe.coordinator.lag import measure_lag
    from icefloe.enumerator.continuous import ContinuousEnumerator
    from icefloe.source import IcebergSource

    sources = _progress_dict(progress).get("sources") or []
    offsets = [o for o in (_icefloe_offset(s.get("endOffset")) for s in sources) if o]
    if not offsets:
        raise InvalidOptionError("progress", "no icefloe source with an endOffset in this "
                                 "progress: pass query.lastProgress once a batch ran")
    source = IcebergSource(table, options=dict(options or {}))
    opts = source.options.for_mode("continuous")
    enumerator = ContinuousEnumerator(source.handle, opts,
                                      schema_mode=opts.schema_mode("spark"))
    return measure_lag(offset_to_position(offsets[0]), enumerator)


def stream_schema(table: str, options: dict[str, str]) -> Any:
    """The DataFrame schema of a stream (the table's current schema; driver)."""
    from icefloe.spark.types import spark_schema

    state = _DriverState(table, options)
    context = pickle.loads(state.context_bytes)
    return spark_schema(context.projected_schema, context.metadata_columns,
                        context.changelog)
