"""Spark filter -> PyIceberg filter text: what is pushed, what stays with Spark (no JVM)."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from pyiceberg.expressions.parser import parse
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)
from pyspark.sql import datasource as ds

from icefloe.spark.filters import combine, split_filters, to_iceberg

pytestmark = pytest.mark.spark

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "kind", StringType()),
    NestedField(3, "n", IntegerType()),
    NestedField(4, "flag", BooleanType()),
    NestedField(5, "amount", DecimalType(10, 2)),
    NestedField(6, "day", DateType()),
    NestedField(7, "ts", TimestampType()),
    NestedField(8, "tstz", TimestamptzType()),
    NestedField(9, "value", DoubleType()),
    NestedField(10, "u", UUIDType()),
    NestedField(11, "raw", BinaryType()),
    NestedField(12, "point", StructType(NestedField(13, "x", LongType()))),
    NestedField(14, "tags", ListType(15, StringType())),
    NestedField(16, "and", LongType()),
)

PUSHED = [
    (ds.EqualTo(("id",), 5), '"id" = 5'),
    (ds.GreaterThan(("n",), -3), '"n" > -3'),
    (ds.LessThanOrEqual(("kind",), "b"), "\"kind\" <= 'b'"),
    (ds.EqualTo(("flag",), True), '"flag" = true'),
    (ds.EqualTo(("amount",), decimal.Decimal("1.50")), '"amount" = 1.50'),
    (ds.GreaterThanOrEqual(("amount",), 3), '"amount" >= 3.00'),
    (ds.EqualTo(("day",), dt.date(2024, 1, 2)), "\"day\" = '2024-01-02'"),
    (ds.LessThan(("ts",), dt.datetime(2024, 1, 2, 3, 4, 5, 6)),
     "\"ts\" < '2024-01-02T03:04:05.000006'"),
    (ds.GreaterThan(("tstz",), dt.datetime(2024, 1, 2, 3, tzinfo=dt.UTC)),
     "\"tstz\" > '2024-01-02T03:00:00+00:00'"),
    (ds.In(("id",), [3, 1, 2]), '"id" IN (1, 2, 3)'),
    (ds.In(("kind",), ["x", "y"]), "\"kind\" IN ('x', 'y')"),
    (ds.IsNull(("value",)), '"value" IS NULL'),
    (ds.IsNotNull(("u",)), '"u" IS NOT NULL'),
    (ds.StringStartsWith(("kind",), "ab_"), "\"kind\" LIKE 'ab_%'"),
    (ds.EqualNullSafe(("kind",), None), '"kind" IS NULL'),
    (ds.EqualNullSafe(("id",), 4), '"id" = 4'),
    (ds.EqualTo(("and",), 1), '"and" = 1'),
    # negations reject nulls, as Spark does
    (ds.Not(ds.EqualTo(("id",), 5)), '"id" IS NOT NULL AND "id" != 5'),
    (ds.Not(ds.In(("kind",), ["a"])), "\"kind\" IS NOT NULL AND \"kind\" NOT IN ('a')"),
    (ds.Not(ds.StringStartsWith(("kind",), "a")),
     "\"kind\" IS NOT NULL AND \"kind\" NOT LIKE 'a%'"),
    (ds.Not(ds.GreaterThan(("n",), 1)), '"n" IS NOT NULL AND "n" <= 1'),
    (ds.Not(ds.IsNull(("kind",))), '"kind" IS NOT NULL'),
    (ds.Not(ds.EqualNullSafe(("n",), 2)), '("n" IS NULL OR "n" != 2)'),
]

KEPT = [
    ds.GreaterThan(("value",), 1.0),  # NaN ordering differs between Spark and Arrow
    ds.EqualTo(("value",), 1.0),
    ds.EqualTo(("u",), "12345678-1234-5678-1234-567812345678"),
    ds.EqualTo(("raw",), b"x"),
    ds.EqualTo(("point", "x"), 1),  # nested field
    ds.IsNull(("point",)),  # not a primitive column
    ds.IsNull(("_pos",)),  # metadata column
    ds.EqualTo(("kind",), "it's"),  # quote
    ds.EqualTo(("kind",), "a\\b"),  # backslash
    ds.StringStartsWith(("kind",), "50%"),
    ds.StringEndsWith(("kind",), "a"),
    ds.StringContains(("kind",), "a"),
    ds.EqualTo(("amount",), decimal.Decimal("1.234")),  # not exact at scale 2
    ds.EqualTo(("id",), "5"),  # literal of another kind
    ds.EqualTo(("n",), True),
    ds.EqualTo(("day",), dt.datetime(2024, 1, 2)),
    ds.EqualTo(("ts",), dt.datetime(2024, 1, 2, tzinfo=dt.UTC)),
    ds.EqualTo(("tstz",), dt.datetime(2024, 1, 2)),
    ds.In(("id",), [1, None]),  # three-valued IN
    ds.In(("id",), []),
    ds.Not(ds.Not(ds.EqualTo(("id",), 1))),
]


@pytest.mark.parametrize(("spark_filter", "text"), PUSHED, ids=[t for _, t in PUSHED])
def test_pushed_filter_text_binds(spark_filter: ds.Filter, text: str) -> None:
    assert to_iceberg(spark_filter, SCHEMA) == text
    bind(SCHEMA, parse(text), case_sensitive=True)  # valid for PyIceberg, literal types bind


@pytest.mark.parametrize("spark_filter", KEPT, ids=repr)
def test_inexact_filters_stay_with_spark(spark_filter: ds.Filter) -> None:
    assert to_iceberg(spark_filter, SCHEMA) is None


def test_split_returns_the_input_objects_left_to_spark() -> None:
    kept_filter = ds.GreaterThan(("value",), 1.0)
    pushed, kept = split_filters([ds.EqualTo(("id",), 1), kept_filter], SCHEMA)
    assert pushed == ['"id" = 1']
    assert len(kept) == 1 and kept[0] is kept_filter


def test_combine_ands_user_filter_and_pushed() -> None:
    assert combine(None, []) is None
    assert combine("id > 1", []) == "(id > 1)"
    text = combine("kind = 'a' OR id > 1", ['"n" = 2'])
    assert text == "(kind = 'a' OR id > 1) AND (\"n\" = 2)"
    bind(SCHEMA, parse(text), case_sensitive=True)
