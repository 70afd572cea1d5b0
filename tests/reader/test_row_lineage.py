"""Iceberg v3 row lineage: ``_row_id`` and ``_last_updated_sequence_number`` metadata columns.

The table: three appends written by PyArrow's Parquet writer into a PyIceberg v2 table,
then registered as v3 with row ids assigned as a v3 writer assigns them
(:func:`tests.helpers.v3.assign_row_ids`: each data manifest's ``first_row_id`` in the
manifest list; the data files' own ``first_row_id`` left null, inherited on read). The
third file stores lineage values as a rewrite would (some null: inherited). The oracle
applies the spec's rules ("Row Lineage", "First Row ID Inheritance") to what PyIceberg's
manifest reader and ``pyarrow.parquet`` read, independently of icefloe's code.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.avro.file import AvroFile
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import MANIFEST_LIST_FILE_SCHEMAS, ManifestEntryStatus
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from icefloe import IcebergSource
from icefloe.reader import SplitReader
from tests.helpers.raw_files import append_raw
from tests.helpers.v3 import as_v3

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True),
                NestedField(2, "v", StringType(), required=False))
LINEAGE_FILE = pa.schema([
    pa.field("id", pa.int64(), False, {"PARQUET:field_id": "1"}),
    pa.field("v", pa.string(), True, {"PARQUET:field_id": "2"}),
    pa.field("_row_id", pa.int64(), True, {"PARQUET:field_id": "2147483540"}),
    pa.field("_last_updated_sequence_number", pa.int64(), True,
             {"PARQUET:field_id": "2147483539"}),
])
COLUMNS = "_row_id,_last_updated_sequence_number,_pos,_file"


@pytest.fixture(scope="module")
def v2(module_catalog: SqlCatalog) -> Table:
    module_catalog.create_namespace_if_not_exists("db")
    table = module_catalog.create_table(
        "db.lineage_v2", SCHEMA, properties={"write.metadata.metrics.default": "none"})
    append_raw(table, [{"id": i, "v": f"a{i}"} for i in range(3)])
    append_raw(table, [{"id": 10 + i, "v": None} for i in range(2)])
    append_raw(table, [
        {"id": 20, "v": "x", "_row_id": 100, "_last_updated_sequence_number": 1},
        {"id": 21, "v": "y", "_row_id": None, "_last_updated_sequence_number": None},
        {"id": 22, "v": "z", "_row_id": 102, "_last_updated_sequence_number": None},
    ], LINEAGE_FILE)
    return table


def _oracle(table: Table) -> dict[int, tuple[int | None, int]]:
    """id -> (_row_id, _last_updated_sequence_number) by the spec, from the head snapshot's
    manifest list (read with the v3 schema), PyIceberg's manifest entries and the files."""
    head = table.current_snapshot()
    assert head is not None
    fields = [f.field_id for f in MANIFEST_LIST_FILE_SCHEMAS[3].fields]
    with AvroFile[Record](table.io.new_input(head.manifest_list), MANIFEST_LIST_FILE_SCHEMAS[3],
                          read_types={}, read_enums={}) as reader:
        manifest_first = {m[fields.index(500)]: m[fields.index(520)] for m in reader}
    out: dict[int, tuple[int | None, int]] = {}
    for manifest in head.manifests(table.io):
        next_id = manifest_first[manifest.manifest_path]
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            first = None if next_id is None else next_id
            if next_id is not None:
                next_id += entry.data_file.record_count
            if entry.status == ManifestEntryStatus.DELETED:
                continue
            with table.io.new_input(entry.data_file.file_path).open() as stream:
                rows = pq.read_table(stream).to_pylist()
            for pos, row in enumerate(rows):
                row_id = row.get("_row_id")
                seq = row.get("_last_updated_sequence_number")
                out[row["id"]] = (
                    row_id if row_id is not None else None if first is None else first + pos,
                    seq if seq is not None else entry.sequence_number)
    return out


