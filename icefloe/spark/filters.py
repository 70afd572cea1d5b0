"""Spark pushed filters -> PyIceberg row-filter text. Runs on the driver.

A pushed filter is never re-applied by Spark, so a filter is pushed only when icefloe's
evaluation (partition / metrics pruning, then PyIceberg's residual per row) returns
exactly the rows Spark's would. Everything else stays with Spark:

- only top-level columns of the read schema (never metadata columns or nested fields);
- comparisons, ``IN`` and ``LIKE 'x%'`` only on boolean, int, long, decimal, string,
  date, timestamp and timestamptz columns, with a literal of the column's kind
  (float / double are left to Spark: its NaN ordering differs from Arrow's);
- ``IS [NOT] NULL`` on any top-level primitive column;
- ``NOT`` of the above, written null-rejecting (Spark drops rows where the filter is
  null; Arrow's ``NOT IN`` would keep them): ``NOT (a IN (1))`` -> ``a IS NOT NULL AND
  a NOT IN (1)``;
- strings with a quote-free, backslash-free, line-break-free value (and no ``%`` for
  ``LIKE``), decimals exactly representable at the column's scale.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterable, Sequence
from typing import Any

from pyiceberg import types as it
from pyiceberg.schema import Schema
from pyspark.sql import datasource as ds

_COMPARISONS: dict[type[ds.Filter], str] = {
    ds.EqualTo: "=",
    ds.GreaterThan: ">",
    ds.GreaterThanOrEqual: ">=",
    ds.LessThan: "<",
    ds.LessThanOrEqual: "<=",
}
_NEGATED: dict[str, str] = {"=": "!=", ">": "<=", ">=": "<", "<": ">=", "<=": ">"}
_COMPARABLE = (it.BooleanType, it.IntegerType, it.LongType, it.DecimalType, it.StringType,
               it.DateType, it.TimestampType, it.TimestamptzType)


def _quote_column(name: str) -> str | None:
    """``"name"``, or None for names PyIceberg's parser cannot quote."""
    if not name or any(c in name for c in '".\\\n\r'):
        return None
    return f'"{name}"'


def _literal(value: Any, field_type: it.IcebergType) -> str | None:
    """The filter-text literal of ``value`` for a column of ``field_type``, or None."""
    if isinstance(field_type, it.BooleanType):
        return ("true" if value else "false") if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if isinstance(field_type, it.IntegerType | it.LongType):
        return str(value) if isinstance(value, int) else None
    if isinstance(field_type, it.DecimalType):
        if not isinstance(value, int | decimal.Decimal):
            return None
        exact = decimal.Decimal(value)
        try:
            scaled = exact.quantize(decimal.Decimal(1).scaleb(-field_type.scale))
        except decimal.InvalidOperation:
            return None
        return format(scaled, "f") if scaled == exact and scaled.is_finite() else None
    if isinstance(field_type, it.StringType):
        if not isinstance(value, str) or any(c in value for c in "'\\\n\r"):
            return None
        return f"'{value}'"
    if isinstance(field_type, it.DateType):
        ok = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
        return f"'{value.isoformat()}'" if ok else None
    if isinstance(field_type, it.TimestampType):
        ok = isinstance(value, dt.datetime) and value.tzinfo is None
        return f"'{value.isoformat()}'" if ok else None
    if isinstance(field_type, it.TimestamptzType):
        if not isinstance(value, dt.datetime) or value.tzinfo is None:
            return None
        return f"'{value.astimezone(dt.UTC).isoformat()}'"
    return None


def _leaf(spark_filter: ds.Filter, fields: dict[str, it.IcebergType],
          negated: bool) -> str | None:
    attribute: Sequence[str] = getattr(spark_filter, "attribute", ())
    if len(attribute) != 1 or attribute[0] not in fields:
        return None
    column = _quote_column(attribute[0])
    field_type = fields[attribute[0]]
    if column is None or not isinstance(field_type, it.PrimitiveType):
        return None
    if isinstance(spark_filter, ds.IsNull | ds.IsNotNull):
        is_null = isinstance(spark_filter, ds.IsNull) != negated
        return f"{column} IS NULL" if is_null else f"{column} IS NOT NULL"
    if not isinstance(field_type, _COMPARABLE):
        return None
    value = getattr(spark_filter, "value", None)
    if isinstance(spark_filter, ds.EqualNullSafe):
        if value is None:
            return f"{column} IS NOT NULL" if negated else f"{column} IS NULL"
        literal = _literal(value, field_type)
        if literal is None:
            return None
        return f"({column} IS NULL OR {column} != {literal})" if negated \
            else f"{column} = {literal}"
    if type(spark_filter) in _COMPARISONS:
        literal = _literal(value, field_type)
        if literal is None:
            return None
        op = _COMPARISONS[type(spark_filter)]
        return f"{column} IS NOT NULL AND {column} {_NEGATED[op]} {literal}" if negated \
            else f"{column} {op} {literal}"
    if isinstance(spark_filter, ds.In):
        values = list(value or ())
        if not values or any(v is None for v in values):
            return None  # Spark's three-valued IN with a NULL member: leave it to Spark
        literals = [_literal(v, field_type) for v in values]
        if any(lit is None for lit in literals):
            return None
        joined = ", ".join(sorted(set(literals)))  # type: ignore[arg-type]
        return f"{column} IS NOT NULL AND {column} NOT IN ({joined})" if negated \
            else f"{column} IN ({joined})"
    if isinstance(spark_filter, ds.StringStartsWith) and isinstance(field_type, it.StringType):
        if not isinstance(value, str) or not value or "%" in value:
            return None
        literal = _literal(value, field_type)
        if literal is None:
            return None
        pattern = literal[:-1] + "%'"
        return f"{column} IS NOT NULL AND {column} NOT LIKE {pattern}" if negated \
            else f"{column} LIKE {pattern}"
    return None


def to_iceberg(spark_filter: ds.Filter, schema: Schema) -> str | None:
    """The PyIceberg filter text equivalent to ``spark_filter`` on ``schema``, or None.

    None means "cannot be pushed exactly": the filter must stay with Spark.
    """
    fields = {f.name: f.field_type for f in schema.fields}
    negated = isinstance(spark_filter, ds.Not)
    leaf = spark_filter.child if isinstance(spark_filter, ds.Not) else spark_filter
    if isinstance(leaf, ds.Not):
        return None
    return _leaf(leaf, fields, negated)


def split_filters(filters: Iterable[ds.Filter],
                  schema: Schema) -> tuple[list[str], list[ds.Filter]]:
    """Partition Spark's filters into (pushed filter texts, filters left to Spark).

    The second list holds the input objects themselves (PySpark matches them by identity).
    """
    pushed: list[str] = []
    kept: list[ds.Filter] = []
    for spark_filter in filters:
        text = to_iceberg(spark_filter, schema)
        if text is None:
            kept.append(spark_filter)
        else:
            pushed.append(text)
    return pushed, kept


def combine(user_filter: str | None, pushed: Sequence[str]) -> str | None:
    """``user_filter AND pushed[0] AND ...`` (each parenthesised), or None when empty."""
    parts = ([user_filter] if user_filter else []) + list(pushed)
    if not parts:
        return None
    return " AND ".join(f"({part})" for part in parts)
