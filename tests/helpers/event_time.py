"""Event-time tables (``ts`` is a timestamptz: Spark's withWatermark takes TIMESTAMP, not
TIMESTAMP_NTZ): files appended out of event-time order, and PyIceberg's view of their
bounds (the oracle of split order: PyIceberg's manifest reader and ``from_bytes``, not
icefloe's decoder)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.conversions import from_bytes
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

EVENT_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "ts", TimestamptzType(), required=False),
    NestedField(3, "ts_ms", LongType(), required=False),
    NestedField(4, "kind", StringType(), required=False),
)
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
HOURS = (3, 0, 5, 1, 4, 2)
"""Each append holds one hour of events; neither append order nor its reverse (the order
of a fast-append table's manifests) is event-time order."""


def hour_rows(hour: int, n: int = 12, first_id: int | None = None) -> pa.Table:
    """``n`` events of ``hour`` (minutes ``0, 5, ...``), ids from ``first_id`` (default
    ``hour * 1000``)."""
    start = hour * 1000 if first_id is None else first_id
    times = [BASE + dt.timedelta(hours=hour, minutes=5 * i) for i in range(n)]
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return pa.table({
        "id": [start + i for i in range(n)],
        "ts": times,
        "ts_ms": [(t - epoch) // dt.timedelta(milliseconds=1) for t in times],
        "kind": ["a" if i % 2 else "b" for i in range(n)],
    }, schema=schema_to_pyarrow(EVENT_SCHEMA))


def event_table(catalog: Catalog, identifier: str = "db.events",
                hours: Sequence[int] = HOURS, n: int = 12) -> Table:
    """A table with one append (one file) per hour of ``hours``, in that order."""
    catalog.create_namespace_if_not_exists(Catalog.namespace_from(identifier))
    table = catalog.create_table(identifier, EVENT_SCHEMA,
                                 properties={"format-version": "2"})
    for hour in hours:
        table.append(hour_rows(hour, n))
    return table


def pyiceberg_bounds(table: Table, column: str = "ts") -> dict[str, int]:
    """Data file path -> the column's lower bound as PyIceberg decodes it from the head's
    manifests (microseconds for a timestamp)."""
    field = table.schema().find_field(column)
    out = {}
    for task in table.scan().plan_files():
        raw = (task.file.lower_bounds or {}).get(field.field_id)
        out[task.file.file_path] = None if raw is None else from_bytes(field.field_type, raw)
    return out


def event_time_order(table: Table, column: str = "ts") -> list[str]:
    """The head's data files with a bound, in order of the column's lower bound (the
    oracle)."""
    bounds = {p: b for p, b in pyiceberg_bounds(table, column).items() if b is not None}
    return sorted(bounds, key=lambda path: bounds[path])
