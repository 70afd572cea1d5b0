"""Ray Data predicates -> PyIceberg filter strings (for predicate pushdown).

Runs on the driver, inside Ray's optimizer. A Ray ``Expr`` made of column references,
literals, comparisons, ``&`` / ``|`` / ``~``, ``is_null`` / ``is_not_null`` and
``is_in`` / ``not_in`` becomes the text of a PyIceberg row filter (the ``filter``
option's grammar), so it prunes files at planning and is applied per row by the reader.
Anything else (arithmetic, UDFs, literals of other types) is not converted: the
caller keeps Ray's own Filter above the read.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from ray.data.expressions import (
    AliasExpr,
    BinaryExpr,
    ColumnExpr,
    Expr,
    LiteralExpr,
    Operation,
    UnaryExpr,
)

_COMPARISONS = {
    Operation.EQ: "=",
    Operation.NE: "!=",
    Operation.LT: "<",
    Operation.LE: "<=",
    Operation.GT: ">",
    Operation.GE: ">=",
}
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class NotConvertible(Exception):
    """The expression has a part PyIceberg's filter grammar cannot say."""


def _name(expr: Expr) -> str:
    if isinstance(expr, AliasExpr):
        return _name(expr.expr)
    if not isinstance(expr, ColumnExpr):
        raise NotConvertible(f"not a column: {expr!r}")
    return '"' + expr.name.replace('"', '""') + '"' if not expr.name.isidentifier() \
        else expr.name


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotConvertible(f"non-finite float {value}")
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime | dt.date):
        return "'" + value.isoformat() + "'"
    raise NotConvertible(f"literal of type {type(value).__name__}")


def _is_column(expr: Expr) -> bool:
    return isinstance(expr, ColumnExpr) or (
        isinstance(expr, AliasExpr) and _is_column(expr.expr))


def _convert(expr: Expr) -> str:
    if isinstance(expr, AliasExpr):
        return _convert(expr.expr)
    if isinstance(expr, BinaryExpr):
        op = expr.op
        if op in (Operation.AND, Operation.OR):
            word = "and" if op is Operation.AND else "or"
            return f"({_convert(expr.left)} {word} {_convert(expr.right)})"
        if op in (Operation.IN, Operation.NOT_IN):
            if not isinstance(expr.right, LiteralExpr):
                raise NotConvertible("IN needs a literal list")
            values = list(expr.right.value)
            if not values:
                raise NotConvertible("empty IN list")
            word = "in" if op is Operation.IN else "not in"
            return f"{_name(expr.left)} {word} ({', '.join(_literal(v) for v in values)})"
        if op in _COMPARISONS:
            sign = _COMPARISONS[op]
            if _is_column(expr.left) and isinstance(expr.right, LiteralExpr):
                column, value = expr.left, expr.right.value
            elif _is_column(expr.right) and isinstance(expr.left, LiteralExpr):
                column, value, sign = expr.right, expr.left.value, _FLIPPED[sign]
            else:
                raise NotConvertible("a comparison needs a column and a literal")
            if value is None:
                raise NotConvertible("comparison with None")
            return f"{_name(column)} {sign} {_literal(value)}"
        raise NotConvertible(f"operation {op}")
    if isinstance(expr, UnaryExpr):
        if expr.op is Operation.NOT:
            return f"not ({_convert(expr.operand)})"
        if expr.op is Operation.IS_NULL:
            return f"{_name(expr.operand)} is null"
        if expr.op is Operation.IS_NOT_NULL:
            return f"{_name(expr.operand)} is not null"
        raise NotConvertible(f"operation {expr.op}")
    raise NotConvertible(f"expression {type(expr).__name__}")


def to_filter_string(expr: Expr) -> str | None:
    """The PyIceberg filter text equivalent to ``expr``, or None when it has no equivalent."""
    try:
        return _convert(expr)
    except NotConvertible:
        return None


def and_filters(first: str | None, second: str | None) -> str | None:
    """``first AND second`` (either may be None: no filter)."""
    if not first:
        return second
    if not second:
        return first
    return f"({first}) and ({second})"
