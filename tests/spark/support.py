"""Helpers of the Spark suite: reading through icefloe, and comparing with PyIceberg."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyspark.sql import DataFrame, SparkSession

import icefloe.spark
from tests.conftest import sorted_rows


def read(spark: SparkSession, catalog: Catalog, table: str = "db.events",
         **options: Any) -> DataFrame:
    """``spark.read.format("icefloe")`` on ``table`` of the test catalog."""
    return icefloe.spark.read(spark, table, catalog=catalog, options=options)


def normalized(table: pa.Table) -> pa.Table:
    """``table`` with large / extension types replaced by Spark's Arrow layout (for comparing
    PyIceberg's output with Spark's)."""
    from icefloe.spark.arrow import converter

    fields, arrays = [], []
    for field, column in zip(table.schema, table.columns, strict=True):
        target = _spark_layout(field.type)
        convert = converter(field.type, target)
        arrays.append(pa.chunked_array([convert(c) for c in column.chunks], type=target))
        fields.append(pa.field(field.name, target))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _spark_layout(data_type: pa.DataType) -> pa.DataType:
    if isinstance(data_type, pa.UuidType) or pa.types.is_large_string(data_type):
        return pa.string()
    if pa.types.is_large_binary(data_type) or pa.types.is_fixed_size_binary(data_type):
        return pa.binary()
    if pa.types.is_time64(data_type):
        return pa.time64("ns")
    if pa.types.is_large_list(data_type) or pa.types.is_list(data_type):
        value = data_type.value_field
        return pa.list_(value.with_type(_spark_layout(value.type)))
    if pa.types.is_map(data_type):
        return pa.map_(data_type.key_field.with_type(_spark_layout(data_type.key_type)),
                       data_type.item_field.with_type(_spark_layout(data_type.item_type)))
    if pa.types.is_struct(data_type):
        return pa.struct([f.with_type(_spark_layout(f.type)) for f in data_type])
    return data_type


def assert_same_rows(df: DataFrame, expected: pa.Table) -> None:
    """Same column names (in order) and the same multiset of rows as the PyIceberg oracle.

    Rows are compared as Arrow (``toArrow``: exact values, no local-time conversion).
    """
    actual = df.toArrow()
    expected = normalized(expected)
    assert actual.schema.names == expected.schema.names
    assert sorted_rows(actual) == sorted_rows(expected)
