"""ORC and Avro data files read with the Parquet path's guarantees.

Files are written here (ORC by PyArrow's ORC writer, Avro by PyIceberg's Avro writer:
see :mod:`tests.helpers.formats`) and committed into real tables. Oracle: the Arrow
table that was written (its rows, their file positions), evolved by hand where the
table's schema changed after the write; for ORC also PyIceberg's own scan, which reads
ORC (PyIceberg cannot read Avro data files).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import os
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc
import pytest
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.file import MAGIC, META_SCHEMA, AvroFileHeader
from pyiceberg.avro.resolver import construct_writer
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.typedef import Record
from pyiceberg.types import (
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

from icefloe import DataFileError, IcebergSource
from icefloe.reader import SplitReader
from icefloe.reader import avro as avro_module
from tests.conftest import assert_same_rows
from tests.helpers.formats import (
    append_files,
    commit_delete_files,
    set_name_mapping,
    write_avro,
    write_orc,
)
from tests.helpers.tables import (
    EVENTS_SCHEMA,
    EVENTS_SPEC_BY_DAY,
    POSITION_DELETE_SCHEMA,
    add_equality_deletes,
    add_position_deletes,
    make_table,
)
from tests.helpers.tables import rows as events

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "score", FloatType(), required=False),
    NestedField(4, "n", IntegerType(), required=False),
    NestedField(5, "ts", TimestampType(), required=False),
    NestedField(6, "day", DateType(), required=False),
    NestedField(7, "price", DecimalType(10, 2), required=False),
    NestedField(8, "tags", ListType(9, StringType(), element_required=False), required=False),
    NestedField(10, "attrs", StructType(NestedField(11, "a", IntegerType(), required=False),
                                        NestedField(12, "b", StringType(), required=False)),
                required=False),
    NestedField(13, "flag", BooleanType(), required=False),
    NestedField(14, "m", MapType(15, StringType(), 16, LongType(), value_required=False),
                required=False),
    NestedField(17, "big", DoubleType(), required=False),
)
ARROW = schema_to_pyarrow(SCHEMA, include_field_ids=False)

KINDS = ["orc", "orc-by-name", "avro", "avro-by-name", "avro-null-codec"]


def data(n: int, start: int = 0) -> pa.Table:  # no null list elements or map values:
    # PyIceberg's Avro writer cannot write them
    """``n`` rows, ids from ``start``, a null in every optional column every 7th row, ids
    not in file order (so a position is not an id)."""
    ids = [start + (i * 7919) % n for i in range(n)]

    def opt(values: list[object]) -> list[object]:
        return [None if (i + k) % 7 == 0 else v for k, (i, v) in enumerate(zip(ids, values,
                                                                           strict=True))]

    base = dt.datetime(2024, 1, 1)
    return pa.table({
        "id": ids,
        "name": opt([f"name-{i}" for i in ids]),
        "score": opt([i / 4 for i in ids]),
        "n": opt([i % 1000 for i in ids]),
        "ts": opt([base + dt.timedelta(seconds=i, microseconds=i % 1000) for i in ids]),
        "day": opt([dt.date(2024, 1, 1) + dt.timedelta(days=i % 30) for i in ids]),
        "price": opt([Decimal(i).scaleb(-2) for i in ids]),
        "tags": opt([[f"t{i}", "y", "x"][: i % 4] for i in ids]),
        "attrs": opt([{"a": i, "b": None if i % 3 else f"b{i}"} for i in ids]),
        "flag": opt([i % 2 == 0 for i in ids]),
        "m": opt([[("k", i), ("z", -i)][: i % 3] for i in ids]),
        "big": opt([i * 1.000000000001 + 0.1 for i in ids]),
    }, schema=ARROW)


def write(kind: str, table: Table, rows: pa.Table, **kwargs: object) -> DataFile:
    """One data file of ``kind`` holding ``rows``."""
    if kind.startswith("orc"):
        return write_orc(table, rows, field_ids=kind == "orc", **kwargs)  # type: ignore[arg-type]
    return write_avro(table, rows, field_ids=kind != "avro-by-name",
                      codec="null" if kind == "avro-null-codec" else "deflate",
                      **kwargs)  # type: ignore[arg-type]


def new_table(catalog: SqlCatalog, kind: str) -> Table:
    table = make_table(catalog, schema=SCHEMA)
    if kind.endswith("by-name"):
        set_name_mapping(table)
    return table


def read(catalog: SqlCatalog, **options: str) -> pa.Table:
    return IcebergSource("db.events", catalog=catalog, options=options).to_arrow()


@pytest.mark.parametrize("kind", KINDS)
def test_reads_the_rows_as_written(catalog: SqlCatalog, kind: str) -> None:
    table = new_table(catalog, kind)
    first, second = data(300), data(200, start=1000)
    append_files(table, [write(kind, table, first), write(kind, table, second)])
    got = read(catalog, batchSize="64")
    assert got.num_rows == 500
    assert_same_rows(got, pa.concat_tables([first, second]).cast(got.schema))
    if kind.startswith("orc"):  # PyIceberg reads ORC: a second oracle
        assert_same_rows(got, table.scan().to_arrow().cast(got.schema))


@pytest.mark.parametrize("kind", ["orc", "avro", "avro-by-name", "orc-by-name"])
def test_schema_evolution_after_the_write(catalog: SqlCatalog, kind: str) -> None:
    """Renamed, promoted (int -> long, float -> double), added and dropped columns."""
    table = new_table(catalog, kind)
    written = data(120)
    append_files(table, [write(kind, table, written)])
    with table.update_schema() as update:
        update.rename_column("name", "label")
        update.update_column("n", LongType())
        update.update_column("score", DoubleType())
        update.add_column("extra", StringType())
        update.delete_column("flag")
        update.rename_column("attrs.b", "bee")
    got = read(catalog, columns="id,label,n,score,extra,attrs")
    expected = pa.table({
        "id": written["id"],
        "label": written["name"],
        "n": written["n"].cast(pa.int64()),
        "score": written["score"].cast(pa.float64()),
        "extra": pa.nulls(120, pa.large_string()),
        "attrs": pa.array([None if a is None else {"a": a["a"], "bee": a["b"]}
                           for a in written["attrs"].to_pylist()],
                          pa.struct([("a", pa.int32()), ("bee", pa.large_string())])),
    })  # the order of ``columns`` is another issue's (item 4): compare by name
    assert_same_rows(got, expected.select(got.schema.names).cast(got.schema))


@pytest.mark.parametrize("kind", ["orc", "avro"])
def test_position_and_equality_deletes(catalog: SqlCatalog, kind: str) -> None:
    table = new_table(catalog, kind)
    written = data(200)
    data_file = write(kind, table, written)
    append_files(table, [data_file])
    ids = written["id"].to_pylist()
    add_position_deletes(table, {data_file.file_path: [0, 1, 99, 150, 199]})
    add_equality_deletes(table, pa.table({"id": [ids[5], ids[6], 10_000]}), ["id"])
    got = read(catalog, columns="id,name", metadataColumns="_pos")
    gone = {0, 1, 5, 6, 99, 150, 199}
    assert sorted(got.column("_pos").to_pylist()) == [p for p in range(200) if p not in gone]
    expected = written.select(["id", "name"]).append_column(
        "_pos", pa.array(range(200), pa.int64())).filter(
        pa.array([p not in gone for p in range(200)]))
    assert_same_rows(got, expected.cast(got.schema))


@pytest.mark.parametrize("kind", ["orc", "avro"])
def test_filter_and_metadata_columns(catalog: SqlCatalog, kind: str) -> None:
    table = new_table(catalog, kind)
    written = data(250)
    data_file = write(kind, table, written)
    snapshot = append_files(table, [data_file])
    got = read(catalog, filter="n >= 100 and name is not null", batchSize="50",
               metadataColumns="_file,_pos,_snapshot_id,_sequence_number")
    positions = pa.array(range(250), pa.int64())
    keep = pc.and_(pc.greater_equal(written["n"], 100), pc.is_valid(written["name"]))
    expected = written.append_column("_file", pa.array([data_file.file_path] * 250)) \
        .append_column("_pos", positions) \
        .append_column("_snapshot_id", pa.array([snapshot.snapshot_id] * 250, pa.int64())) \
        .append_column("_sequence_number",
                       pa.array([snapshot.sequence_number] * 250, pa.int64())).filter(keep)
    assert 0 < expected.num_rows < 250
    assert_same_rows(got, expected.cast(got.schema))


@pytest.mark.parametrize("kind", ["orc", "avro", "avro-windowed"])
def test_split_planning_and_resume(catalog: SqlCatalog, kind: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of many stripes / blocks cut into several splits: every record in exactly one
    split, at its file position; a split resumed at each record offset yields the rest.
    ``avro-windowed``: read as a big Avro file is (block headers walked through a small
    read-ahead window, not the whole file in memory)."""
    if kind == "avro-windowed":
        monkeypatch.setattr(avro_module, "WHOLE_FILE_BYTES", 0)
        monkeypatch.setattr(avro_module, "WINDOW_BYTES", 4096)
        kind = "avro"
    table = new_table(catalog, kind)
    written = data(3000)
    options = {"stripe_size": 4096, "compression": "uncompressed", "batch_size": 100} \
        if kind == "orc" else {"rows_per_block": 97}
    data_file = write(kind, table, written, **options)
    append_files(table, [data_file])
    if kind == "orc":
        assert data_file.split_offsets is not None and len(data_file.split_offsets) > 3
    source = IcebergSource("db.events", catalog=catalog,
                           options={"splitSize": str(data_file.file_size_in_bytes // 4),
                                    "batchSize": "128", "metadataColumns": "_pos",
                                    "columns": "id"})
    plan = source.bounded_plan()
    splits = list(plan.splits())
    assert len(splits) >= 3
    reader = SplitReader(plan.context)
    per_split = [pa.Table.from_batches(list(reader.read(s)), schema=plan.context.arrow_schema)
                 for s in splits]
    assert sum(1 for t in per_split if t.num_rows) >= 3  # the records are spread
    positions = [p for t in per_split for p in t.column("_pos").to_pylist()]
    assert positions == list(range(3000))  # each record once, splits in file order
    ids = written["id"].to_pylist()
    assert [i for t in per_split for i in t.column("id").to_pylist()] == ids
    middle = next(i for i, t in enumerate(per_split) if i and t.num_rows)
    split, whole = splits[middle], per_split[middle].column("id").to_pylist()
    for k in (1, 50, len(whole) - 1, len(whole)):
        pairs = list(reader.read_progress(split.with_position(k)))
        assert [i for b, _ in pairs for i in b.column("id").to_pylist()] == whole[k:]
        if pairs:
            assert pairs[-1][1] == len(whole)


@pytest.mark.parametrize("kind", ["orc", "avro"])
def test_parallel_read_of_many_small_files(catalog: SqlCatalog, kind: str) -> None:
    """The local engine's runs of small files (Parquet files beside them go in runs)."""
    table = new_table(catalog, kind)
    parts = [data(20, start=100 * i) for i in range(12)]
    append_files(table, [write(kind, table, p) for p in parts])
    table.append(data(30, start=5000))  # Parquet files
    table.append(data(30, start=6000))
    expected = pa.concat_tables([*parts, data(30, start=5000), data(30, start=6000)])
    batches = list(IcebergSource("db.events", catalog=catalog).read(parallelism=2))
    got = pa.Table.from_batches(batches)
    assert_same_rows(got, expected.cast(got.schema))
    reader = SplitReader(IcebergSource("db.events", catalog=catalog).bounded_plan().context)
    splits = list(IcebergSource("db.events", catalog=catalog).bounded_plan().splits())
    got = pa.Table.from_batches(list(reader.read_many(splits)))  # Spark's and Ray's path
    assert_same_rows(got, expected.cast(got.schema))


@pytest.mark.parametrize("kind", ["orc", "avro"])
def test_corrupt_file_is_a_typed_error(catalog: SqlCatalog, kind: str) -> None:
    table = new_table(catalog, kind)
    data_file = write(kind, table, data(50))
    append_files(table, [data_file])
    path = Path(data_file.file_path.removeprefix("file://"))
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])
    with pytest.raises(DataFileError, match=path.name):
        read(catalog)


