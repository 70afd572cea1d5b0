"""A local split of large row groups decoded ahead of its reader thread
(``icefloe.reader.file_reader.LOCAL_DECODE_AHEAD_BYTES``): rows, order, positions, resume,
close while reading. The threshold is lowered so the tests' small file crosses it."""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import icefloe.reader.file_reader as file_reader
from icefloe import FileSplit, IcebergSource
from icefloe.reader import SplitReader
from tests.conftest import assert_same_rows
from tests.helpers.tables import make_table, rows

AHEAD = "icefloe-decode-ahead"


def _ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == AHEAD]


@pytest.fixture
def big(catalog: SqlCatalog) -> Table:
    """One data file of 3,000 rows in row groups of 1,000, ids shuffled (position != id)."""
    table = make_table(catalog)
    table.transaction().set_properties(**{"write.parquet.row-group-limit": "1000"}) \
        .commit_transaction()
    order = sorted(range(3000), key=lambda i: (i * 37) % 3000)
    table.append(rows(3000).take(order))
    return table


def _file_ids(split: FileSplit) -> list[int]:
    """The split's data file's ids in file order (read by PyArrow, not icefloe)."""
    return pq.read_table(split.file_path.removeprefix("file://"), columns=["id"]) \
        .column("id").to_pylist()


def test_threshold_counts_the_row_groups_decoded_bytes(catalog: SqlCatalog, big: Table,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (split,) = list(IcebergSource("db.events", catalog=catalog).bounded_plan().splits())
    md = pq.read_metadata(split.file_path.removeprefix("file://"))
    assert md.num_row_groups == 3
    sizes = [md.row_group(i).total_byte_size for i in range(3)]
    reader = pq.ParquetFile(split.file_path.removeprefix("file://")).reader
    monkeypatch.setattr(file_reader, "LOCAL_DECODE_AHEAD_BYTES", sizes[0] + sizes[1])
    assert not file_reader.decodes_ahead(reader, [0])
    assert file_reader.decodes_ahead(reader, [0, 1])
    assert not file_reader.decodes_ahead(reader, [])
    monkeypatch.setattr(file_reader, "LOCAL_DECODE_AHEAD_BYTES", 256 * 1024 * 1024)
    assert not file_reader.decodes_ahead(reader, [0, 1, 2])  # the default: not this file


def test_decoded_ahead_rows_order_and_positions(catalog: SqlCatalog, big: Table,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_reader, "LOCAL_DECODE_AHEAD_BYTES", 1)
    plan = IcebergSource("db.events", catalog=catalog,
                         options={"batchSize": "256", "metadataColumns": "_pos"}).bounded_plan()
    (split,) = list(plan.splits())
    seen: list[int] = []
    batches = []
    for batch in SplitReader(plan.context).read(split):
        seen.append(len(_ahead_threads()))
        batches.append(batch)
    assert max(seen) == 1  # decoded by a thread of its own
    assert not _ahead_threads()  # joined at the end
    assert all(0 < b.num_rows <= 256 for b in batches)
    got = pa.Table.from_batches(batches)
    assert got.column("id").to_pylist() == _file_ids(split)  # file order within the split
    assert got.column("_pos").to_pylist() == list(range(3000))
    assert_same_rows(got.drop_columns(["_pos"]), big.scan().to_arrow())


@pytest.mark.parametrize("k", [0, 999, 1000, 2500])
def test_decoded_ahead_resumes(catalog: SqlCatalog, big: Table,
                               monkeypatch: pytest.MonkeyPatch, k: int) -> None:
    monkeypatch.setattr(file_reader, "LOCAL_DECODE_AHEAD_BYTES", 1)
    plan = IcebergSource("db.events", catalog=catalog,
                         options={"batchSize": "300"}).bounded_plan()
    (split,) = list(plan.splits())
    got = [i for b in SplitReader(plan.context).read(split.with_position(k))
           for i in b.column("id").to_pylist()]
    assert got == _file_ids(split)[k:]


def test_close_while_decoding_ahead_stops_its_thread(catalog: SqlCatalog, big: Table,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_reader, "LOCAL_DECODE_AHEAD_BYTES", 1)
    plan = IcebergSource("db.events", catalog=catalog,
                         options={"batchSize": "100"}).bounded_plan()
    (split,) = list(plan.splits())
    gen = SplitReader(plan.context).read(split)
    first = next(gen)
    assert first.column("id").to_pylist() == _file_ids(split)[:100]
    assert len(_ahead_threads()) == 1
    gen.close()
    assert not _ahead_threads()


def test_whole_read_through_the_engine(catalog: SqlCatalog, big: Table,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The local engine's read with every split decoded ahead: PyIceberg's rows; a read
    stopped early leaves no decode thread behind."""
    monkeypatch.setattr(file_reader, "LOCAL_DECODE_AHEAD_BYTES", 1)
    source = IcebergSource("db.events", catalog=catalog, options={"batchSize": "128"})
    got = pa.Table.from_batches(list(source.read()))
    assert_same_rows(got, big.scan().to_arrow())
    stream = source.read()
    next(iter(stream))
    close = getattr(stream, "close", None)
    if close is not None:
        close()
    for t in _ahead_threads():
        t.join(timeout=10)
    assert not _ahead_threads()
