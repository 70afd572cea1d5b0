"""The demo table's name, schema, partition spec and rows (``icefloe demo``).

Shared by :mod:`icefloe.demo` (the backfill part) and :mod:`icefloe.demo_stream` (the
streaming part), which import it rather than each other.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, DoubleType, LongType, NestedField, StringType, TimestampType

TABLE = "demo.events"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "kind", StringType()),
    NestedField(3, "ts", TimestampType()),
    NestedField(4, "day", DateType()),
    NestedField(5, "value", DoubleType()),
)
SPEC = PartitionSpec(PartitionField(4, 1000, IdentityTransform(), "day"))
KINDS = ("click", "view", "buy")


def demo_rows(start: int, n: int, with_score: bool = False) -> pa.Table:
    """``n`` deterministic event rows with ids ``[start, start + n)``."""
    ids = list(range(start, start + n))
    base = dt.datetime(2026, 1, 1)
    data = {
        "id": pa.array(ids, pa.int64()),
        "kind": pa.array([KINDS[i % 3] for i in ids], pa.large_string()),
        "ts": pa.array([base + dt.timedelta(minutes=7 * i) for i in ids], pa.timestamp("us")),
        "day": pa.array([(base + dt.timedelta(minutes=7 * i)).date() for i in ids], pa.date32()),
        "value": pa.array([i * 0.5 for i in ids], pa.float64()),
    }
    if with_score:
        data["score"] = pa.array([i % 100 for i in ids], pa.int64())
    fields = [pa.field("id", pa.int64(), nullable=False)] + [
        pa.field(k, v.type) for k, v in data.items() if k != "id"
    ]
    return pa.table(data, schema=pa.schema(fields))
