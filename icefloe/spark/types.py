"""Iceberg schema -> Spark schema, for the Spark adapter. Runs on the driver.

Mapping (what Spark's own Iceberg connector does, plus Spark 4's TIME type):

| Iceberg | Spark |
|---|---|
| boolean, int, long, float, double | BooleanType, IntegerType, LongType, FloatType, DoubleType |
| decimal(P, S) | DecimalType(P, S) |
| date / time | DateType / TimeType(6) |
| timestamp / timestamp_ns | TimestampNTZType (nanoseconds truncated to microseconds) |
| timestamptz / timestamptz_ns | TimestampType (nanoseconds truncated to microseconds) |
| string, uuid | StringType (a uuid as its canonical 36-character text) |
| fixed(L), binary, geometry, geography | BinaryType (geo types as WKB) |
| unknown | NullType |
| struct / list / map | StructType / ArrayType / MapType, nullability from ``required`` |

Spark 4.3 reads TIME columns but refuses a filter on one over any Python data source
(UNSUPPORTED_TIME_TYPE): filter time columns with icefloe's ``filter`` option instead.

Metadata columns (``_snapshot_id``, ``_sequence_number``, ``_pos``: LongType; ``_file``:
StringType) follow the data columns, never null.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg import types as it
from pyiceberg.schema import Schema
from pyspark.sql import types as st

from icefloe.errors import EngineError

_PRIMITIVES: dict[type[it.IcebergType], st.DataType] = {
    it.BooleanType: st.BooleanType(),
    it.IntegerType: st.IntegerType(),
    it.LongType: st.LongType(),
    it.FloatType: st.FloatType(),
    it.DoubleType: st.DoubleType(),
    it.DateType: st.DateType(),
    it.TimeType: st.TimeType(6),
    it.TimestampType: st.TimestampNTZType(),
    it.TimestampNanoType: st.TimestampNTZType(),
    it.TimestamptzType: st.TimestampType(),
    it.TimestamptzNanoType: st.TimestampType(),
    it.StringType: st.StringType(),
    it.UUIDType: st.StringType(),
    it.BinaryType: st.BinaryType(),
    it.FixedType: st.BinaryType(),
    it.GeometryType: st.BinaryType(),
    it.GeographyType: st.BinaryType(),
    it.UnknownType: st.NullType(),
}

METADATA_TYPES: dict[str, st.DataType] = {
    "_snapshot_id": st.LongType(),
    "_sequence_number": st.LongType(),
    "_file": st.StringType(),
    "_pos": st.LongType(),
    "_row_id": st.LongType(),
    "_last_updated_sequence_number": st.LongType(),
}
NULLABLE_METADATA = frozenset({"_row_id"})
"""Metadata columns that may be null (``_row_id`` of rows without row lineage)."""


def spark_type(iceberg_type: it.IcebergType, column: str = "?") -> st.DataType:
    """The Spark type of an Iceberg type (see the module table).

    Raises:
        EngineError: a type with no Spark counterpart (names the column).
    """
    if isinstance(iceberg_type, it.DecimalType):
        return st.DecimalType(iceberg_type.precision, iceberg_type.scale)
    if isinstance(iceberg_type, it.StructType):
        return st.StructType([_spark_field(f, f"{column}.{f.name}") for f in iceberg_type.fields])
    if isinstance(iceberg_type, it.ListType):
        return st.ArrayType(
            spark_type(iceberg_type.element_type, f"{column}.element"),
            containsNull=not iceberg_type.element_required,
        )
    if isinstance(iceberg_type, it.MapType):
        return st.MapType(
            spark_type(iceberg_type.key_type, f"{column}.key"),
            spark_type(iceberg_type.value_type, f"{column}.value"),
            valueContainsNull=not iceberg_type.value_required,
        )
    for iceberg_class, spark in _PRIMITIVES.items():
        if isinstance(iceberg_type, iceberg_class):
            return spark
    raise EngineError(
        f"column {column!r} has Iceberg type {iceberg_type}, which Spark cannot represent; "
        "leave it out with the columns option"
    )


def _spark_field(field: it.NestedField, path: str) -> st.StructField:
    return st.StructField(field.name, spark_type(field.field_type, path),
                          nullable=not field.required)


CHANGE_TYPES = {
    "_change_type": st.StringType(),
    "_change_ordinal": st.IntegerType(),
    "_commit_snapshot_id": st.LongType(),
    "_commit_timestamp": st.TimestampType(),
}
"""Spark types of :data:`icefloe.reader.context.CHANGE_FIELDS` (same order)."""


def spark_schema(schema: Schema, metadata_columns: Sequence[str] = (),
                 changelog: bool = False) -> st.StructType:
    """The DataFrame schema of a read: ``schema``'s columns, then the metadata columns,
    then (a changelog read) the change columns."""
    fields = [_spark_field(f, f.name) for f in schema.fields]
    fields += [st.StructField(name, METADATA_TYPES[name], nullable=name in NULLABLE_METADATA)
               for name in metadata_columns]
    if changelog:
        fields += [st.StructField(name, kind, nullable=False)
                   for name, kind in CHANGE_TYPES.items()]
    return st.StructType(fields)