def test_unknown_format_is_refused(catalog: SqlCatalog) -> None:
    table = new_table(catalog, "orc")
    append_files(table, [write("orc", table, data(10))])
    plan = IcebergSource("db.events", catalog=catalog).bounded_plan()
    (split,) = list(plan.splits())
    with pytest.raises(DataFileError, match=r"LANCE.*PARQUET, ORC, AVRO"):
        list(SplitReader(plan.context).read(dataclasses.replace(split, file_format="LANCE")))


@pytest.mark.parametrize("kind", ["orc", "avro"])
def test_delete_files_in_orc_and_avro(catalog: SqlCatalog, kind: str) -> None:
    """Position and equality delete files written in ORC / Avro (Java writes them with
    ``write.delete.format.default``), against a Parquet and an ORC / Avro data file."""
    table = new_table(catalog, kind)
    table.append(data(40))
    (parquet_path,) = [t.file.file_path for t in table.scan().plan_files()]
    own = write(kind, table, data(60, start=100))
    append_files(table, [own])
    positions = pa.table({"file_path": [parquet_path, parquet_path, own.file_path],
                          "pos": [0, 39, 7]}, schema=schema_to_pyarrow(POSITION_DELETE_SCHEMA))
    equality_schema = Schema(SCHEMA.find_field("name"))
    names = pa.table({"name": ["name-3", "name-150"]},
                     schema=schema_to_pyarrow(equality_schema))
    writer = write_orc if kind == "orc" else write_avro
    commit_delete_files(table, [
        writer(table, positions, schema=POSITION_DELETE_SCHEMA,
               content=DataFileContent.POSITION_DELETES),
        writer(table, names, schema=equality_schema, content=DataFileContent.EQUALITY_DELETES,
               equality_ids=[2]),
    ])
    got = read(catalog, columns="id,name")
    everything = pa.concat_tables([data(40), data(60, start=100)])
    parquet_ids = data(40)["id"].to_pylist()
    gone = {parquet_ids[0], parquet_ids[39], data(60, start=100)["id"][7].as_py(), 3, 150}
    expected = everything.select(["id", "name"]).filter(
        pa.array([i not in gone for i in everything["id"].to_pylist()]))
    assert expected.num_rows == 95
    assert_same_rows(got, expected.cast(got.schema))


