"""Iceberg v3 reads: ``timestamp_ns`` / ``timestamptz_ns`` columns, ``initial-default`` values
for fields old files lack, and a fast, typed failure for types icefloe cannot read.

The tables are PyIceberg-written v2 tables registered again as v3 (:mod:`tests.helpers.v3`:
PyIceberg 0.12 cannot write v3 metadata). The nanosecond files are written by PyArrow's own
Parquet writer. Oracles: PyIceberg's scan (right here), and ``pyarrow.parquet`` on the files.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import (
    GeographyType,
    GeometryType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestamptzNanoType,
    UnknownType,
)

from icefloe import CatalogError, IcebergSource, UnsupportedTypeError
from tests.conftest import assert_same_rows
from tests.helpers.raw_files import append_raw
from tests.helpers.tables import live_data_files
from tests.helpers.v3 import as_v3

V2 = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "ts", LongType(), required=False),
    NestedField(3, "tz", LongType(), required=False),
    NestedField(4, "s", StructType(NestedField(5, "a", IntegerType(), required=False)),
                required=False),
)
FILE_SCHEMA = pa.schema([
    pa.field("id", pa.int64(), False, {"PARQUET:field_id": "1"}),
    pa.field("ts", pa.timestamp("ns"), True, {"PARQUET:field_id": "2"}),
    pa.field("tz", pa.timestamp("ns", tz="UTC"), True, {"PARQUET:field_id": "3"}),
    pa.field("s", pa.struct([pa.field("a", pa.int32(), True, {"PARQUET:field_id": "5"})]),
             True, {"PARQUET:field_id": "4"}),
])


def _v3_schema(*extra: NestedField, s_extra: tuple[NestedField, ...] = ()) -> Schema:
    return Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestampNanoType(), required=False),
        NestedField(3, "tz", TimestamptzNanoType(), required=False),
        NestedField(4, "s", StructType(NestedField(5, "a", IntegerType(), required=False),
                                       *s_extra), required=False),
        *extra, schema_id=0)


@pytest.fixture(scope="module")
def v2(module_catalog: SqlCatalog) -> Table:
    module_catalog.create_namespace_if_not_exists("db")
    table = module_catalog.create_table(
        "db.v2", V2, properties={"write.metadata.metrics.default": "none"})
    # nanosecond values a microsecond read would change: 1 ns past a second, the int64 edges
    append_raw(table, [
        {"id": 1, "ts": 1_000_000_001, "tz": 5, "s": {"a": 1}},
        {"id": 2, "ts": None, "tz": None, "s": None},
        {"id": 3, "ts": -1, "tz": 2**62 + 7, "s": {"a": None}},
    ], FILE_SCHEMA)
    append_raw(table, [{"id": 4, "ts": 999, "tz": -999_999_999, "s": {"a": 4}}], FILE_SCHEMA)
    return table


def _file_rows(table: Table) -> pa.Table:
    """The data files' rows as PyArrow reads them (no Iceberg involved)."""
    parts = []
    for path in live_data_files(table):
        with table.io.new_input(path).open() as stream:
            parts.append(pq.read_table(stream))
    return pa.concat_tables(parts)


def test_nanosecond_timestamps_read_exactly(module_catalog: SqlCatalog, v2: Table) -> None:
    table = as_v3(module_catalog, v2, "db.ns", _v3_schema())
    got = IcebergSource("db.ns", catalog=module_catalog).to_arrow()
    assert got.schema.field("ts").type == pa.timestamp("ns")
    assert got.schema.field("tz").type == pa.timestamp("ns", tz="UTC")
    raw = _file_rows(v2).select(["id", "ts", "tz"])
    assert_same_rows(got.select(["id", "ts", "tz"]), raw)
    assert 1_000_000_001 in got.column("ts").cast(pa.int64()).to_pylist()
    assert_same_rows(got, table.scan().to_arrow())


def test_initial_default_fills_fields_old_files_lack(module_catalog: SqlCatalog,
                                                     v2: Table) -> None:
    schema = _v3_schema(
        NestedField(6, "level", IntegerType(), required=False, initial_default=7),
        NestedField(7, "label", StringType(), required=True, initial_default="none"),
        s_extra=(NestedField(8, "b", LongType(), required=False, initial_default=42),))
    table = as_v3(module_catalog, v2, "db.defaults", schema)
    got = IcebergSource("db.defaults", catalog=module_catalog).to_arrow()
    assert got.column("level").to_pylist() == [7] * 4
    assert got.column("label").to_pylist() == ["none"] * 4
    # inside a struct: the default where the struct is there, NULL where the struct is NULL
    by_id = {r["id"]: r["s"] for r in got.select(["id", "s"]).to_pylist()}
    assert by_id == {1: {"a": 1, "b": 42}, 2: None, 3: {"a": None, "b": 42}, 4: {"a": 4, "b": 42}}
    ours = IcebergSource("db.defaults", catalog=module_catalog,
                         options={"columns": "id,level,label"}).to_arrow()
    assert_same_rows(ours, table.scan(selected_fields=("id", "level", "label")).to_arrow())


@pytest.mark.parametrize("field_type", [GeometryType(), GeographyType(), UnknownType()],
                         ids=str)
def test_unsupported_types_fail_at_planning(module_catalog: SqlCatalog, v2: Table,
                                            field_type: object) -> None:
    name = f"db.unsupported_{str(field_type).split('(')[0]}"
    as_v3(module_catalog, v2, name, _v3_schema(
        s_extra=(NestedField(9, "odd", field_type, required=False),)))  # type: ignore[arg-type]
    source = IcebergSource(name, catalog=module_catalog)
    with pytest.raises(UnsupportedTypeError) as info:
        source.plan()
    assert info.value.column == "s.odd"
    assert info.value.type_name == str(field_type)
    assert "s.odd" in str(info.value) and str(field_type) in str(info.value)
    with pytest.raises(UnsupportedTypeError), \
            source.stream(parallelism=1) as stream:  # also a stream, before any data
        next(iter(stream))
    # the other columns read as usual
    got = IcebergSource(name, catalog=module_catalog, options={"columns": "id"}).to_arrow()
    assert sorted(got.column("id").to_pylist()) == [1, 2, 3, 4]


def test_variant_fails_when_the_table_loads(module_catalog: SqlCatalog, v2: Table) -> None:
    """PyIceberg 0.12 cannot parse a ``variant`` schema: the typed catalog error names it."""
    schema = _v3_schema(NestedField(10, "v", StringType(), required=False))
    as_v3(module_catalog, v2, "db.variant", schema, raw_types={"v": "variant"})
    with pytest.raises(CatalogError, match="variant"):
        IcebergSource("db.variant", catalog=module_catalog).plan()
