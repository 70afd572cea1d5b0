"""Schema changes between two appends, made with PyIceberg, and the oracle of each snapshot.

The table (``db.sc``): ``id long, name string, score float, n int, info struct<a int,
b string>, old string``. :data:`CHANGES` names each kind of change of the issue (add,
rename top-level and nested, drop, re-add a dropped name, int -> long, float -> double,
reorder, partition spec change); :func:`append_in_current_schema` writes rows in whatever
the table's schema is now; :func:`added_rows` is PyIceberg's own read of the files one
snapshot added, projected onto a given schema (by field id): the oracle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import (
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "score", FloatType(), required=False),
    NestedField(4, "n", IntegerType(), required=False),
    NestedField(5, "info", StructType(
        NestedField(6, "a", IntegerType(), required=False),
        NestedField(7, "b", StringType(), required=False)), required=False),
    NestedField(8, "old", StringType(), required=False),
)


def _add(t: Table) -> None:
    with t.update_schema() as u:
        u.add_column("extra", StringType())


def _rename(t: Table) -> None:
    with t.update_schema() as u:
        u.rename_column("name", "label")


def _rename_nested(t: Table) -> None:
    with t.update_schema() as u:
        u.rename_column("info.a", "alpha")


def _drop(t: Table) -> None:
    with t.update_schema() as u:
        u.delete_column("old")


def _readd(t: Table) -> None:
    _drop(t)
    with t.refresh().update_schema() as u:
        u.add_column("old", StringType())


def _int_long(t: Table) -> None:
    with t.update_schema() as u:
        u.update_column("n", LongType())


def _float_double(t: Table) -> None:
    with t.update_schema() as u:
        u.update_column("score", DoubleType())


def _reorder(t: Table) -> None:
    with t.update_schema() as u:
        u.move_first("score")


def _spec(t: Table) -> None:
    with t.update_spec() as s:  # PyIceberg writes bucket partitions only with pyiceberg-core
        s.add_identity("name")


CHANGES: dict[str, Callable[[Table], None]] = {
    "add": _add, "rename": _rename, "rename_nested": _rename_nested, "drop": _drop,
    "readd": _readd, "int_long": _int_long, "float_double": _float_double,
    "reorder": _reorder, "spec": _spec,
}
"""Kind of change -> the PyIceberg commit(s) making it (schema-only or spec-only)."""

KIND_OF: dict[str, str | None] = {
    "add": "added", "rename": "renamed", "rename_nested": "renamed", "drop": "dropped",
    "readd": "dropped", "int_long": "widened", "float_double": "widened",
    "reorder": "reordered", "spec": None,
}
"""Kind of change -> the :class:`SchemaChange` field it fills (None: no schema change)."""

CHANGED: dict[str, dict[str, tuple[Any, ...]]] = {
    "add": {"added": ("extra",)},
    "rename": {"renamed": (("name", "label"),)},
    "rename_nested": {"renamed": (("info.a", "info.alpha"),)},
    "drop": {"dropped": ("old",)},
    "readd": {"dropped": ("old",), "added": ("old",)},  # another field id: a drop and an add
    "int_long": {"widened": (("n", "int", "long"),)},
    "float_double": {"widened": (("score", "float", "double"),)},
    "reorder": {"reordered": ("",)},
}
"""Kind of change -> exactly what its :class:`SchemaChange` says changed (every other field
empty), from the commits above."""

CHANGE_FIELDS = ("added", "dropped", "renamed", "widened", "made_optional", "reordered")
"""The fields of a :class:`SchemaChange` that say what changed."""


def what_changed(change: Any) -> dict[str, tuple[Any, ...]]:
    """The non-empty :data:`CHANGE_FIELDS` of ``change``, as :data:`CHANGED` writes them."""
    return {name: getattr(change, name) for name in CHANGE_FIELDS if getattr(change, name)}


def make_sc_table(catalog: Catalog, identifier: str = "db.sc") -> Table:
    catalog.create_namespace_if_not_exists(identifier.rsplit(".", 1)[0])
    return catalog.create_table(identifier, SCHEMA, properties={"format-version": "2"})


def _value(name: str, i: int) -> Any:
    if name in ("id",):
        return i
    if name in ("name", "label"):
        return f"n{i}"
    if name == "score":
        return i / 2
    if name == "n":
        return i * 3
    if name in ("a", "alpha"):
        return i + 1
    if name == "b":
        return f"b{i}"
    if name == "old":
        return f"o{i}"
    if name == "extra":
        return f"x{i}"
    raise KeyError(name)


def _row(schema: Schema, i: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in schema.fields:
        if isinstance(f.field_type, StructType):
            out[f.name] = {c.name: _value(c.name, i) for c in f.field_type.fields}
        else:
            out[f.name] = _value(f.name, i)
    return out


def append_in_current_schema(table: Table, ids: range) -> int:
    """Append rows ``ids`` in the table's schema of now; returns the new snapshot id."""
    table = table.refresh()
    schema = table.schema()
    data = pa.Table.from_pylist([_row(schema, i) for i in ids],
                                schema=schema_to_pyarrow(schema, include_field_ids=False))
    table.append(data)
    snapshot = table.refresh().current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def added_rows(table: Table, snapshot_id: int, schema: Schema) -> list[dict[str, Any]]:
    """PyIceberg's read of the data files ``snapshot_id`` added, projected onto ``schema``
    (by field id), as rows sorted by id."""
    table = table.refresh()
    snapshot = table.snapshot_by_id(snapshot_id)
    assert snapshot is not None
    parent = snapshot.parent_snapshot_id
    before = {t.file.file_path for t in table.scan(snapshot_id=parent).plan_files()} \
        if parent is not None else set()
    tasks = [t for t in table.scan(snapshot_id=snapshot_id).plan_files()
             if t.file.file_path not in before]
    data = ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table(tasks)
    return sorted(data.to_pylist(), key=lambda r: r["id"])


def snapshot_schema(table: Table, snapshot_id: int) -> Schema:
    """The schema ``snapshot_id`` was committed under."""
    table = table.refresh()
    snapshot = table.snapshot_by_id(snapshot_id)
    assert snapshot is not None and snapshot.schema_id is not None
    schema = table.metadata.schema_by_id(snapshot.schema_id)
    assert schema is not None
    return schema