def test_orc_time_uuid_and_fixed_as_java_writes_them(catalog: SqlCatalog) -> None:
    """Java's ORCSchemaUtil stores time as a long (``iceberg.long-type=TIME``), uuid and
    fixed as binary (``iceberg.binary-type=UUID`` / ``FIXED`` + ``iceberg.length``)."""
    schema = Schema(NestedField(1, "id", LongType(), required=True),
                    NestedField(2, "t", TimeType(), required=False),
                    NestedField(3, "u", UUIDType(), required=False),
                    NestedField(4, "f", FixedType(3), required=False))
    table = make_table(catalog, schema=schema)
    u1 = uuid.UUID(int=12345)

    def field(name: str, fid: int, typ: pa.DataType, **attrs: str) -> pa.Field:
        return pa.field(name, typ, nullable=fid != 1, metadata={"iceberg.id": str(fid), **attrs})

    orc_schema = pa.schema([
        field("id", 1, pa.int64()),
        field("t", 2, pa.int64(), **{"iceberg.long-type": "TIME"}),
        field("u", 3, pa.binary(), **{"iceberg.binary-type": "UUID"}),
        field("f", 4, pa.binary(), **{"iceberg.binary-type": "FIXED", "iceberg.length": "3"}),
    ])
    written = pa.table({"id": [1, 2], "t": [3_723_000_001, None], "u": [u1.bytes, None],
                        "f": [b"abc", None]}, schema=orc_schema)
    path = table.location_provider().new_data_location("java-like.orc")
    Path(path.removeprefix("file://")).parent.mkdir(parents=True, exist_ok=True)
    pa_orc.write_table(written, path.removeprefix("file://"))
    append_files(table, [DataFile.from_args(
        content=DataFileContent.DATA, file_path=path, file_format=FileFormat.ORC,
        partition=Record(), file_size_in_bytes=Path(path.removeprefix("file://")).stat().st_size,
        record_count=2)])
    got = read(catalog)
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "t": dt.time(1, 2, 3, 1), "u": u1, "f": b"abc"},
        {"id": 2, "t": None, "u": None, "f": None},
    ]


