"""Runs in the local engine: many small splits claimed together, chunked hand-off, and the
two ways of reading a run of small files (``SplitReader.read_run``), against PyIceberg's
scans.

Every test runs each way of reading small splits: split by split; runs read file by file
with small files processed in groups (the default, :mod:`icefloe.reader.groups`); runs read
through one ``pyarrow.dataset`` scan.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import FloatType, IntegerType, LongType, NestedField, StringType

from icefloe import DataFileError, FileSplit, IcebergSource
from icefloe.enumerator.bounded import BoundedPlan
from icefloe.local import engine
from icefloe.local.assigner import RunAssigner
from icefloe.local.engine import SplitBatch, read_splits
from icefloe.local.feeder import Feeder
from icefloe.local.merger import Merger
from icefloe.local.stream import LocalStream
from icefloe.reader import ReadContext, SplitReader
from icefloe.reader.process import BatchProcessor
from icefloe.reader.runs import can_batch
from icefloe.retry import RetryPolicy
from tests.conftest import assert_same_rows
from tests.helpers.tables import (
    add_equality_deletes,
    add_position_deletes,
    make_catalog,
    make_table,
)

V1 = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "kind", StringType(), required=False),
    NestedField(3, "n", IntegerType(), required=False),
    NestedField(4, "value", FloatType(), required=False),
)


def _v1_rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "kind": [f"k{i % 3}" for i in ids], "n": [i % 7 for i in ids],
                     "value": [i / 4 for i in ids]}, schema=schema_to_pyarrow(V1))


def _v2_rows(table: Table, start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "category": [f"k{i % 3}" for i in ids],
                     "n": [i % 7 for i in ids], "extra": [None if i % 2 else f"x{i}" for i in ids]},
                    schema=schema_to_pyarrow(table.schema()))


def _first_id(path: str) -> int:
    return int(pq.read_table(path.removeprefix("file://"), columns=["id"]).column("id")[0].as_py())


def _build(catalog: SqlCatalog, identifier: str, equality: bool) -> tuple[Table, int, int]:
    """4 small files of schema v1; ``kind`` renamed ``category``, ``n`` promoted int -> long,
    ``extra`` added, ``value`` dropped; 4 files of schema v2 (snapshot ``all_appends``);
    ids 10, 13, 19, 52, 54 deleted by position and ids 1, 25, 61, 62, 79 by an equality delete
    (or, with ``equality=False``, by position too); 5 more v2 files (snapshot ``final``)."""
    table = make_table(catalog, identifier=identifier, schema=V1)
    for i in range(4):
        table.append(_v1_rows(i * 10, 10))
    with table.update_schema() as update:
        update.rename_column("kind", "category")
        update.update_column("n", LongType())
        update.add_column("extra", StringType())
        update.delete_column("value")
    for i in range(4, 8):
        table.append(_v2_rows(table, i * 10, 10))
    head = table.current_snapshot()
    assert head is not None
    all_appends = head.snapshot_id
    files = {_first_id(t.file.file_path): t.file.file_path for t in table.scan().plan_files()}
    by_position = [10, 13, 19, 52, 54] + ([] if equality else list(EQUALITY_DELETED))
    deletes: dict[str, list[int]] = {}
    for i in by_position:
        deletes.setdefault(files[i // 10 * 10], []).append(i % 10)
    add_position_deletes(table, deletes)
    if equality:
        add_equality_deletes(table, pa.table({"id": pa.array(EQUALITY_DELETED, pa.int64())}),
                             ["id"])
    for i in range(8, 13):
        table.append(_v2_rows(table, i * 10, 10))
    head = table.current_snapshot()
    assert head is not None
    return table, all_appends, head.snapshot_id


EQUALITY_DELETED = [1, 25, 61, 62, 79]


class Evolved:
    """A table of small files written before and after a schema change, then deleted from
    (see :func:`_build`), and its twin with the equality delete done by position, which
    PyIceberg can scan (PyIceberg 0.12 refuses equality deletes): the oracle."""

    def __init__(self, catalog: SqlCatalog) -> None:
        self.catalog = catalog
        self.table, self.all_appends, self.final = _build(catalog, "db.evolved", True)
        self.twin, twin_all, twin_final = _build(catalog, "db.twin", False)
        self.twin_of = {self.all_appends: twin_all, self.final: twin_final}
        self._per_file: dict[tuple[int, str | None], dict[int, pa.Table]] = {}

    def plan(self, snapshot: int, **options: str) -> BoundedPlan:
        return IcebergSource("db.evolved", catalog=self.catalog,
                             options={"snapshotId": str(snapshot), **options}).bounded_plan()

    def expected(self, snapshot: int, columns: Sequence[str] | None = None,
                 row_filter: str | None = None) -> pa.Table:
        """PyIceberg's scan of the twin at the same point."""
        scan_args: dict[str, Any] = {"snapshot_id": self.twin_of[snapshot]}
        if columns is not None:
            scan_args["selected_fields"] = tuple(columns)
        if row_filter is not None:
            scan_args["row_filter"] = row_filter
        theirs = self.twin.scan(**scan_args).to_arrow()  # columns in the table's order
        return theirs if columns is None else theirs.select(list(columns))

    def per_file(self, snapshot: int, row_filter: str | None = None) -> dict[int, pa.Table]:
        """PyIceberg's rows of each data file of the twin at the same point (its deletes
        and ``row_filter`` applied, in file order; every column), by the file's first id:
        the files of both tables hold the same ids, 10 a file, in id order."""
        key = (snapshot, row_filter)
        cached = self._per_file.get(key)
        if cached is not None:
            return cached
        scan = self.twin.scan(snapshot_id=self.twin_of[snapshot],
                              **({} if row_filter is None else {"row_filter": row_filter}))
        out = {}
        for task in scan.plan_files():
            out[_first_id(task.file.file_path)] = ArrowScan(
                self.twin.metadata, self.twin.io, scan.projection(), scan.row_filter,
                scan.case_sensitive).to_table([task])
        self._per_file[key] = out
        return out

    def by_split(self, plan: BoundedPlan, snapshot: int, splits: Sequence[FileSplit],
                 row_filter: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """PyIceberg's rows of each split (its file's rows from ``split.resume_rows`` on)
        as icefloe should deliver them: the plan's columns and metadata columns, whose
        values come from the writer (``_pos``: the id's place in its file), not icefloe."""
        context = plan.context
        names = [f.name for f in context.projected_schema.fields]
        by_file = self.per_file(snapshot, row_filter)
        out: dict[str, list[dict[str, Any]]] = {}
        for split in splits:
            first = _first_id(split.file_path)
            theirs = by_file.get(first)
            rows = []
            for row in [] if theirs is None else theirs.to_pylist():
                pos = row["id"] - first
                if pos < split.resume_rows:
                    continue
                mine = {name: row[name] for name in names}
                for name in context.metadata_columns:
                    mine[name] = {"_pos": pos, "_file": split.file_path,
                                  "_snapshot_id": split.snapshot_id}[name]
                rows.append(mine)
            out[split.split_id] = rows
        return out


@pytest.fixture(scope="module")
def evolved(tmp_path_factory: pytest.TempPathFactory) -> Evolved:
    return Evolved(make_catalog(tmp_path_factory.mktemp("runs")))


_MODES = {"split-by-split": (False, False), "groups": (True, False), "scan": (True, True)}


@pytest.fixture(params=list(_MODES))
def reads_runs(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Each way of reading small splits (class attributes of the reader, restored
    afterwards): one by one; runs read file by file and processed in groups (the
    default); runs read through one dataset scan. True when runs go through ``read_run``."""
    before = SplitReader.batch_runs, SplitReader.scan_runs
    SplitReader.batch_runs, SplitReader.scan_runs = _MODES[request.param]
    yield SplitReader.batch_runs
    SplitReader.batch_runs, SplitReader.scan_runs = before


@pytest.fixture(params=[False, True], ids=["groups", "scan"])
def run_reader(request: pytest.FixtureRequest) -> Iterator[None]:
    """Both implementations of ``SplitReader.read_run``."""
    before = SplitReader.scan_runs
    SplitReader.scan_runs = request.param
    yield
    SplitReader.scan_runs = before


class _Recording(SplitReader):
    """A real reader that records the runs it scans and the splits it reads one by one."""

    runs: ClassVar[list[list[str]]] = []
    singles: ClassVar[list[tuple[str, int]]] = []
    lock = threading.Lock()

    def read_run(self, splits: Sequence[FileSplit]) -> Iterator[tuple[int, pa.RecordBatch, int]]:
        with _Recording.lock:
            _Recording.runs.append([s.split_id for s in splits])
        return super().read_run(splits)

    def read_progress(self, split: FileSplit, use_threads: bool | None = None
                      ) -> Iterator[tuple[pa.RecordBatch, int]]:
        with _Recording.lock:
            _Recording.singles.append((split.split_id, split.resume_rows))
        return super().read_progress(split, use_threads)


_FED = threading.Event()


def _fed(splits: Iterable[FileSplit]) -> Iterator[FileSplit]:
    """``splits`` for :func:`read_splits`; :func:`_late` readers wait until the engine's
    feeder thread has asked this generator past its last split (has fed every one)."""
    _FED.clear()

    def feed() -> Iterator[FileSplit]:
        yield from splits
        _FED.set()
    return feed()


def _late(cls: type[SplitReader]) -> Callable[[ReadContext], SplitReader]:
    """A factory of ``cls`` readers that start once the engine's feeder has fed every split
    of these small plans (given through :func:`_fed`), so their runs are as long as the
    claims' shares of the fed splits, whatever the thread timing (a fixed sleep was not
    enough on a loaded CI machine: a run shorter than a scan's minimum was read split by
    split)."""
    def factory(context: ReadContext) -> SplitReader:
        if not _FED.wait(60):
            raise AssertionError("the feeder did not feed every split within 60 s")
        return cls(context)
    return factory


_recording = _late(_Recording)


def _items(plan: BoundedPlan, parallelism: int = 2, preserve_order: bool = True,
           **kwargs: Any) -> list[SplitBatch]:
    _Recording.runs, _Recording.singles = [], []
    kwargs.setdefault("reader_factory", _recording)
    return list(read_splits(_fed(plan.splits()), plan.context, parallelism, preserve_order,
                            **kwargs))


def _ids_in(theirs: pa.Table, splits: Sequence[FileSplit]) -> list[dict[str, Any]]:
    """The rows of ``theirs`` (a PyIceberg scan) in the files of ``splits``, split by split
    in id (file) order: each file holds the 10 ids from its first one."""
    rows = sorted(theirs.to_pylist(), key=lambda row: row["id"])
    firsts = [_first_id(s.file_path) for s in splits]
    return [row for first in firsts for row in rows if first <= row["id"] < first + 10]


def _by_split(items: list[SplitBatch]) -> dict[str, list[SplitBatch]]:
    out: dict[str, list[SplitBatch]] = {}
    for item in items:
        out.setdefault(item.split.split_id, []).append(item)
    return out


@pytest.mark.parametrize("parallelism", [1, 3])
@pytest.mark.parametrize("preserve_order", [True, False])
@pytest.mark.parametrize("options", [
    {},
    {"columns": "category,id"},
    {"columns": "n,extra", "filter": "n >= 3"},
    {"filter": "category = 'k1' OR extra IS NULL", "batchSize": "3"},
])
def test_mixed_schemas_match_pyiceberg(evolved: Evolved, reads_runs: bool, parallelism: int,
                                       preserve_order: bool, options: dict[str, str]) -> None:
    for snapshot in (evolved.all_appends, evolved.final):
        plan = evolved.plan(snapshot, **options)
        items = _items(plan, parallelism, preserve_order)
        got = pa.Table.from_batches([i.batch for i in items], schema=plan.context.arrow_schema)
        columns = options["columns"].split(",") if "columns" in options else None
        assert_same_rows(got, evolved.expected(snapshot, columns, options.get("filter")))
        assert all(i.batch.num_rows <= plan.context.batch_size for i in items)
        if snapshot == evolved.all_appends and plan.context.batch_size >= 10:
            # 8 batchable splits of 10 records, runs of 4 queue_batches * batchSize records
            assert bool(_Recording.runs) == reads_runs


@pytest.mark.parametrize("options", [{}, {"columns": "id,extra", "batchSize": "3"},
                                     {"filter": "n > 2", "metadataColumns": "_pos,_file"}])
def test_run_scan_across_a_schema_change(evolved: Evolved, run_reader: None,
                                         options: dict[str, str]) -> None:
    """One run over files of both schemas (a scan would read the older ones with the newer
    schema, nulls for the renamed column): the same batches as split by split."""
    plan = evolved.plan(evolved.all_appends, **options)
    splits = list(plan.splits())
    assert len(splits) == 8 and all(can_batch(s) for s in splits)
    reader = SplitReader(plan.context)
    got: dict[int, list[pa.RecordBatch]] = {}
    consumed: dict[int, list[int]] = {}
    order = []
    for index, batch, offset in reader.read_run(splits):
        order.append(index)
        got.setdefault(index, []).append(batch)
        consumed.setdefault(index, []).append(offset)
    assert order == sorted(order)
    want = evolved.by_split(plan, evolved.all_appends, splits, options.get("filter"))
    for index, split in enumerate(splits):
        table = pa.Table.from_batches(got.get(index, []), schema=plan.context.arrow_schema)
        assert table.to_pylist() == want[split.split_id]
        assert consumed[index][-1] == split.record_count


def test_run_scan_raises_for_a_file_not_as_planned(evolved: Evolved, run_reader: None,
                                                    tmp_path: Path) -> None:
    """A file with fewer records than its split says is an error, not a silent gap."""
    plan = evolved.plan(evolved.all_appends)
    splits = list(plan.splits())
    short = tmp_path / "short.parquet"
    path = splits[2].file_path.removeprefix("file://")
    pq.write_table(pq.read_table(path).slice(0, 4), short)
    splits[2] = dataclasses.replace(splits[2], file_path=f"file://{short}",
                                    length=short.stat().st_size,
                                    file_size=short.stat().st_size)
    reader = SplitReader(plan.context)
    with pytest.raises(DataFileError, match="returned 4 of its 10 records"):
        list(reader.read_run(splits))


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_items_equal_split_by_split_reads(evolved: Evolved, reads_runs: bool,
                                          parallelism: int) -> None:
    """Each split's rows as PyIceberg reads its file, metadata columns included; ordered
    delivery follows split order; each split ends with exactly one ``last`` item whose
    offset is the split's record count."""
    plan = evolved.plan(evolved.final, metadataColumns="_pos,_file,_snapshot_id",
                        batchSize="4")
    splits = list(plan.splits())
    items = _items(plan, parallelism)
    assert [i.split.split_id for i in items] == [
        s.split_id for s in splits for _ in range(len(_by_split(items)[s.split_id]))]
    want = evolved.by_split(plan, evolved.final, splits)
    for split in splits:
        mine = _by_split(items)[split.split_id]
        assert [i.last for i in mine] == [False] * (len(mine) - 1) + [True]
        offsets = [i.consumed for i in mine]
        assert offsets == sorted(offsets) and offsets[-1] == split.record_count
        rows = pa.Table.from_batches([i.batch for i in mine], schema=plan.context.arrow_schema)
        assert rows.to_pylist() == want[split.split_id]


def test_every_offset_resumes_the_rest(evolved: Evolved, reads_runs: bool) -> None:
    """``(split, consumed)`` of every item resumes exactly after it (what checkpoints keep)."""
    plan = evolved.plan(evolved.final, batchSize="3", metadataColumns="_pos")
    items = _items(plan, parallelism=2)
    reader = SplitReader(plan.context)
    want = evolved.by_split(plan, evolved.final, list(plan.splits()))
    for split_items in _by_split(items).values():
        split = split_items[0].split
        positions = [p for i in split_items for p in i.batch.column("_pos").to_pylist()]
        assert positions == [row["_pos"] for row in want[split.split_id]]  # PyIceberg's
        seen = 0
        for item in split_items:
            seen += item.batch.num_rows
            rest = [p for b in reader.read(split.with_position(item.consumed))
                    for p in b.column("_pos").to_pylist()]
            assert rest == positions[seen:]


def test_deletes_and_resumes_keep_the_per_split_path(evolved: Evolved, reads_runs: bool) -> None:
    plan = evolved.plan(evolved.final)
    splits = list(plan.splits())
    resumed = [s.with_position(2) if i % 3 == 0 else s for i, s in enumerate(splits)]
    _Recording.runs, _Recording.singles = [], []
    items = list(read_splits(_fed(resumed), plan.context, 2, True, reader_factory=_recording))
    scanned = {sid for run in _Recording.runs for sid in run}
    for split in resumed:
        if split.delete_files or split.resume_rows:
            assert split.split_id not in scanned
            assert (split.split_id, split.resume_rows) in _Recording.singles
    want = evolved.by_split(plan, evolved.final, resumed)  # resumed: from record 2 on
    for split in resumed:
        got = pa.Table.from_batches(
            [i.batch for i in _by_split(items).get(split.split_id, [])],
            schema=plan.context.arrow_schema)
        assert got.to_pylist() == want[split.split_id]


class _FailingOnce(SplitReader):
    """Fails once, transiently, in the middle of one split (after its first batch)."""

    victim = ""
    failed = False
    where = ""

    def read_progress(self, split: FileSplit, use_threads: bool | None = None
                      ) -> Iterator[tuple[pa.RecordBatch, int]]:
        for n, item in enumerate(super().read_progress(split, use_threads)):
            yield item
            if split.split_id == _FailingOnce.victim and not _FailingOnce.failed and n == 0:
                _FailingOnce.failed, _FailingOnce.where = True, "split"
                raise ConnectionResetError("connection reset while reading")

    def read_run(self, splits: Sequence[FileSplit]) -> Iterator[tuple[int, pa.RecordBatch, int]]:
        for index, batch, consumed in super().read_run(splits):
            yield index, batch, consumed
            if splits[index].split_id == _FailingOnce.victim and not _FailingOnce.failed:
                _FailingOnce.failed, _FailingOnce.where = True, "scan"
                raise OSError("scan interrupted")


@pytest.mark.parametrize("preserve_order", [True, False])
def test_failure_mid_run_resumes_the_split_from_its_offset(
        evolved: Evolved, reads_runs: bool, preserve_order: bool) -> None:
    plan = evolved.plan(evolved.all_appends, batchSize="4")
    splits = list(plan.splits())
    _FailingOnce.victim, _FailingOnce.failed = splits[5].split_id, False
    items = list(read_splits(_fed(plan.splits()), plan.context, 2, preserve_order,
                             queue_batches=20, reader_factory=_late(_FailingOnce),
                             retry=RetryPolicy(max_attempts=2, backoff_ms=0)))
    assert _FailingOnce.where == ("scan" if reads_runs else "split")
    want = evolved.by_split(plan, evolved.all_appends, splits)
    per_split = _by_split(items)
    for split in splits:
        got = pa.Table.from_batches([i.batch for i in per_split[split.split_id]],
                                    schema=plan.context.arrow_schema)
        assert got.to_pylist() == want[split.split_id]  # no row twice, none lost
    if preserve_order:
        assert [i.split.split_id for i in items] == [
            s.split_id for s in splits for _ in per_split[s.split_id]]


def test_failure_without_retry(evolved: Evolved, reads_runs: bool) -> None:
    """Without retries a split's transient error reaches the consumer after every earlier
    split; a failed scan is not a failed split: it is read on split by split from there."""
    plan = evolved.plan(evolved.all_appends, batchSize="4")
    splits = list(plan.splits())
    _FailingOnce.victim, _FailingOnce.failed = splits[5].split_id, False
    got: list[SplitBatch] = []
    items = read_splits(_fed(plan.splits()), plan.context, 2, True, queue_batches=20,
                        reader_factory=_late(_FailingOnce))
    if reads_runs:
        got = list(items)
        assert _FailingOnce.where == "scan"
        assert [i.split.split_id for i in got if i.last] == [s.split_id for s in splits]
        return
    with pytest.raises(ConnectionResetError):  # NO_RETRY: the error itself
        for item in items:
            got.append(item)
    assert [i.split.split_id for i in got if i.last] == [s.split_id for s in splits[:5]]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("preserve_order", [True, False])
@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_broken_file_in_a_run_is_a_typed_error(tmp_path: Path, reads_runs: bool,
                                               preserve_order: bool, damage: str) -> None:
    catalog = make_catalog(tmp_path)
    _, all_appends, _ = _build(catalog, "db.evolved", equality=True)
    plan = IcebergSource("db.evolved", catalog=catalog,
                         options={"snapshotId": str(all_appends)}).bounded_plan()
    splits = list(plan.splits())
    broken = splits[4]
    path = broken.file_path.removeprefix("file://")
    if damage == "missing":
        os.remove(path)
    else:
        with open(path, "r+b") as f:
            f.truncate(100)
    got: list[SplitBatch] = []
    with pytest.raises(DataFileError) as info:
        for item in read_splits(_fed(plan.splits()), plan.context, 2, preserve_order,
                                reader_factory=_late(SplitReader),
                                retry=RetryPolicy(max_attempts=3, backoff_ms=0)):
            got.append(item)
    assert broken.file_path in str(info.value)
    if preserve_order:  # everything before the broken file was delivered, in order
        assert [i.split.split_id for i in got if i.last] == [s.split_id for s in splits[:4]]


@pytest.mark.timeout(60)
def test_a_run_never_waits_for_more_splits(evolved: Evolved, reads_runs: bool) -> None:
    """A source that blocks (a stream between snapshots) does not hold back what it gave."""
    plan = evolved.plan(evolved.all_appends)
    splits = list(plan.splits())
    release = threading.Event()

    def source() -> Iterator[FileSplit]:
        yield from splits[:6]
        release.wait(30)
        yield from splits[6:]

    items = read_splits(source(), plan.context, parallelism=2)
    first = []
    while len([i for i in first if i.last]) < 6:
        first.append(next(items))
    assert not release.is_set()
    release.set()
    rest = list(items)
    assert {i.split.split_id for i in first + rest if i.last} == {s.split_id for s in splits}


def test_runs_are_bounded(evolved: Evolved, reads_runs: bool) -> None:
    """A run holds at most ``queue_batches * batchSize`` records (memory; of local files
    also at most ``LOCAL_RUN_RECORDS``, far above these) and ``run_splits`` splits."""
    plan = evolved.plan(evolved.all_appends, batchSize="10")
    items = _items(plan, parallelism=1, queue_batches=5, run_splits=5)
    assert len([i for i in items if i.last]) == 8
    by_id = {s.split_id: s for s in plan.splits()}
    for run in _Recording.runs:
        assert len(run) <= 5
        assert sum(by_id[sid].record_count for sid in run) <= 5 * 10
    with pytest.raises(ValueError, match="run_splits"):
        list(read_splits(plan.splits(), plan.context, run_splits=0))


def test_local_runs_hold_at_most_local_run_records(evolved: Evolved,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine caps runs of local files at ``LOCAL_RUN_RECORDS`` (here 40: runs of 4
    files of 10 records, read as runs) below ``queue_batches * batchSize`` (100), and
    reads the same rows as PyIceberg."""
    monkeypatch.setattr(engine, "LOCAL_RUN_RECORDS", 40)
    plan = evolved.plan(evolved.all_appends, batchSize="20")
    items = _items(plan, parallelism=1, queue_batches=5)
    by_id = {s.split_id: s for s in plan.splits()}
    assert [len(run) for run in _Recording.runs] == [4, 4]
    assert all(sum(by_id[sid].record_count for sid in run) == 40 for run in _Recording.runs)
    got = pa.Table.from_batches([i.batch for i in items], schema=plan.context.arrow_schema)
    assert_same_rows(got, evolved.expected(evolved.all_appends, None, None))


@pytest.mark.parametrize("remote", [False, True], ids=["local", "object-store"])
def test_local_runs_are_shorter(evolved: Evolved, remote: bool) -> None:
    """Runs of files on the local disk hold at most ``local_run_records`` records; runs of
    files elsewhere (an object store's, where a run is also what is fetched ahead) keep
    ``run_records``; both at most ``run_splits`` splits, every split claimed once, in
    order."""
    splits = list(evolved.plan(evolved.all_appends).splits())  # 8 files of 10 records
    if remote:
        splits = [dataclasses.replace(s, file_path=f"s3://bucket/{i}.parquet")
                  for i, s in enumerate(splits)]
    stop = threading.Event()
    feeder = Feeder(splits, 64, stop)
    feeder.start()
    deadline = time.monotonic() + 30
    while feeder.waiting() < len(splits) + 1:  # every split and the end fed
        assert time.monotonic() < deadline, "the feeder did not feed the splits"
        time.sleep(0.01)
    assigner = RunAssigner(feeder, Merger(True, 1, 5, stop, 1 << 20), parallelism=1,
                           run_splits=5, run_records=50, local_run_records=20)
    runs = []
    while (claimed := assigner.claim()) is not None:
        runs.append(claimed[0])
    stop.set()
    assert [s.split_id for run in runs for s in run] == [s.split_id for s in splits]
    assert [len(run) for run in runs] == ([5, 3] if remote else [2, 2, 2, 2])


@pytest.mark.parametrize("acked", [3, 9, 14])
def test_stream_restart_after_acks_in_the_middle_of_runs(tmp_path: Path, reads_runs: bool,
                                                         acked: int) -> None:
    """Checkpointed (split, offset) positions of a run's items: nothing lost on restart and
    nothing acknowledged read again."""
    catalog = make_catalog(tmp_path)
    table = make_table(catalog, identifier="db.evolved", schema=V1)
    for i in range(8):
        table.append(_v1_rows(i * 10, 10))
    ckpt = str(tmp_path / "ckpt")
    options = {"pollIntervalMs": "50", "batchSize": "4"}
    src = IcebergSource("db.evolved", catalog=catalog, options=options)
    stream = src.stream(checkpoint=ckpt, parallelism=2, checkpoint_interval_s=0)
    stream.start()
    acked_ids: list[int] = []
    for n, item in enumerate(stream):
        if n == acked:
            break
        acked_ids.extend(item.batch.column("id").to_pylist())
        item.ack()
    _crash(stream)
    again: list[int] = []
    with IcebergSource("db.evolved", catalog=catalog, options=options).stream(
            checkpoint=ckpt, available_now=True, checkpoint_interval_s=0) as restarted:
        for item in restarted:
            again.extend(item.batch.column("id").to_pylist())
            item.ack()
    assert sorted(acked_ids + again) == list(range(80))


def _crash(stream: LocalStream) -> None:
    """Stop a stream without writing its final checkpoint: what survives is exactly what
    the acks wrote, as after a crash."""
    stream.store = None
    stream.stop()




def test_groups_process_small_files_together(evolved: Evolved,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of small files of one schema is converted in one go (not file by file), and
    each file still gets its own item with its own rows and offset, as PyIceberg reads it."""
    plan = evolved.plan(evolved.all_appends)  # 8 files of 10 rows; two schemas
    splits = list(plan.splits())
    reader = SplitReader(plan.context)
    calls: list[int] = []  # rows of each batch converted by the fast path
    real = BatchProcessor.fast

    def counted(self: BatchProcessor, raw: pa.RecordBatch, plan: Any) -> pa.RecordBatch:
        calls.append(raw.num_rows)
        return real(self, raw, plan)

    monkeypatch.setattr(BatchProcessor, "fast", counted)
    items = list(reader.read_run(splits))
    assert [i for i, _, _ in items] == list(range(len(splits)))  # one item per small file
    assert [c for _, _, c in items] == [s.record_count for s in splits]
    # the first file of each schema teaches the reader its fast path; the rest are grouped
    assert len(calls) < len(splits) and max(calls) > 10
    got = pa.Table.from_batches([b for _, b, _ in items], schema=plan.context.arrow_schema)
    assert_same_rows(got, evolved.expected(evolved.all_appends))
    want = evolved.by_split(plan, evolved.all_appends, splits)
    for (_, batch, _), split in zip(items, splits, strict=True):
        assert batch.to_pylist() == want[split.split_id]


def test_read_many_matches_split_by_split(evolved: Evolved, reads_runs: bool) -> None:
    """The one-thread read of Spark and Ray tasks: each split's rows in split order, as
    PyIceberg reads its file, deletes, filters and metadata columns included; small files
    go through runs."""
    for options in ({}, {"filter": "n >= 3", "metadataColumns": "_pos,_file"}):
        for snapshot in (evolved.all_appends, evolved.final):
            plan = evolved.plan(snapshot, **options)
            splits = list(plan.splits())
            reader = _Recording(plan.context)
            _Recording.runs, _Recording.singles = [], []
            got = pa.Table.from_batches(list(reader.read_many(splits)),
                                        schema=plan.context.arrow_schema)
            want = evolved.by_split(plan, snapshot, splits, options.get("filter"))
            assert got.to_pylist() == [row for s in splits for row in want[s.split_id]]
            data = [f.name for f in got.schema if not f.name.startswith("_")]
            assert_same_rows(got.select(data),
                             evolved.expected(snapshot, data, options.get("filter")))
            if snapshot == evolved.all_appends:
                assert bool(_Recording.runs) == reads_runs


def test_read_many_finishes_a_failed_run_split_by_split(evolved: Evolved) -> None:
    """A run that fails mid-way goes on split by split from where it stopped."""
    plan = evolved.plan(evolved.all_appends, batchSize="4")
    splits = list(plan.splits())
    _FailingOnce.victim, _FailingOnce.failed = splits[5].split_id, False
    reader = _FailingOnce(plan.context)
    got = pa.Table.from_batches(list(reader.read_many(splits)),
                                schema=plan.context.arrow_schema)
    assert _FailingOnce.where == "scan"
    want = evolved.by_split(plan, evolved.all_appends, splits)
    assert got.to_pylist() == [row for s in splits for row in want[s.split_id]]


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_read_many_raises_the_typed_error_of_a_broken_file(tmp_path: Path, damage: str) -> None:
    catalog = make_catalog(tmp_path)
    _, all_appends, _ = _build(catalog, "db.evolved", equality=True)
    plan = IcebergSource("db.evolved", catalog=catalog,
                         options={"snapshotId": str(all_appends)}).bounded_plan()
    splits = list(plan.splits())
    # the rows before the broken file, as PyIceberg scans the table (before the damage)
    want = _ids_in(catalog.load_table("db.evolved").scan(snapshot_id=all_appends).to_arrow(),
                   splits[:4])
    path = splits[4].file_path.removeprefix("file://")
    if damage == "missing":
        os.remove(path)
    else:
        with open(path, "r+b") as f:
            f.truncate(100)
    got: list[pa.RecordBatch] = []
    with pytest.raises(DataFileError) as info:
        for batch in SplitReader(plan.context).read_many(splits):
            got.append(batch)
    assert splits[4].file_path in str(info.value)
    got_rows = pa.Table.from_batches(got, schema=plan.context.arrow_schema).to_pylist()
    assert got_rows == want
