"""A table of nested collections holding NULL and empty values at every level, and its oracle.

Written with :func:`tests.helpers.raw_files.append_raw` (PyArrow's own Parquet writer: PyIceberg's
writer would turn a NULL list of structs into an empty one), in six small files: three in
the first schema, then a field is added to the struct inside ``items``, to the value struct
of ``attrs`` and to ``nested.inner``, and three more files are written in the new schema.

The oracle (:func:`expected_rows`) reads every data file with ``pyarrow.parquet`` and applies
the one rule of the spec that matters here: a field a file lacks reads as null inside every
non-null struct (a NULL struct, list or map stays NULL; an empty one stays empty).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import (
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)

from tests.helpers.raw_files import append_raw
from tests.helpers.tables import live_data_files

NESTED_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "items", ListType(10, StructType(
        NestedField(11, "a", IntegerType(), required=False),
        NestedField(12, "b", StringType(), required=False)), element_required=False),
        required=False),
    NestedField(3, "attrs", MapType(20, StringType(), 21, StructType(
        NestedField(22, "x", IntegerType(), required=False)), value_required=False),
        required=False),
    NestedField(4, "nested", StructType(
        NestedField(30, "tags", ListType(31, StructType(
            NestedField(32, "t", StringType(), required=False)), element_required=False),
            required=False),
        NestedField(33, "inner", StructType(
            NestedField(34, "v", IntegerType(), required=False)), required=False)),
        required=False),
    NestedField(5, "lol", ListType(40, ListType(41, StructType(
        NestedField(42, "q", IntegerType(), required=False)), element_required=False),
        element_required=False), required=False),
    NestedField(6, "mol", MapType(50, StringType(), 51, ListType(52, StructType(
        NestedField(53, "r", IntegerType(), required=False)), element_required=False),
        value_required=False), required=False),
)


def _rows(start: int, evolved: bool) -> list[dict[str, Any]]:
    """Seven rows: all NULL, all empty, and non-empty ones with NULL elements and fields."""
    def item(a: int | None) -> dict[str, Any]:
        out: dict[str, Any] = {"a": a, "b": None if a is None else f"b{a}"}
        if evolved:
            out["c"] = f"c{a}"
        return out

    def attr(x: int | None) -> dict[str, Any]:
        return {"x": x, "y": x} if evolved else {"x": x}

    def inner(v: int | None) -> dict[str, Any]:
        return {"v": v, "w": "w"} if evolved else {"v": v}

    i = start
    return [
        dict(id=i, items=None, attrs=None, nested=None, lol=None, mol=None),
        dict(id=i + 1, items=[], attrs=[], nested={"tags": None, "inner": None}, lol=[], mol=[]),
        dict(id=i + 2, items=[None, item(1)], attrs=[("k", None), ("j", attr(2))],
             nested={"tags": [], "inner": inner(None)}, lol=[None, [], [None, {"q": 3}]],
             mol=[("m", None), ("n", []), ("o", [None, {"r": 1}])]),
        dict(id=i + 3, items=None, attrs=[], nested={"tags": [None], "inner": None},
             lol=[None], mol=None),
        dict(id=i + 4, items=[item(None)], attrs=None, nested={"tags": None, "inner": inner(4)},
             lol=[[]], mol=[("z", None)]),
        dict(id=i + 5, items=[], attrs=[("k", attr(None))], nested=None,
             lol=[[{"q": None}]], mol=[("e", [])]),
        dict(id=i + 6, items=None, attrs=None, nested={"tags": [{"t": None}], "inner": None},
             lol=None, mol=[]),
    ]


def make_nested_table(catalog: Catalog, identifier: str = "db.nested") -> Table:
    """The table described in the module docstring (namespace created when missing)."""
    catalog.create_namespace_if_not_exists(identifier.split(".")[0])
    table = catalog.create_table(identifier, NESTED_SCHEMA)
    for n in range(3):
        append_raw(table, _rows(100 * n, evolved=False))
    with table.update_schema() as update:
        update.add_column(("items", "element", "c"), StringType())
        update.add_column(("attrs", "value", "y"), IntegerType())
        update.add_column(("nested", "inner", "w"), StringType())
    for n in range(3, 6):
        append_raw(table, _rows(100 * n, evolved=True))
    return table


def _conform(value: Any, field_type: IcebergType) -> Any:
    """``value`` as read from a file, with the fields of ``field_type`` it lacks set to null."""
    if value is None:
        return None
    if isinstance(field_type, StructType):
        return {f.name: _conform(value.get(f.name), f.field_type) for f in field_type.fields}
    if isinstance(field_type, ListType):
        return [_conform(v, field_type.element_type) for v in value]
    if isinstance(field_type, MapType):
        return [(k, _conform(v, field_type.value_type)) for k, v in value]
    return value


def expected_rows(table: Table) -> pa.Table:
    """The table's rows in its current schema, from ``pyarrow.parquet`` reads of its files."""
    schema = table.schema()
    out: list[dict[str, Any]] = []
    for path in live_data_files(table):
        with table.io.new_input(path).open() as stream:
            raw = pq.read_table(stream).to_pylist()
        out.extend({f.name: _conform(row.get(f.name), f.field_type) for f in schema.fields}
                   for row in raw)
    return pa.Table.from_pylist(out, schema=schema_to_pyarrow(schema, include_field_ids=False))


def null_rows(table: pa.Table, column: str) -> list[int]:
    """Ids of the rows whose ``column`` is NULL."""
    return sorted(r["id"] for r in table.select(["id", column]).to_pylist() if r[column] is None)