def _raw_avro(table: Table, fields: list[dict[str, object]], body: bytes,
              count: int) -> None:
    """Commit a one-block Avro data file of ``count`` records with the writer schema
    ``fields`` and the encoded records ``body`` (what no Iceberg writer produces)."""
    out = io.BytesIO()
    encoder = BinaryEncoder(out)
    sync = os.urandom(16)
    schema = {"type": "record", "name": "r", "fields": fields}
    construct_writer(META_SCHEMA).write(encoder, AvroFileHeader(
        MAGIC, {"avro.schema": json.dumps(schema), "avro.codec": "null"}, sync))
    encoder.write_int(count)
    encoder.write_int(len(body))
    encoder.write(body)
    encoder.write(sync)
    path = table.location_provider().new_data_location(f"{uuid.uuid4()}-raw.avro")
    local = Path(path.removeprefix("file://"))
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(out.getvalue())
    append_files(table, [DataFile.from_args(
        content=DataFileContent.DATA, file_path=path, file_format=FileFormat.AVRO,
        partition=Record(), file_size_in_bytes=local.stat().st_size, record_count=count)])


def _encoded(*values: int) -> bytes:
    body = io.BytesIO()
    for value in values:
        BinaryEncoder(body).write_int(value)
    return body.getvalue()


