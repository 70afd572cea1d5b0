"""The local engine: reader threads, ordering, completeness, backpressure, errors."""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform

from icefloe import DataFileError, FileSplit, IcebergSource
from icefloe.enumerator.bounded import BoundedPlan
from icefloe.local.engine import read_batches, read_splits
from icefloe.local.queues import ITEM_BYTES
from icefloe.reader import ReadContext, SplitReader
from tests.conftest import assert_same_rows
from tests.helpers.tables import make_catalog, make_table, rows

BY_KIND = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="kind")
)


def _make_table(catalog: SqlCatalog) -> Table:
    """Eight data files (one of them cut into several splits), 200 rows, in two commits."""
    table = make_table(catalog, partition_spec=BY_KIND)
    table.append(rows(140, kinds=tuple("abcdefg")))  # one file per kind
    table.transaction().set_properties(**{"write.parquet.row-group-limit": "15"}) \
        .commit_transaction()
    table.append(rows(60, start=140, kinds=("z",)))
    return table


@pytest.fixture(scope="module")
def shared(module_catalog: SqlCatalog) -> Table:
    return _make_table(module_catalog)


@pytest.fixture
def catalog(module_catalog: SqlCatalog, shared: Table) -> SqlCatalog:
    """The module's catalog (its table is only read) for every test but the destructive one."""
    return module_catalog


@pytest.fixture
def table(shared: Table) -> Table:
    return shared


def _plan(catalog: SqlCatalog, **options: object) -> BoundedPlan:
    return IcebergSource("db.events", catalog=catalog, options=options).bounded_plan()


def _sequential_ids(plan: BoundedPlan) -> list[list[int]]:
    reader = SplitReader(plan.context)
    return [[i for b in reader.read(s) for i in b.column("id").to_pylist()] for s in plan.splits()]


@pytest.mark.parametrize("parallelism", [1, 2, 4])
@pytest.mark.parametrize("preserve_order", ["true", "false"])
def test_same_rows_at_any_parallelism(catalog: SqlCatalog, table: Table, parallelism: int,
                                      preserve_order: str) -> None:
    source = IcebergSource("db.events", catalog=catalog,
                           options={"splitSize": "1", "batchSize": "8",
                                    "preserveOrder": preserve_order})
    batches = source.read(parallelism=parallelism)
    assert inspect.isgenerator(batches)
    collected = list(batches)
    assert all(0 < b.num_rows <= 8 for b in collected)
    assert_same_rows(pa.Table.from_batches(collected), table.scan().to_arrow())


@pytest.mark.parametrize("parallelism", [1, 3])
def test_preserve_order_follows_split_order(catalog: SqlCatalog, table: Table,
                                            parallelism: int) -> None:
    plan = _plan(catalog, splitSize="1", batchSize="4")
    expected = [i for ids in _sequential_ids(plan) for i in ids]
    got = [i for b in read_batches(plan.splits(), plan.context, parallelism, True)
           for i in b.column("id").to_pylist()]
    assert got == expected


def test_every_split_reports_completion(catalog: SqlCatalog, table: Table) -> None:
    plan = _plan(catalog, splitSize="1", batchSize="8")
    splits = list(plan.splits())
    per_split: dict[str, list[tuple[int, int, bool]]] = {}
    for item in read_splits(splits, plan.context, parallelism=3, preserve_order=False):
        per_split.setdefault(item.split.split_id, []).append(
            (item.batch.num_rows, item.consumed, item.last))
    assert set(per_split) == {s.split_id for s in splits}
    sequential = dict(zip([s.split_id for s in splits], _sequential_ids(plan), strict=True))
    for split_id, items in per_split.items():
        assert [last for _, _, last in items] == [False] * (len(items) - 1) + [True]
        consumed = [c for _, c, _ in items]
        assert consumed == sorted(consumed)
        assert consumed[-1] == len(sequential[split_id])  # no deletes: source rows = rows
        assert sum(n for n, _, _ in items) == len(sequential[split_id])


def test_resumed_splits(catalog: SqlCatalog, table: Table) -> None:
    plan = _plan(catalog)
    splits = list(plan.splits())
    resumed = [s.with_position(5) for s in splits]
    got = pa.Table.from_batches(list(read_batches(resumed, plan.context, parallelism=2)))
    expected = [i for ids in _sequential_ids(plan) for i in ids[5:]]
    assert sorted(got.column("id").to_pylist()) == sorted(expected)
    # a split resumed at its end still completes, with nothing to read
    done = splits[0].with_position(splits[0].record_count)
    (item,) = list(read_splits([done], plan.context, parallelism=2))
    assert item.last and item.batch.num_rows == 0 and item.consumed == splits[0].record_count


