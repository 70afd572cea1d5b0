"""Event time: splits in order of a column's lower bound, and the bound as a watermark.

Runs on the enumerator (driver). With ``watermarkColumn`` (Iceberg Flink's option of the
same name: ``WatermarkBasedSplitAssigner`` with ``ColumnStatsWatermarkExtractor``,
apache/iceberg#8553), every enumeration unit (a bounded read's snapshot, a stream's
initial scan, each later snapshot's changes) is handed out in order of the column's lower
bound in the data files' statistics, ties in the unit's deterministic file order
(manifest-list order, entry order, byte-range order). The split of a file bigger than
``splitSize`` carries the file's bound; a read task packing several splits
(:func:`~icefloe.splits.pack_for`) keeps their order, so it starts at the smallest bound.

**Ordinals are event-time ranks.** With the option, a unit is planned in file order,
sorted by ``(bound, file-order ordinal)`` and numbered ``0..n-1`` in that order: a split's
``ordinal`` is its rank in event time. Why: a position is "this unit, up to (exclusive)
this ordinal"; the ack tracker commits a contiguous prefix of ordinals, a checkpoint
stores that position, and a Spark offset cuts a unit at an ordinal. Numbering in handout
order keeps each of those contracts unchanged: a committed prefix is an event-time
prefix, a Spark micro-batch ``(start, end]`` is an event-time range, and
``partitions(start, end)`` re-plans exactly that range in any process, because the sort
is a pure function of the immutable manifests. Ordinals in file order would have kept the
committed position at the first file-order split for most of a scan (acks arrive in
event-time order) and listed every acknowledged split in the checkpoint. Split ids do
not change (a digest of snapshot, file and range). The ordering is part of the plan
fingerprint only when it is set (:func:`~icefloe.state.plan_fingerprint`): a checkpoint
written without the option keeps its fingerprint and meaning, and a checkpoint inside a
unit is never resumed under the other numbering.

**Memory.** Sorting needs the bounds of the whole unit: with the option a unit's splits
are planned at once and held while it is handed out (without it, a big initial scan is
planned lazily, a chunk at a time).

**Watermark.** A split's ``watermark_ms`` is its bound in milliseconds since the epoch
(Flink's unit: microsecond timestamps floor-divided by 1000, a long column converted from
``watermarkTimeUnit``). :class:`~icefloe.coordinator.watermark.WatermarkTracker` turns
them into the stream's watermark.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from pyiceberg.schema import Schema
from pyiceberg.types import (
    LongType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
)

from icefloe.errors import InvalidOptionError, MissingStatsError
from icefloe.options import SourceOptions
from icefloe.splits.split import FileSplit

_MS_PER_UNIT: dict[str, tuple[int, int]] = {
    # unit -> (multiplier, divisor) to milliseconds (floor)
    "NANOSECONDS": (1, 1_000_000),
    "MICROSECONDS": (1, 1_000),
    "MILLISECONDS": (1, 1),
    "SECONDS": (1_000, 1),
    "MINUTES": (60_000, 1),
    "HOURS": (3_600_000, 1),
    "DAYS": (86_400_000, 1),
}


@dataclass(frozen=True, slots=True)
class EventTimeColumn:
    """The resolved ``watermarkColumn``: a plain picklable value.

    Attributes:
        name: the column's name (as the option named it, or its name after a rename).
        field_id: its Iceberg field id (the key of the statistics maps).
        unit: the unit of its values (``MICROSECONDS`` for timestamp / timestamptz,
            ``NANOSECONDS`` for the ``_ns`` types, ``watermarkTimeUnit`` for a long).
        missing: ``watermarkMissingStats``: ``fail``, ``first`` or ``last``.
    """

    name: str
    field_id: int
    unit: str
    missing: Literal["fail", "first", "last"] = "fail"

    def bound(self, lower_bounds: dict[int, bytes] | None) -> int | None:
        """The column's lower bound in a file's ``lower_bounds`` map, in the column's unit
        (None: no bound). Timestamps and longs are 8 little-endian bytes; a long promoted
        from an int has 4 in the files written before the promotion."""
        if not lower_bounds:
            return None
        raw = lower_bounds.get(self.field_id)
        if raw is None:
            return None
        return int.from_bytes(raw, "little", signed=True)

    def to_ms(self, value: int) -> int:
        """``value`` (in :attr:`unit`) in milliseconds since the epoch, floored."""
        multiplier, divisor = _MS_PER_UNIT[self.unit]
        return value * multiplier // divisor


def resolve_event_time(schema: Schema, options: SourceOptions,
                       name: str | None = None) -> EventTimeColumn | None:
    """``watermarkColumn`` resolved in ``schema`` (None without the option). Runs before
    any manifest is read.

    ``name``: the column's name in ``schema`` when a rename since the option was typed
    named it otherwise (a stream follows it by field id, :mod:`icefloe.reader.names`);
    None: the option's.

    Raises:
        InvalidOptionError: no such column, a column that is not timestamp, timestamptz
            (or their ``_ns`` variants) or long, or ``watermarkTimeUnit`` given for a
            timestamp column (its unit is the type's).
    """
    if options.watermark_column is None:
        return None
    name = name or options.watermark_column
    try:
        found = schema.find_field(name, options.case_sensitive)
    except ValueError:
        columns = ", ".join(f.name for f in schema.fields)
        raise InvalidOptionError(
            "watermarkColumn", f"no column {name!r} in the table's schema (its columns: "
            f"{columns}); name a timestamp or long column") from None
    kind = found.field_type
    if isinstance(kind, TimestampType | TimestamptzType | TimestampNanoType
                  | TimestamptzNanoType):
        if "watermarkTimeUnit" in options.given:
            raise InvalidOptionError(
                "watermarkTimeUnit", f"applies to a long watermarkColumn only; {name!r} is "
                f"a {kind}, whose unit is its type's: remove watermarkTimeUnit")
        unit = "NANOSECONDS" if isinstance(kind, TimestampNanoType | TimestamptzNanoType) \
            else "MICROSECONDS"
    elif isinstance(kind, LongType):
        unit = options.watermark_time_unit
    else:
        raise InvalidOptionError(
            "watermarkColumn", f"column {name!r} is a {kind}; it must be a timestamp, "
            "timestamptz or long (with watermarkTimeUnit)")
    return EventTimeColumn(name, found.field_id, unit, options.watermark_missing_stats)


def order_unit(files: Iterable[tuple[list[FileSplit], int | None]], column: EventTimeColumn,
               start_ordinal: int = 0) -> Iterator[FileSplit]:
    """A unit's splits in event-time order, ordinals renumbered, from ``start_ordinal``
    (inclusive).

    Args:
        files: each data file's splits with the file's lower bound (None: no bound), in
            the unit's deterministic file order.
        column: the watermark column.
        start_ordinal: the first event-time ordinal to yield (a resumed position).

    Raises:
        MissingStatsError: a file without a bound under ``watermarkMissingStats=fail``
            (raised before any split is yielded).
    """
    keyed: list[tuple[int, int, int, FileSplit, int | None]] = []
    index = 0
    for splits, bound in files:
        if bound is None:
            if column.missing == "fail" and splits:
                path = splits[0].file_path
                raise MissingStatsError(
                    f"data file {path} has no lower bound for watermarkColumn "
                    f"{column.name!r} in its statistics (metrics mode none or counts; "
                    "Iceberg writes none past 100 columns by default), so it has no place "
                    "in event-time order. Set watermarkMissingStats=first or last to read "
                    "such files first or last, or have the writer keep bounds for it "
                    f"(table property write.metadata.metrics.column.{column.name}=full)",
                    path, column.name)
            group, key = (0 if column.missing == "first" else 2), 0
        else:
            group, key = 1, bound
        for split in splits:
            keyed.append((group, key, index, split, bound))
            index += 1
    keyed.sort(key=lambda k: (k[0], k[1], k[2]))
    replace = dataclasses.replace
    for ordinal, (_, _, _, split, bound) in enumerate(keyed):
        if ordinal >= start_ordinal:
            yield replace(split, ordinal=ordinal,
                          watermark_ms=None if bound is None else column.to_ms(bound))


def merge_units(units: Iterable[Iterator[FileSplit]], column: EventTimeColumn
                ) -> Iterator[FileSplit]:
    """Several units' event-time-ordered splits merged into one event-time order (a
    bounded incremental read over a range of snapshots); ties (same millisecond) in unit
    order. Splits without a bound go first or last as ``watermarkMissingStats`` says."""
    first = column.missing == "first"

    def key(split: FileSplit) -> tuple[int, int]:
        if split.watermark_ms is None:
            return (0 if first else 2, 0)
        return (1, split.watermark_ms)

    return heapq.merge(*units, key=key)
