"""spark.read.format("icefloe") end to end on a local Spark, against PyIceberg's own scans."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from pyspark.sql import SparkSession
from pyspark.sql import types as st

import icefloe.spark
from tests.conftest import sorted_rows
from tests.helpers.tables import (
    EVENTS_SPEC_BY_DAY,
    add_position_deletes,
    live_data_files,
    make_table,
    rows,
)
from tests.spark.support import assert_same_rows, normalized, read

pytestmark = pytest.mark.spark


def _appends(table: Table, *batches: pa.Table) -> list[int]:
    ids = []
    for batch in batches:
        table.append(batch)
        snapshot = table.current_snapshot()
        assert snapshot is not None
        ids.append(snapshot.snapshot_id)
    return ids


def test_partitioned_table_matches_pyiceberg(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY)
    _appends(table, rows(120), rows(90, start=120), rows(30, start=500, days=1))

    df = read(spark, catalog, splitSize=1)  # every file its own Spark partition

    assert df.schema == st.StructType([
        st.StructField("id", st.LongType(), False),
        st.StructField("kind", st.StringType(), True),
        st.StructField("ts", st.TimestampNTZType(), True),
        st.StructField("day", st.DateType(), True),
        st.StructField("value", st.DoubleType(), True),
    ])
    assert df.rdd.getNumPartitions() == len(live_data_files(table)) == 7
    assert_same_rows(df, table.scan().to_arrow())


def test_evolved_schema_reads_old_files(spark: SparkSession, catalog: SqlCatalog) -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "n", IntegerType(), required=False),
        NestedField(3, "name", StringType(), required=False),
    )
    table = make_table(catalog, "db.evolved", schema=schema)
    table.append(pa.table({"id": [1, 2, 3], "n": [10, None, 30], "name": ["a", "b", None]},
                          schema=schema_to_pyarrow(table.schema())))
    with table.update_schema() as update:
        update.rename_column("name", "label")
        update.add_column("extra", StringType())
        update.update_column("n", LongType())
    table.append(pa.table({"id": [4], "n": [2**40], "label": ["d"], "extra": ["x"]},
                          schema=schema_to_pyarrow(table.schema())))

    df = read(spark, catalog, "db.evolved")

    assert [(f.name, f.dataType) for f in df.schema.fields] == [
        ("id", st.LongType()), ("n", st.LongType()), ("label", st.StringType()),
        ("extra", st.StringType()),
    ]
    assert_same_rows(df, table.scan().to_arrow())


def test_position_deletes_are_applied(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(20))
    (path,) = live_data_files(table)
    add_position_deletes(table, {path: [0, 5, 7, 19]})

    df = read(spark, catalog, metadataColumns="_file,_pos")

    assert_same_rows(df.drop("_file", "_pos"), table.scan().to_arrow())
    positions = sorted(r["_pos"] for r in df.select("_pos").collect())
    assert positions == [p for p in range(20) if p not in (0, 5, 7, 19)]
    assert {r["_file"] for r in df.select("_file").collect()} == {path}


def test_time_travel_by_snapshot_id(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    first, _ = _appends(table, rows(10), rows(10, start=10))

    assert_same_rows(read(spark, catalog, snapshotId=first),
                     table.scan(snapshot_id=first).to_arrow())
    assert read(spark, catalog, versionAsOf=first).count() == 10  # alias, any case
    assert read(spark, catalog).count() == 20


def test_incremental_range_matches_incremental_append_scan(
        spark: SparkSession, catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY)
    first, _, third, _ = _appends(table, rows(10), rows(11, start=10), rows(12, start=21),
                                  rows(13, start=33))

    df = read(spark, catalog, startSnapshotId=first, endSnapshotId=third)

    expected = table.incremental_append_scan(from_snapshot_id_exclusive=first,
                                             to_snapshot_id_inclusive=third).to_arrow()
    assert expected.num_rows == 23
    assert_same_rows(df, expected)


ALL_TYPES = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "b", BooleanType()),
    NestedField(3, "i", IntegerType()),
    NestedField(4, "f", FloatType()),
    NestedField(5, "d", DoubleType()),
    NestedField(6, "dec", DecimalType(12, 3)),
    NestedField(7, "dt", DateType()),
    NestedField(8, "t", TimeType()),
    NestedField(9, "ts", TimestampType()),
    NestedField(10, "tstz", TimestamptzType()),
    NestedField(11, "s", StringType()),
    NestedField(12, "u", UUIDType()),
    NestedField(13, "fx", FixedType(4)),
    NestedField(14, "bin", BinaryType()),
    NestedField(15, "st", StructType(NestedField(16, "x", IntegerType()),
                                     NestedField(17, "y", StringType(), required=True))),
    NestedField(18, "l", ListType(19, LongType(), element_required=False)),
    NestedField(20, "m", MapType(21, StringType(), 22, DoubleType(), value_required=False)),
    NestedField(23, "us", ListType(24, UUIDType(), element_required=True)),
)

ALL_TYPES_SPARK = st.StructType([
    st.StructField("id", st.LongType(), False),
    st.StructField("b", st.BooleanType()),
    st.StructField("i", st.IntegerType()),
    st.StructField("f", st.FloatType()),
    st.StructField("d", st.DoubleType()),
    st.StructField("dec", st.DecimalType(12, 3)),
    st.StructField("dt", st.DateType()),
    st.StructField("t", st.TimeType(6)),
    st.StructField("ts", st.TimestampNTZType()),
    st.StructField("tstz", st.TimestampType()),
    st.StructField("s", st.StringType()),
    st.StructField("u", st.StringType()),
    st.StructField("fx", st.BinaryType()),
    st.StructField("bin", st.BinaryType()),
    st.StructField("st", st.StructType([st.StructField("x", st.IntegerType()),
                                        st.StructField("y", st.StringType(), False)])),
    st.StructField("l", st.ArrayType(st.LongType(), True)),
    st.StructField("m", st.MapType(st.StringType(), st.DoubleType(), True)),
    st.StructField("us", st.ArrayType(st.StringType(), False)),
])

U1 = uuid.UUID("12345678-1234-5678-9abc-def012345678")
U2 = uuid.UUID("ffffffff-0000-4000-8000-00000000000a")


def _with_uuid_lists(records: list[dict[str, object]], schema: pa.Schema) -> pa.Table:
    """``from_pylist`` cannot build lists of extension values: build storage, then wrap."""
    list_type = schema.field("us").type
    make_list = pa.large_list if pa.types.is_large_list(list_type) else pa.list_
    storage_type = make_list(list_type.value_field.with_type(pa.binary(16)))
    plain = pa.Table.from_pylist(records, schema=schema.set(
        schema.get_field_index("us"), schema.field("us").with_type(storage_type)))
    lists = plain.column("us").combine_chunks()
    values = pa.ExtensionArray.from_storage(pa.uuid(), lists.values)
    wrapped = type(lists).from_arrays(lists.offsets, values, type=list_type,
                                      mask=lists.is_null())
    return plain.set_column(schema.get_field_index("us"), schema.field("us"), wrapped)


def test_all_types_round_trip(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = make_table(catalog, "db.types", schema=ALL_TYPES)
    table.append(_with_uuid_lists([
        dict(id=1, b=True, i=-7, f=1.5, d=2.25, dec=decimal.Decimal("-12.345"),
             dt=dt.date(2024, 2, 29), t=dt.time(23, 59, 58, 999999),
             ts=dt.datetime(2024, 1, 2, 3, 4, 5, 6),
             tstz=dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC), s="żółw",
             u=U1.bytes, fx=b"abcd", bin=b"\x00\xff", st={"x": 1, "y": "y"}, l=[1, None, 3],
             m=[("k", 1.0), ("n", None)], us=[U2.bytes, U1.bytes]),
        dict(id=2, st={"x": None, "y": ""}, l=[], m=[], us=[]),
        dict(id=3),
    ], schema_to_pyarrow(table.schema())))

    df = read(spark, catalog, "db.types")

    assert df.schema == ALL_TYPES_SPARK
    expected = sorted(normalized(table.scan().to_arrow()).to_pylist(), key=lambda r: r["id"])
    # PySpark's toArrow() cannot convert a null struct with a non-nullable child: compare
    # that column through Rows, every other one through Arrow (exact timestamps)
    actual = sorted(df.drop("st").toArrow().to_pylist(), key=lambda r: r["id"])
    assert actual == [{k: v for k, v in row.items() if k != "st"} for row in expected]
    structs = sorted((r["id"], r["st"] and r["st"].asDict())
                     for r in df.select("id", "st").collect())
    assert structs == [(row["id"], row["st"]) for row in expected]
    assert actual[0]["u"] == str(U1) and actual[0]["us"] == [str(U2), str(U1)]
    assert actual[0]["tstz"] == dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
    assert actual[2]["u"] is None and structs[2] == (3, None)


def test_columns_and_metadata_columns(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    (snapshot,) = _appends(table, rows(5))

    df = read(spark, catalog, columns="kind,id", metadataColumns="_snapshot_id,_sequence_number")

    assert df.columns == ["kind", "id", "_snapshot_id", "_sequence_number"]  # order asked
    assert {(r["_snapshot_id"], r["_sequence_number"]) for r in df.collect()} == {(snapshot, 1)}
    assert_same_rows(df.drop("_snapshot_id", "_sequence_number"),
                     table.scan(selected_fields=("kind", "id")).to_arrow().select(["kind", "id"]))


def test_empty_table_is_an_empty_dataframe(spark: SparkSession, catalog: SqlCatalog) -> None:
    make_table(catalog)
    df = read(spark, catalog)
    assert df.columns == ["id", "kind", "ts", "day", "value"]
    assert df.collect() == []


def test_backfill_writes_parquet(spark: SparkSession, catalog: SqlCatalog,
                                 tmp_path: Path) -> None:
    table = make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY)
    table.append(rows(50))
    out = tmp_path / "out"

    result = icefloe.spark.backfill("db.events", catalog, {"splitSize": 1}, to=str(out))

    assert result.rows == 50 and result.files >= 1
    assert sorted_rows(pq.read_table(out)) == sorted_rows(normalized(table.scan().to_arrow()))


def test_user_schema_selects_columns_by_name(spark: SparkSession, catalog: SqlCatalog) -> None:
    make_table(catalog).append(rows(4))
    icefloe.spark.register(spark)
    df = (spark.read.format("icefloe").schema("value double, id long")
          .options(**icefloe.spark.catalog_options(catalog)).load("db.events"))
    assert sorted(tuple(r) for r in df.collect()) == [(i / 2, i) for i in range(4)]
