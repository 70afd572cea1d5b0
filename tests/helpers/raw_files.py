"""Data files written by PyArrow's Parquet writer directly, committed as an append.

PyIceberg's own writers project each batch through ``_to_requested_schema`` before writing,
which turns a NULL list of structs (and a NULL map of structs) into an empty one
(apache/iceberg-python#3833): a table written with ``Table.append`` cannot hold a NULL
``array<struct<...>>``. :func:`append_raw` writes the rows exactly as given (Iceberg field
ids in the Parquet schema, as every Iceberg writer does) and commits them with the test
helpers' snapshot producer, with PyIceberg's statistics of the written file.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
    schema_to_pyarrow,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField

from tests.helpers.tables import _commit


def write_raw(table: Table, rows: list[dict[str, object]],
              arrow_schema: pa.Schema | None = None) -> DataFile:
    """One Parquet data file of ``rows`` in ``table``'s current schema (unpartitioned), or
    in ``arrow_schema`` (with its Parquet field ids) when given."""
    schema = table.schema()
    data = pa.Table.from_pylist(rows, schema=arrow_schema or schema_to_pyarrow(schema))
    path = table.location_provider().new_data_location(f"{uuid.uuid4()}.parquet")
    with table.io.new_output(path).create(overwrite=True) as stream:
        pq.write_table(data, stream)
    with table.io.new_input(path).open() as stream:
        metadata = pq.read_metadata(stream)
    # long columns beyond the schema (stored row lineage) get statistics like the others
    known = set(parquet_path_to_id_mapping(schema))
    extra = [NestedField(int(f.metadata[b"PARQUET:field_id"]), f.name, LongType(),
                         required=False)
             for f in data.schema if f.name not in known and pa.types.is_int64(f.type)]
    stats_schema = Schema(*schema.fields, *extra) if extra else schema
    stats = data_file_statistics_from_parquet_metadata(
        metadata, compute_statistics_plan(stats_schema, table.properties),
        parquet_path_to_id_mapping(stats_schema))
    data_file = DataFile.from_args(
        content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
        partition=Record(), file_size_in_bytes=len(table.io.new_input(path)),
        sort_order_id=None, equality_ids=None, key_metadata=None,
        **stats.to_serialized_dict(),
    )
    data_file.spec_id = table.spec().spec_id
    return data_file


def append_raw(table: Table, rows: list[dict[str, object]],
               arrow_schema: pa.Schema | None = None) -> Snapshot:
    """Append ``rows`` to ``table`` as one file written by :func:`write_raw`; one snapshot."""
    return _commit(table, Operation.APPEND, add=[write_raw(table, rows, arrow_schema)])
