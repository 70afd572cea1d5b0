"""Schema mapping and batch conforming to Spark's Arrow layout (no JVM)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DecimalType,
    FixedType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzNanoType,
    UUIDType,
)
from pyspark.sql import types as st
from pyspark.sql.pandas.types import to_arrow_schema

from icefloe.spark.arrow import BatchConformer, uuid_strings
from icefloe.spark.types import spark_schema

pytestmark = pytest.mark.spark

UUIDS = [uuid.UUID(int=i * 0x1F2E3D4C5B6A79881726354453627180) for i in range(1, 6)]


def test_uuid_strings_handles_nulls_and_slices() -> None:
    values = [u.bytes for u in UUIDS]
    values[2] = None  # type: ignore[call-overload]
    array = pa.ExtensionArray.from_storage(pa.uuid(), pa.array(values, pa.binary(16)))
    expected = [str(u) if i != 2 else None for i, u in enumerate(UUIDS)]
    assert uuid_strings(array).to_pylist() == expected
    assert uuid_strings(array.slice(1, 3)).to_pylist() == expected[1:4]
    assert uuid_strings(array.slice(0, 0)).to_pylist() == []


def test_conformer_matches_to_arrow_schema_for_nested_uuids() -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "s", StructType(NestedField(3, "u", UUIDType()),
                                       NestedField(4, "name", StringType(), required=True))),
        NestedField(5, "m", MapType(6, StringType(), 7, UUIDType())),
        NestedField(8, "fx", FixedType(3)),
        NestedField(9, "dec", DecimalType(38, 10)),
        NestedField(10, "tsn", TimestamptzNanoType()),
        NestedField(11, "l", ListType(12, UUIDType(), element_required=False)),
    )
    source = schema_to_pyarrow(schema, include_field_ids=False)
    u1, u2 = UUIDS[0], UUIDS[1]
    storage = {
        "id": [1, 2],
        "s": [{"u": u1.bytes, "name": "a"}, None],
        "m": [[("k", u2.bytes)], None],
        "fx": [b"abc", None],
        "dec": [None, None],
        "tsn": [1_700_000_000_123_456_789, None],
        "l": [[u1.bytes, None], []],
    }
    batch = _batch(source, storage)
    target = to_arrow_schema(spark_schema(schema), timezone="UTC")

    out = BatchConformer(source, target)(batch.slice(0, 2))

    assert out.schema.equals(target)
    first = out.to_pylist()[0]
    assert first["s"] == {"u": str(u1), "name": "a"}
    assert first["m"] == [("k", str(u2))] and first["l"] == [str(u1), None]
    assert first["fx"] == b"abc"
    assert first["tsn"].microsecond == 123456  # nanoseconds truncated
    assert out.to_pylist()[1]["s"] is None and out.to_pylist()[1]["m"] is None


def _batch(schema: pa.Schema, columns: dict[str, list[object]]) -> pa.RecordBatch:
    """Build a batch with uuid extension types anywhere: fill storage, then swap types."""
    storage_schema = pa.schema([f.with_type(_storage(f.type)) for f in schema])
    plain = pa.RecordBatch.from_pydict(columns, schema=storage_schema)
    arrays = [a.view(f.type) if not isinstance(f.type, pa.UuidType)
              else pa.ExtensionArray.from_storage(f.type, a)
              for a, f in zip(plain.columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _storage(data_type: pa.DataType) -> pa.DataType:
    if isinstance(data_type, pa.UuidType):
        return pa.binary(16)
    if pa.types.is_struct(data_type):
        return pa.struct([f.with_type(_storage(f.type)) for f in data_type])
    if pa.types.is_map(data_type):
        return pa.map_(data_type.key_field.with_type(_storage(data_type.key_type)),
                       data_type.item_field.with_type(_storage(data_type.item_type)))
    if pa.types.is_large_list(data_type):
        return pa.large_list(data_type.value_field.with_type(_storage(data_type.value_type)))
    return data_type


def test_spark_schema_appends_metadata_columns() -> None:
    schema = Schema(NestedField(1, "id", LongType(), required=True))
    assert spark_schema(schema, ("_file", "_pos")) == st.StructType([
        st.StructField("id", st.LongType(), False),
        st.StructField("_file", st.StringType(), False),
        st.StructField("_pos", st.LongType(), False),
    ])
