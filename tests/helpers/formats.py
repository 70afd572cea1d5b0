"""Write ORC and Avro data files for tests and commit them into real tables.

PyIceberg writes only Parquet data files, so these helpers write the files themselves
(ORC with PyArrow's ORC writer, Avro with PyIceberg's own ``AvroOutputFile``, the writer
of its manifests) and commit ``DataFile`` entries with ``file_format`` ORC / AVRO through
the commit machinery of :mod:`tests.helpers.tables`.

- ORC: with field ids, the Arrow schema carries Iceberg's ``iceberg.id`` /
  ``iceberg.required`` field metadata (PyIceberg's ``schema_to_pyarrow(..., ORC)``),
  which PyArrow writes as ORC type attributes, as Java's ``ORCSchemaUtil`` does; without
  them the file has plain column names (a Hive-migrated file) and reads through the
  table's name mapping. ``split_offsets`` are the stripe offsets (as Java records them),
  read from the ORC footer by PyArrow's ORC reader's file tail.
- Avro: PyIceberg's ``AvroSchemaConversion`` writes ``field-id`` / ``element-id`` /
  ``key-id`` / ``value-id`` properties as Java's ``AvroSchemaUtil`` does; one block per
  ``rows_per_block`` records. No split offsets (Java records none for Avro).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as pa_orc
from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.name_mapping import create_mapping_from_schema
from pyiceberg.table.snapshots import Operation, Snapshot
from pyiceberg.typedef import Record
from pyiceberg.types import ListType, MapType, NestedField, StructType

from icefloe.reader.orc import stripe_units
from tests.helpers.tables import _commit


def _path(table: Table, suffix: str) -> str:
    return table.location_provider().new_data_location(f"{uuid.uuid4()}.{suffix}")


def _data_file(table: Table, path: str, file_format: FileFormat, records: int,
               size: int, split_offsets: list[int] | None,
               content: DataFileContent = DataFileContent.DATA,
               equality_ids: list[int] | None = None,
               partition: Record | None = None) -> DataFile:
    data_file = DataFile.from_args(
        content=content, file_path=path, file_format=file_format,
        partition=partition or Record(), file_size_in_bytes=size, record_count=records,
        sort_order_id=None, equality_ids=equality_ids, key_metadata=None,
        split_offsets=split_offsets,
    )
    data_file.spec_id = table.spec().spec_id  # not a struct field: from_args() drops it
    return data_file


def write_orc(table: Table, data: pa.Table, *, field_ids: bool = True,
              stripe_size: int = 64 * 1024 * 1024, compression: str = "zstd",
              batch_size: int = 1024, schema: Schema | None = None,
              content: DataFileContent = DataFileContent.DATA,
              equality_ids: list[int] | None = None,
              partition: Record | None = None) -> DataFile:
    """Write ``data`` (columns named as ``schema``'s, default the table's) as one ORC file
    (of ``partition`` in the table's current spec, default unpartitioned).

    Many small stripes need ``compression="uncompressed"`` (ORC's writer measures a
    compressed stripe in 64 KiB compression blocks) and a small ``batch_size`` (rows
    written between two stripe-size checks)."""
    schema = schema or table.schema()
    arrow_schema = schema_to_pyarrow(schema, include_field_ids=field_ids,
                                     file_format=FileFormat.ORC)
    if not field_ids:
        arrow_schema = pa.schema([_strip(f) for f in arrow_schema])
    path = _path(table, "orc")
    local = path.removeprefix("file://")
    Path(local).parent.mkdir(parents=True, exist_ok=True)
    pa_orc.write_table(data.select(arrow_schema.names).cast(arrow_schema), local,
                       stripe_size=stripe_size, compression=compression,
                       batch_size=batch_size)
    orc = pa_orc.ORCFile(local)
    offsets = [u.start for u in stripe_units(orc.reader.serialized_file_tail())]
    return _data_file(table, path, FileFormat.ORC, orc.nrows, orc.file_length, offsets,
                      content, equality_ids, partition)


def _strip(field: pa.Field) -> pa.Field:
    """``field`` without metadata at any depth (no field ids)."""
    t = field.type
    if pa.types.is_struct(t):
        t = pa.struct([_strip(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_large_list(t):
        t = pa.large_list(_strip(t.value_field))
    elif pa.types.is_list(t):
        t = pa.list_(_strip(t.value_field))
    elif pa.types.is_map(t):
        t = pa.map_(_strip(t.key_field), _strip(t.item_field))
    return pa.field(field.name, t, nullable=field.nullable)


def _to_record(value: Any, struct: StructType) -> Record:
    return Record(*(_to_avro(value.get(f.name), f) for f in struct.fields))


def _to_avro(value: Any, field: NestedField) -> Any:
    """A Python value of ``field`` (from ``to_pylist`` of an integer-cast table) as
    PyIceberg's Avro writer takes it."""
    if value is None:
        return None
    t = field.field_type
    if isinstance(t, StructType):
        return _to_record(value, t)
    if isinstance(t, ListType):
        return [_to_avro(v, t.element_field) for v in value]
    if isinstance(t, MapType):
        return {_to_avro(k, t.key_field): _to_avro(v, t.value_field) for k, v in value}
    return value


def _as_ints(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Dates, times and timestamps as their integer values (what PyIceberg's writers take)."""
    t = column.type
    if pa.types.is_date32(t):
        return column.cast(pa.int32())
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return column.cast(pa.int64())
    return column


def write_avro(table: Table, data: pa.Table, *, rows_per_block: int = 1000,
               codec: str = "deflate", schema: Schema | None = None,
               field_ids: bool = True, content: DataFileContent = DataFileContent.DATA,
               equality_ids: list[int] | None = None) -> DataFile:
    """Write ``data`` as one Avro file with PyIceberg's Avro writer, in blocks of
    ``rows_per_block`` records; without ``field_ids`` the schema's id properties are
    removed (the file reads through the table's name mapping)."""
    schema = schema or table.schema()
    ints = pa.table({name: _as_ints(data.column(name)) for name in
                     [f.name for f in schema.fields]})
    records = [_to_record(row, schema.as_struct()) for row in ints.to_pylist()]
    path = _path(table, "avro")
    output = table.io.new_output(path)
    writer = AvroOutputFile[Record](output, schema, "table", metadata={"avro.codec": codec})
    if not field_ids:
        writer._write_header = lambda: _header_without_ids(writer)  # type: ignore[method-assign]
    with writer:
        for start in range(0, len(records), rows_per_block):
            writer.write_block(records[start:start + rows_per_block])
    size = len(table.io.new_input(path))
    return _data_file(table, path, FileFormat.AVRO, len(records), size, None, content,
                      equality_ids)


def _drop_ids(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _drop_ids(v) for k, v in schema.items()
                if k not in ("field-id", "element-id", "key-id", "value-id")}
    if isinstance(schema, list):
        return [_drop_ids(v) for v in schema]
    return schema


def _header_without_ids(writer: AvroOutputFile[Record]) -> None:
    from pyiceberg.avro.file import MAGIC, META_SCHEMA, AvroFileHeader
    from pyiceberg.avro.resolver import construct_writer
    from pyiceberg.utils.schema_conversion import AvroSchemaConversion

    avro = AvroSchemaConversion().iceberg_to_avro(writer.file_schema, schema_name="table")
    meta = {**writer.metadata, "avro.schema": json.dumps(_drop_ids(avro))}
    construct_writer(META_SCHEMA).write(writer.encoder,
                                        AvroFileHeader(MAGIC, meta, writer.sync_bytes))


def commit_delete_files(table: Table, files: list[DataFile]) -> Snapshot:
    """Commit delete ``files`` (from :func:`write_orc` / :func:`write_avro` with a delete
    ``content``) in one delete snapshot on ``main``."""
    return _commit(table, Operation.DELETE, delete_files=files)


def append_files(table: Table, files: list[DataFile]) -> Snapshot:
    """Commit ``files`` in one append snapshot on ``main`` (``table`` updated in place)."""
    return _commit(table, Operation.APPEND, add=files)


def set_name_mapping(table: Table) -> None:
    """Set ``schema.name-mapping.default`` from the current schema (as ``add_files`` does)."""
    mapping = create_mapping_from_schema(table.schema())
    table.transaction().set_properties(
        **{"schema.name-mapping.default": mapping.model_dump_json()}).commit_transaction()
