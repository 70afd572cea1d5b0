"""A run of small files of over 1 MiB each: decoded on the reader's thread, rows as PyIceberg's.

The matrix's 1 MB files (40,000 rows, ~1.3 MB) are too many rows to be gathered
(:data:`icefloe.reader.groups.GROUP_MAX_FILE_ROWS`) and large enough that a split read
alone decodes its columns on Arrow's threads; in a run they decode on the reader's own
thread (benchmarks/RESULTS.md, "Defaults matrix", session 13), also in a run too short
to be read together (fewer than :data:`icefloe.reader.split_reader.MIN_RUN` splits: the
local engine's runs of files on the local disk hold 3 such files since session 15,
:data:`icefloe.local.engine.LOCAL_RUN_RECORDS`; session 20 found them decoded threaded).
"""

from __future__ import annotations

import threading
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
from icefloe.local.engine import LOCAL_RUN_RECORDS
from icefloe.local.worker import SplitBatch, read_run
from icefloe.reader import SplitReader
from icefloe.reader import file_reader as file_reader_module
from icefloe.reader.groups import GROUP_MAX_FILE_ROWS
from icefloe.reader.ranges import THREADED_DECODE_BYTES
from icefloe.reader.split_reader import MIN_RUN
from icefloe.retry import RetryPolicy
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


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[bool | None]:
    """The ``use_threads`` of every Parquet decode from here on (None: by the split's size)."""
    calls: list[bool | None] = []
    decode = file_reader_module.parquet_batches

    def spy(*args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        calls.append(args[5] if len(args) > 5 else kwargs.get("use_threads"))
        return decode(*args, **kwargs)

    monkeypatch.setattr(file_reader_module, "parquet_batches", spy)
    return calls


def test_a_run_of_mib_files_decodes_on_the_reader_thread(
        table_of_mib_files: SqlCatalog, decodes: list[bool | None]) -> None:
    catalog = table_of_mib_files
    source = IcebergSource("db.mib_files", catalog=catalog)
    splits = list(source.plan())
    assert len(splits) == FILES
    # the shape this is about: files read whole, not gathered, threaded if read alone
    assert all(s.record_count > GROUP_MAX_FILE_ROWS for s in splits)
    assert all(s.length >= THREADED_DECODE_BYTES for s in splits)

    reader = SplitReader(source.bounded_plan().context)
    got = pa.Table.from_batches(list(reader.read_many(splits)))  # one run of 5 splits
    assert decodes == [False] * FILES

    # in split order, each file's rows in file order: PyIceberg's read of each file
    table = catalog.load_table("db.mib_files")
    firsts = [_first_id(s.file_path) for s in splits]
    expected = pa.concat_tables(
        table.scan(row_filter=f"id >= {first} and id < {first + ROWS}").to_arrow()
        for first in firsts)
    assert got.schema == source.schema()
    assert got.equals(expected.cast(got.schema))

    # read alone (not in a run), a split of over 1 MiB still decodes on Arrow's threads
    decodes.clear()
    assert pa.Table.from_batches(list(reader.read(splits[0]))).num_rows == ROWS
    assert decodes == [None]


def test_a_local_run_too_short_to_read_together_decodes_on_the_reader_thread(
        table_of_mib_files: SqlCatalog, decodes: list[bool | None]) -> None:
    """The local engine's worker (:func:`icefloe.local.worker.read_run`) on runs as its
    claims make them of these files: one split at a time, each on the reader's thread
    unless the run is that split alone."""
    catalog = table_of_mib_files
    source = IcebergSource("db.mib_files", catalog=catalog)
    splits = list(source.plan())
    short = 2
    assert short < MIN_RUN and short * ROWS <= LOCAL_RUN_RECORDS  # a claim's run, not scanned
    reader = SplitReader(source.bounded_plan().context)

    def rows_of(run: list[Any]) -> pa.Table:
        items = [i for i in read_run(reader, run, RetryPolicy(), threading.Event())
                 if isinstance(i, SplitBatch)]
        assert [i.split.split_id for i in items if i.last] == [s.split_id for s in run]
        return pa.Table.from_batches([i.batch for i in items if i.batch.num_rows])

    got = rows_of(splits[:short])
    assert decodes == [False] * short
    decodes.clear()
    alone = rows_of(splits[short:short + 1])
    assert decodes == [None]  # by its size: over THREADED_DECODE_BYTES, threaded

    table = catalog.load_table("db.mib_files")
    for run, rows in ((splits[:short], got), (splits[short:short + 1], alone)):
        expected = pa.concat_tables(
            table.scan(row_filter=f"id >= {first} and id < {first + ROWS}").to_arrow()
            for first in (_first_id(s.file_path) for s in run))
        assert rows.equals(expected.cast(rows.schema))


def test_a_task_run_too_short_to_read_together_decodes_on_the_reader_thread(
        table_of_mib_files: SqlCatalog, decodes: list[bool | None]) -> None:
    """:meth:`SplitReader.read_many` (a Spark or Ray task) on fewer small files than a run."""
    source = IcebergSource("db.mib_files", catalog=table_of_mib_files)
    splits = list(source.plan())[:MIN_RUN - 1]
    reader = SplitReader(source.bounded_plan().context)
    got = pa.Table.from_batches(list(reader.read_many(splits)))
    assert decodes == [False] * len(splits)
    assert got.num_rows == sum(s.record_count for s in splits) == len(splits) * ROWS
    decodes.clear()
    assert pa.Table.from_batches(list(reader.read_many(splits[:1]))).num_rows == ROWS
    assert decodes == [None]


def _first_id(path: str) -> int:
    """The first id of a data file, read by PyArrow (not icefloe)."""
    return int(pq.read_table(path.removeprefix("file://"), columns=["id"])
               .column("id")[0].as_py())