def test_no_splits(catalog: SqlCatalog, table: Table) -> None:
    plan = _plan(catalog)
    for preserve_order in (True, False):
        assert list(read_splits([], plan.context, 3, preserve_order)) == []


def test_bad_parallelism(catalog: SqlCatalog, table: Table) -> None:
    plan = _plan(catalog)
    with pytest.raises(ValueError, match="parallelism"):
        list(read_splits(plan.splits(), plan.context, parallelism=0))


@pytest.mark.timeout(60)
def test_reader_error_reaches_the_consumer(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    _make_table(catalog)
    plan = _plan(catalog)
    splits = list(plan.splits())
    os.remove(splits[3].file_path.removeprefix("file://"))
    for preserve_order in (True, False):
        with pytest.raises(DataFileError, match=splits[3].file_path):
            for _ in read_batches(splits, plan.context, 2, preserve_order):
                pass


@pytest.mark.timeout(60)
def test_planner_error_reaches_the_consumer(catalog: SqlCatalog, table: Table) -> None:
    plan = _plan(catalog)

    def failing() -> Iterator[FileSplit]:
        yield from list(plan.splits())[:2]
        raise RuntimeError("planner broke")

    for preserve_order in (True, False):
        with pytest.raises(RuntimeError, match="planner broke"):
            list(read_splits(failing(), plan.context, 2, preserve_order))


class _CountingReader(SplitReader):
    """A real reader that counts the batches it produced (shared counter)."""

    produced = 0
    lock = threading.Lock()

    def read_progress(self, split: FileSplit, use_threads: bool | None = None
                      ) -> Iterator[tuple[pa.RecordBatch, int]]:
        for item in super().read_progress(split, use_threads):
            with _CountingReader.lock:
                _CountingReader.produced += 1
            yield item


def _reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("icefloe-reader")]


def _all_blocked_putting() -> bool:
    """Whether every reader thread (at least one) is inside :func:`icefloe.local.queues.put`
    (waiting for room on its queue)."""
    frames = sys._current_frames()
    threads = [t for t in _reader_threads() if t.name.removeprefix("icefloe-reader-").isdigit()]
    if not threads:
        return False
    for thread in threads:
        frame = frames.get(thread.ident) if thread.ident is not None else None
        names = set()
        while frame is not None:
            names.add((frame.f_code.co_name, Path(frame.f_code.co_filename).name))
            frame = frame.f_back
        if ("put", "queues.py") not in names:
            return False
    return True



class _ByteCountingReader(SplitReader):
    """A real reader that counts the bytes it produced as the lookahead counts them
    (Arrow bytes plus :data:`~icefloe.local.queues.ITEM_BYTES` a batch; shared counter)."""

    produced = 0
    lock = threading.Lock()

    def read_progress(self, split: FileSplit, use_threads: bool | None = None
                      ) -> Iterator[tuple[pa.RecordBatch, int]]:
        for batch, consumed in super().read_progress(split, use_threads):
            with _ByteCountingReader.lock:
                _ByteCountingReader.produced += batch.nbytes + ITEM_BYTES
            yield batch, consumed


def _wait_blocked(what: str) -> None:
    """Wait (at most 30 s, else fail) until every reader thread waits for room on a queue."""
    deadline = time.monotonic() + 30
    while not _all_blocked_putting():
        assert time.monotonic() < deadline, f"readers not blocked on full queues: {what}"
        time.sleep(0.01)


def _pyarrow_ids_in_split_order(plan: BoundedPlan) -> list[int]:
    """The ids of every split in plan order, each split's row groups read by PyArrow (the
    row groups whose first byte lies in the split's range; the oracle, not icefloe)."""
    ids: list[int] = []
    for split in plan.splits():
        pf = pq.ParquetFile(split.file_path.removeprefix("file://"))
        groups = [g for g in range(pf.metadata.num_row_groups)
                  if split.start <= _group_start(pf.metadata.row_group(g))
                  < split.start + split.length]
        ids.extend(pf.read_row_groups(groups, columns=["id"]).column("id").to_pylist())
    return ids


def _group_start(group: pq.RowGroupMetaData) -> int:
    column = group.column(0)
    offset = column.dictionary_page_offset
    return int(offset if offset is not None and offset > 0 else column.data_page_offset)


