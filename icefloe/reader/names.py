"""The column names a user typed, bound by field id: they name the same columns after a rename.

A read's options name columns in ``columns``, ``filter``, ``identifierColumns`` and
``watermarkColumn``. A stream reads in one schema at a time and switches schemas
(``onSchemaChange=evolve``); a restart may find its checkpoint's schema renamed a column
since the options were written. So the names are resolved once, to field ids, when a
stream (re)starts (:meth:`TypedNames.resolve`), and every schema the stream reads in gets
them under its own names (:meth:`TypedNames.columns_in`, :meth:`TypedNames.renames_in`):
the filter's references are renamed (:func:`rename_references`) before it is bound, as
the projection already follows its columns by field id.

**Which column a name means.** The column that has the name in the stream's schema at
the (re)start; a name no column has there is looked up in the table's other schemas, the
current one first, then the newest first, and means that column if the stream's schema
still has its field id (a column renamed since the options were typed). A name found
nowhere stays unresolved: the read context reports it as today. So the names a stream
was started with keep working after a rename, in the run and after a restart from a
checkpoint taken before or after it; the new names work too.

Pure functions of PyIceberg values; runs where the enumerator runs (the coordinator's
thread, the Spark driver), except :func:`rename_references`, which the read context runs
on workers too. Every value here pickles.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundPredicate,
    LiteralPredicate,
    Not,
    Or,
    Reference,
    SetPredicate,
    UnaryPredicate,
    UnboundPredicate,
)
from pyiceberg.expressions.parser import parse as parse_filter
from pyiceberg.expressions.visitors import BooleanExpressionVisitor, visit
from pyiceberg.schema import Schema

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

    from icefloe.options import SourceOptions


class _References(BooleanExpressionVisitor[list[str]]):
    """The column names of an unbound expression, in order of appearance."""

    def visit_true(self) -> list[str]:
        return []

    def visit_false(self) -> list[str]:
        return []

    def visit_not(self, child_result: list[str]) -> list[str]:
        return child_result

    def visit_and(self, left_result: list[str], right_result: list[str]) -> list[str]:
        return left_result + right_result

    def visit_or(self, left_result: list[str], right_result: list[str]) -> list[str]:
        return left_result + right_result

    def visit_unbound_predicate(self, predicate: UnboundPredicate) -> list[str]:
        return [predicate.term.name]  # type: ignore[attr-defined]

    def visit_bound_predicate(self, predicate: BoundPredicate) -> list[str]:
        raise TypeError(f"expected an unbound predicate, got {predicate}")


class _Renamer(BooleanExpressionVisitor[BooleanExpression]):
    """An unbound expression with its column references renamed (others as they are)."""

    def __init__(self, renames: Mapping[str, str]) -> None:
        self.renames = renames

    def visit_true(self) -> BooleanExpression:
        return AlwaysTrue()

    def visit_false(self) -> BooleanExpression:
        return AlwaysFalse()

    def visit_not(self, child_result: BooleanExpression) -> BooleanExpression:
        return Not(child_result)

    def visit_and(self, left_result: BooleanExpression,
                  right_result: BooleanExpression) -> BooleanExpression:
        return And(left_result, right_result)

    def visit_or(self, left_result: BooleanExpression,
                 right_result: BooleanExpression) -> BooleanExpression:
        return Or(left_result, right_result)

    def visit_unbound_predicate(self, predicate: UnboundPredicate) -> BooleanExpression:
        name = self.renames.get(predicate.term.name)  # type: ignore[attr-defined]
        if name is None:
            return predicate
        term = Reference(name)
        if isinstance(predicate, LiteralPredicate):
            return type(predicate)(term, predicate.literal)
        if isinstance(predicate, SetPredicate):
            return type(predicate)(term, predicate.literals)
        if isinstance(predicate, UnaryPredicate):
            return type(predicate)(term)
        raise TypeError(f"unsupported predicate {predicate}")

    def visit_bound_predicate(self, predicate: BoundPredicate) -> BooleanExpression:
        raise TypeError(f"expected an unbound predicate, got {predicate}")


def filter_references(filter_text: str | None) -> tuple[str, ...]:
    """The column names a filter string refers to, as typed (first mention order)."""
    if not filter_text:
        return ()
    found: list[str] = visit(parse_filter(filter_text), _References())
    return tuple(dict.fromkeys(found))


def rename_references(expr: BooleanExpression, renames: Mapping[str, str]
                      ) -> BooleanExpression:
    """``expr`` (unbound) with each column reference named in ``renames`` renamed."""
    if not renames:
        return expr
    return visit(expr, _Renamer(renames))


def _field_id(schema: Schema, name: str, case_sensitive: bool) -> int | None:
    try:
        return schema.find_field(name, case_sensitive).field_id
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class TypedNames:
    """The column names of a read's options, resolved to field ids (module docstring).

    Attributes:
        field_ids: ``(name as typed, field id)`` of every name that resolved.
        filter_names: the filter's references, as typed.
        case_sensitive: ``caseSensitive``.
    """

    field_ids: tuple[tuple[str, int], ...]
    filter_names: tuple[str, ...] = ()
    case_sensitive: bool = True

    @classmethod
    def resolve(cls, options: SourceOptions, metadata: TableMetadata,
                schema: Schema) -> TypedNames:
        """The names of ``options`` resolved in ``schema`` (the stream's schema at its
        start), a name no column of it has in ``metadata``'s other schemas (current first,
        then newest first) when ``schema`` has the field id found there."""
        case = options.case_sensitive
        filter_names = filter_references(options.filter)
        typed = [*(options.columns or ()), *filter_names, *(options.identifier_columns or ()),
                 *((options.watermark_column,) if options.watermark_column else ())]
        others = sorted((s for s in metadata.schemas if s.schema_id != schema.schema_id),
                        key=lambda s: (s.schema_id != metadata.current_schema_id,
                                       -s.schema_id))
        ids = set(schema.field_ids)
        found: dict[str, int] = {}
        for name in dict.fromkeys(typed):
            field_id = _field_id(schema, name, case)
            if field_id is None:
                field_id = next((i for other in others
                                 if (i := _field_id(other, name, case)) in ids), None)
            if field_id is not None:
                found[name] = field_id
        return cls(tuple(found.items()), filter_names, case)

    def name_in(self, name: str, schema: Schema) -> str | None:
        """The full name in ``schema`` of the column ``name`` (as typed) means: ``name``
        itself when it never resolved, None when ``schema`` has no such field (dropped)."""
        field_id = dict(self.field_ids).get(name)
        if field_id is None:
            return name
        return schema.find_column_name(field_id)

    def columns_in(self, columns: Iterable[str] | None, schema: Schema
                   ) -> tuple[str, ...] | None:
        """``columns`` (as typed) named as in ``schema``; columns it dropped left out
        (None stays None: every column)."""
        if columns is None:
            return None
        out = (self.name_in(name, schema) for name in columns)
        return tuple(n for n in out if n is not None)

    def renames_in(self, schema: Schema) -> tuple[tuple[str, str], ...]:
        """``(as typed, name in schema)`` of the filter's references named otherwise in
        ``schema`` (empty when none is)."""
        out = []
        for name in self.filter_names:
            now = self.name_in(name, schema)
            if now is not None and now != name:
                out.append((name, now))
        return tuple(out)

    def gone_in(self, schema: Schema, names: Iterable[str]) -> tuple[str, ...]:
        """Those of ``names`` (as typed) that resolved but whose field ``schema`` lacks."""
        return tuple(n for n in names if self.name_in(n, schema) is None)

    def unresolved(self, names: Iterable[str]) -> tuple[str, ...]:
        """Those of ``names`` (as typed) that no column of the schemas resolved."""
        known = dict(self.field_ids)
        return tuple(n for n in names if n not in known)