def test_avro_union_of_several_types_is_refused(catalog: SqlCatalog) -> None:
    """An Avro file whose column is a union of null, long and string (no Iceberg writer
    produces one; a hand-made or foreign file might): a typed error naming the column."""
    table = make_table(catalog, schema=Schema(NestedField(1, "id", LongType(), required=True)))
    _raw_avro(table, [{"name": "id", "type": ["null", "long", "string"], "field-id": 1}],
              _encoded(1, 42), 1)  # branch 1 (long), 42
    with pytest.raises(DataFileError, match=r"raw.avro.*column 'id' is an Avro union of 3"):
        read(catalog)


def test_avro_millisecond_logical_types(catalog: SqlCatalog) -> None:
    """``timestamp-millis`` and ``time-millis`` (Avro files of migrated tables) read as
    Iceberg's microsecond timestamptz and time."""
    table = make_table(catalog, schema=Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=False),
        NestedField(3, "t", TimeType(), required=False)))
    _raw_avro(table, [
        {"name": "id", "type": "long", "field-id": 1},
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
         "field-id": 2},
        {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}, "field-id": 3},
    ], _encoded(1, 1, 1_700_000_000_123, 3_723_004, 2, 0, 0), 2)
    got = sorted(read(catalog).to_pylist(), key=lambda r: r["id"])
    assert got == [
        {"id": 1, "ts": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC),
         "t": dt.time(1, 2, 3, 4000)},
        {"id": 2, "ts": None, "t": dt.time(0, 0)},
    ]


def test_hive_migrated_orc_files_without_the_partition_column(catalog: SqlCatalog) -> None:
    """Hive-style ORC files (no field ids, no partition column: the value is in the path)
    in an identity-partitioned table: ids by name mapping, ``day`` from the partition."""
    table = make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY)
    set_name_mapping(table)
    file_schema = Schema(*(f for f in EVENTS_SCHEMA.fields if f.name != "day"))
    days = [dt.date(2024, 1, 1), dt.date(2024, 1, 2)]
    parts = [events(30, start=100 * i).filter(pc.equal(events(30, start=100 * i)["day"], day))
             for i, day in enumerate(days)]
    append_files(table, [
        write_orc(table, part.drop_columns(["day"]), field_ids=False, schema=file_schema,
                  partition=Record((day - dt.date(1970, 1, 1)).days))
        for part, day in zip(parts, days, strict=True)])
    got = read(catalog)
    expected = pa.concat_tables(parts)
    assert expected.num_rows > 10
    assert_same_rows(got, expected.cast(got.schema))
    got = read(catalog, filter="day = '2024-01-02' and id >= 105")
    second = parts[1].filter(pc.greater_equal(parts[1]["id"], 105))
    assert second.num_rows > 0
    assert_same_rows(got, second.cast(got.schema))