@pytest.mark.timeout(60)
def test_lookahead_bounds_the_bytes_read_ahead(catalog: SqlCatalog, table: Table) -> None:
    """Under preserveOrder the runs behind the one being delivered hold at most the
    lookahead budget, plus per reader thread one chunk admitted at the edge, one held
    back and one being put; the run being delivered its queue_batches chunks. Order and
    completeness are checked against PyArrow reading the splits' row groups."""
    plan = _plan(catalog, splitSize="1", batchSize="1")  # 200 one-row batches
    budget = 6 * (ITEM_BYTES + 64)  # room for a few one-row batches
    _ByteCountingReader.produced = 0
    items = read_splits(plan.splits(), plan.context, parallelism=3, preserve_order=True,
                        queue_batches=2, lookahead=budget,
                        reader_factory=_ByteCountingReader)
    got = [next(items)]
    _wait_blocked(f"{_ByteCountingReader.produced} bytes produced")
    blocked_at = _ByteCountingReader.produced
    got.extend(items)
    costs = [g.batch.nbytes + ITEM_BYTES for g in got if g.batch.num_rows]
    assert _ByteCountingReader.produced == sum(costs)  # every batch counted once
    # the consumer took 1; the queues hold the budget, the head 2 chunks past it, and per thread
    # one chunk admitted at the edge, one held back, one being put
    assert blocked_at - costs[0] <= budget + (2 + 3 * 3) * max(costs), \
        f"{blocked_at} bytes read ahead, budget {budget}"
    assert blocked_at < sum(costs) / 2  # the readers stopped well before the end
    ids = [i for g in got for i in g.batch.column("id").to_pylist()]
    assert ids == _pyarrow_ids_in_split_order(plan)
    assert_same_rows(pa.Table.from_batches([g.batch for g in got if g.batch.num_rows]),
                     table.scan().to_arrow())


@pytest.mark.timeout(60)
def test_default_lookahead_reads_past_queue_batches(catalog: SqlCatalog, table: Table) -> None:
    """With the default budget the readers of later runs read ahead of the consumer far
    past their queue_batches chunks (what bounded them before: the next split's reader
    stopped 8 chunks ahead), here every split but those of the run being delivered."""
    plan = _plan(catalog, splitSize="1", batchSize="1")
    _CountingReader.produced = 0
    items = read_splits(plan.splits(), plan.context, parallelism=2, preserve_order=True,
                        queue_batches=2, reader_factory=_CountingReader)
    first = next(items)
    deadline = time.monotonic() + 30
    # the head's reader blocks on its 2 chunks, the other reads on (old bound: 11 batches)
    while _CountingReader.produced < 150:
        assert time.monotonic() < deadline, f"{_CountingReader.produced} batches produced"
        time.sleep(0.01)
    assert _CountingReader.produced > 2 * (2 + 2) + 2 + 1  # the old chunk-count bound
    rest = [first, *items]
    ids = [i for g in rest for i in g.batch.column("id").to_pylist()]
    assert ids == _pyarrow_ids_in_split_order(plan)


def test_lookahead_must_be_positive(catalog: SqlCatalog) -> None:
    plan = _plan(catalog)
    with pytest.raises(ValueError, match="lookahead must be >= 1 byte, got 0"):
        list(read_splits(plan.splits(), plan.context, lookahead=0))

@pytest.mark.timeout(60)
@pytest.mark.parametrize("preserve_order", [True, False])
def test_backpressure_and_close(catalog: SqlCatalog, table: Table, preserve_order: bool) -> None:
    plan = _plan(catalog, splitSize="1", batchSize="1")  # 200 one-row batches
    _CountingReader.produced = 0

    def factory(context: ReadContext) -> SplitReader:
        return _CountingReader(context)

    items = read_splits(plan.splits(), plan.context, parallelism=2,
                        preserve_order=preserve_order, queue_batches=2, reader_factory=factory,
                        lookahead=1)  # a queue behind the head: one chunk
    first = next(items)
    assert first.batch.num_rows == 1
    # readers run ahead only until the queues are full: wait until both are blocked
    # putting onto a full queue, having produced at least what fills them
    deadline = time.monotonic() + 30
    while not (_CountingReader.produced >= 2 * (2 + 1) and _all_blocked_putting()):
        assert time.monotonic() < deadline, \
            f"readers not blocked on full queues: {_CountingReader.produced} batches produced"
        time.sleep(0.01)
    # per reader: queued batches + one held back + one being put
    assert _CountingReader.produced <= 2 * (2 + 2) + 2 + 1
    items.close()
    deadline = time.monotonic() + 10
    while _reader_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _reader_threads() == []
    assert _CountingReader.produced < 200