def _lineage(table: pa.Table) -> dict[int, tuple[int | None, int]]:
    return {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"])
            for r in table.to_pylist()}


def test_row_lineage_with_inheritance(module_catalog: SqlCatalog, v2: Table) -> None:
    table = as_v3(module_catalog, v2, "db.lineage", row_lineage=True)
    got = IcebergSource("db.lineage", catalog=module_catalog,
                        options={"metadataColumns": COLUMNS}).to_arrow()
    assert got.column_names == ["id", "v", "_row_id", "_last_updated_sequence_number",
                                "_pos", "_file"]
    expected = _oracle(table)
    assert _lineage(got) == expected
    # the spec's numbers: manifests get ids 0, 3, 5 in commit order; stored values win
    assert expected == {0: (0, 1), 1: (1, 1), 2: (2, 1), 10: (3, 2), 11: (4, 2),
                        20: (100, 1), 21: (6, 3), 22: (102, 3)}
    # a row's _row_id is stable across reads of later snapshots and of incremental ranges
    first = table.snapshots()[0].snapshot_id
    later = IcebergSource("db.lineage", catalog=module_catalog,
                          options={"metadataColumns": COLUMNS,
                                   "startSnapshotId": str(first)}).to_arrow()
    assert _lineage(later) == {k: v for k, v in expected.items() if k >= 10}


def test_row_lineage_survives_filters_resumes_and_batches(module_catalog: SqlCatalog,
                                                          v2: Table) -> None:
    table = as_v3(module_catalog, v2, "db.lineage2", row_lineage=True)
    expected = _oracle(table)
    source = IcebergSource("db.lineage2", catalog=module_catalog,
                           options={"metadataColumns": "_row_id,_last_updated_sequence_number",
                                    "filter": "id <> 21 AND id <> 1", "batchSize": "1",
                                    "columns": "v,id"})
    got = source.to_arrow()
    assert got.column_names == ["v", "id", "_row_id", "_last_updated_sequence_number"]
    assert _lineage(got) == {k: v for k, v in expected.items() if k not in (1, 21)}
    plan = source.bounded_plan()
    reader = SplitReader(plan.context)
    resumed = [b for s in plan.splits() for b in reader.read(s.with_position(1))]
    assert _lineage(pa.Table.from_batches(resumed)) == {
        k: v for k, v in expected.items() if k in (2, 11, 22)}


def test_upgraded_table_without_row_ids(module_catalog: SqlCatalog, v2: Table) -> None:
    """Snapshots from before the upgrade have no first-row-id: _row_id is null (unless the
    file stores one), _last_updated_sequence_number the file's data sequence number."""
    table = as_v3(module_catalog, v2, "db.upgraded")
    got = IcebergSource("db.upgraded", catalog=module_catalog,
                        options={"metadataColumns": COLUMNS}).to_arrow()
    lineage = _lineage(got)
    assert lineage == _oracle(table)
    assert lineage[0] == (None, 1) and lineage[20] == (100, 1) and lineage[21] == (None, 3)


def test_stream_carries_row_lineage(module_catalog: SqlCatalog, v2: Table,
                                    tmp_path: object) -> None:
    """A stream (head scan, then each new snapshot) plans through the same lineage reads."""
    table = as_v3(module_catalog, v2, "db.lineage_stream", row_lineage=True)
    expected = _oracle(table)
    for options in ({}, {"startingVersion": "earliest"}):
        got: list[pa.RecordBatch] = []
        source = IcebergSource("db.lineage_stream", catalog=module_catalog,
                               options={"metadataColumns": COLUMNS, "pollIntervalMs": "10",
                                        **options})
        with source.stream(checkpoint=f"{tmp_path}/{len(options)}", parallelism=2) as stream:
            for item in stream:
                got.append(item.batch)
                item.ack()
                if sum(b.num_rows for b in got) >= len(expected):
                    break
        assert _lineage(pa.Table.from_batches(got)) == expected
