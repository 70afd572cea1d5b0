"""A run of small files of over 1 MiB each: decoded on the reader's thread, rows as PyIceberg's.

The matrix's 1 MB files (40,000 rows, ~1.3 MB) are too many rows to be gathered
(:data:`icefloe.reader.groups.GROUP_MAX_FILE_ROWS`) and large enough that a split read
alone decodes its columns on Arrow's threads; in a run they decode on the reader's own
thread (benchmarks/RESULTS.md, "Defaults matrix", session 13).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from icefloe import IcebergSource
from icefloe.reader import SplitReader
from icefloe.reader import file_reader as file_reader_module
from icefloe.reader.groups import GROUP_MAX_FILE_ROWS
from icefloe.reader.ranges import THREADED_DECODE_BYTES
from tests.helpers.tables import make_table

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "payload", StringType(), required=False),
    NestedField(3, "value", DoubleType(), required=False),
)
FILES = 5
ROWS = 30_000


def _rows(start: int) -> pa.Table:
    """``ROWS`` rows of 80-character hex payloads (~1.4 MB of Parquet after zstd)."""
    rng = np.random.default_rng(start)
    payload = [bytes(r).hex() for r in rng.integers(0, 256, size=(ROWS, 40), dtype=np.uint8)]
    ids = np.arange(start, start + ROWS, dtype=np.int64)
    return pa.table({"id": ids, "payload": payload, "value": ids / 3},
                    schema=schema_to_pyarrow(SCHEMA))


@pytest.fixture(scope="module")
def table_of_mib_files(module_catalog: SqlCatalog) -> SqlCatalog:
    table = make_table(module_catalog, identifier="db.mib_files", schema=SCHEMA)
    for i in range(FILES):
        table.append(_rows(i * ROWS))
    return module_catalog


def test_a_run_of_mib_files_decodes_on_the_reader_thread(
        table_of_mib_files: SqlCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = table_of_mib_files
    source = IcebergSource("db.mib_files", catalog=catalog)
    splits = list(source.plan())
    assert len(splits) == FILES
    # the shape this is about: files read whole, not gathered, threaded if read alone
    assert all(s.record_count > GROUP_MAX_FILE_ROWS for s in splits)
    assert all(s.length >= THREADED_DECODE_BYTES for s in splits)

    calls: list[bool | None] = []
    decode = file_reader_module.parquet_batches

    def spy(*args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        calls.append(args[5] if len(args) > 5 else kwargs.get("use_threads"))
        return decode(*args, **kwargs)

    monkeypatch.setattr(file_reader_module, "parquet_batches", spy)
    reader = SplitReader(source.bounded_plan().context)
    got = pa.Table.from_batches(list(reader.read_many(splits)))  # one run of 5 splits
    assert calls == [False] * FILES

    # in split order, each file's rows in file order: PyIceberg's read of each file
    table = catalog.load_table("db.mib_files")
    firsts = [_first_id(s.file_path) for s in splits]
    expected = pa.concat_tables(
        table.scan(row_filter=f"id >= {first} and id < {first + ROWS}").to_arrow()
        for first in firsts)
    assert got.schema == source.schema()
    assert got.equals(expected.cast(got.schema))

    # read alone (not in a run), a split of over 1 MiB still decodes on Arrow's threads
    calls.clear()
    assert pa.Table.from_batches(list(reader.read(splits[0]))).num_rows == ROWS
    assert calls == [None]


def _first_id(path: str) -> int:
    """The first id of a data file, read by PyArrow (not icefloe)."""
    return int(pq.read_table(path.removeprefix("file://"), columns=["id"])
               .column("id")[0].as_py())
