"""The adaptive split size of bounded reads (issue 30): a plan of few large files is cut
into more splits for the engine's readers, on row-group boundaries; an explicit
``splitSize`` and streams keep the configured cut.

Real tables written by PyIceberg in a SQLite catalog; the oracle is PyArrow's read of the
data file (row order included) and PyIceberg's scan.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from icefloe import IcebergSource
from icefloe.enumerator.bounded import is_local
from icefloe.local.engine import SPLITS_PER_READER, target_splits
from icefloe.reader.split_reader import SplitReader
from icefloe.splits import byte_ranges
from icefloe.state import open_store, plan_fingerprint
from tests.helpers.tables import live_data_files, make_catalog

MIB = 1024 * 1024
ROWS = 8_400_000
"""Rows of the big file: a shuffled id and a random double, ~13 bytes a row in Parquet
(~100 MiB, so the 32 MiB minimum allows 3 pieces)."""
ROW_GROUPS = 8


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> SqlCatalog:
    catalog = make_catalog(tmp_path_factory.mktemp("adaptive"))
    catalog.create_namespace("db")
    rng = np.random.default_rng(30)
    big = pa.table({"id": pa.array(rng.permutation(ROWS).astype(np.int64)),
                    "v": pa.array(rng.standard_normal(ROWS))})
    table = catalog.create_table(
        "db.big", schema=big.schema,
        properties={"write.parquet.row-group-limit": str(-(-ROWS // ROW_GROUPS))})
    table.append(big)
    small = catalog.create_table("db.small", schema=big.schema)
    for i in range(3):  # three small appends: files of a few KB
        small.append(big.slice(i * 1000, 1000))
    return catalog


def _big_file(catalog: SqlCatalog) -> tuple[Table, str, int, list[int]]:
    table = catalog.load_table("db.big")
    ((path, data_file),) = live_data_files(table).items()
    offsets = list(data_file.split_offsets or [])
    assert len(offsets) == ROW_GROUPS == pq.ParquetFile(path.removeprefix("file://")) \
        .metadata.num_row_groups
    return table, path, data_file.file_size_in_bytes, offsets


def _file_ids(path: str) -> pa.ChunkedArray:
    """The data file's ids in file order, read by PyArrow."""
    return pq.read_table(path.removeprefix("file://"), columns=["id"]).column("id")


def _ids(batches: list[pa.RecordBatch]) -> pa.ChunkedArray:
    return pa.chunked_array([b.column("id") for b in batches], pa.int64())


def test_few_large_files_are_cut_for_the_readers(catalog: SqlCatalog) -> None:
    table, path, size, offsets = _big_file(catalog)
    assert 96 * MIB < size < 128 * MIB
    plan = IcebergSource("db.big", catalog=catalog, options={"columns": "id"}).bounded_plan()
    assert len(list(plan.splits())) == 1  # the configured 128 MiB: one split

    splits = list(plan.splits(target_splits(2)))  # 8 wanted; 32 MiB at least: 3
    assert target_splits(2) == 2 * SPLITS_PER_READER == 8
    assert len(splits) == size // (32 * MIB) == 3
    assert [s.ordinal for s in splits] == [0, 1, 2]
    assert len({s.split_id for s in splits}) == 3
    assert splits[0].start == 0 and sum(s.length for s in splits) == size
    for split, nxt in itertools.pairwise(splits):
        assert split.start + split.length == nxt.start
    # cut on row-group boundaries, at the starts nearest to thirds of the file (8 row
    # groups: after 3 and 5)
    assert [s.start for s in splits[1:]] == [offsets[3], offsets[5]]
    # every row exactly once, in the file's order (PyArrow), and the rows PyIceberg scans
    reader = SplitReader(plan.context)
    got = _ids([b for split in splits for b in reader.read(split)])
    assert got.equals(_file_ids(path))
    oracle = table.scan(selected_fields=("id",)).to_arrow().column("id").to_numpy()
    assert np.array_equal(np.sort(got.to_numpy()), np.sort(oracle))

    # fewer readers, fewer pieces: 2 splits of 4 row groups
    halves = list(plan.splits(2))
    assert [s.start for s in halves] == [0, offsets[4]]


def test_the_local_engine_cuts_local_files_only(catalog: SqlCatalog) -> None:
    assert is_local("file:///data/a.parquet") and is_local("/data/a.parquet")
    assert not is_local("s3://bucket/a.parquet") and not is_local("gs://b/a.parquet")
    plan = IcebergSource("db.big", catalog=catalog).bounded_plan()
    assert plan.adaptive_cut(8, local_only=True) == plan.adaptive_cut(8) is not None


def test_read_cuts_for_its_threads_and_keeps_the_order(catalog: SqlCatalog) -> None:
    _, path, _, _ = _big_file(catalog)
    source = IcebergSource("db.big", catalog=catalog, options={"columns": "id"})
    assert _ids(list(source.read(parallelism=2))).equals(_file_ids(path))


@pytest.mark.parametrize("split_size", [128 * MIB, 20 * MIB])
def test_an_explicit_split_size_is_honoured_exactly(catalog: SqlCatalog,
                                                    split_size: int) -> None:
    _, _, size, offsets = _big_file(catalog)
    plan = IcebergSource("db.big", catalog=catalog,
                         options={"splitSize": str(split_size)}).bounded_plan()
    assert plan.adaptive_cut(8) is None
    splits = list(plan.splits(8))
    assert [(s.start, s.length) for s in splits] == byte_ranges(size, offsets, split_size) \
        == [(s.start, s.length) for s in plan.splits()]


def test_small_files_are_never_cut(catalog: SqlCatalog) -> None:
    plan = IcebergSource("db.small", catalog=catalog).bounded_plan()
    # 3 splits, fewer than 8, but each file under 32 MiB: no cut (and no second planning)
    assert plan.adaptive_cut(8) is None
    assert list(plan.splits(8)) == list(plan.splits())
    assert plan.adaptive_cut(3) is None  # as many splits as wanted: the configured size


def test_the_cut_is_deterministic(catalog: SqlCatalog) -> None:
    def cut() -> list[tuple[str, int, int, int]]:
        plan = IcebergSource("db.big", catalog=catalog).bounded_plan()
        return [(s.split_id, s.start, s.length, s.ordinal) for s in plan.splits(8)]

    first = cut()
    assert len(first) == 3 and cut() == first
    plan = IcebergSource("db.big", catalog=catalog).bounded_plan()
    assert list(plan.splits(8)) == list(plan.splits(8))


def test_a_stream_keeps_the_configured_size_across_a_restart(catalog: SqlCatalog,
                                                             tmp_path: Path) -> None:
    """A stream's splits are in its checkpoint (by ordinal and id): they never depend on the
    parallelism, so a restore with other threads re-cuts nothing."""
    _, path, size, offsets = _big_file(catalog)
    ckpt = str(tmp_path / "ckpt")
    options = {"startingVersion": "earliest", "columns": "id", "pollIntervalMs": "50"}
    src = IcebergSource("db.big", catalog=catalog, options=options)
    whole = [s.split_id for s in IcebergSource(
        "db.big", catalog=catalog, options={"columns": "id"}).bounded_plan().splits()]
    stream = src.stream(checkpoint=ckpt, parallelism=1, checkpoint_interval_s=0)
    stream.start()
    acked: list[pa.RecordBatch] = []
    seen: set[str] = set()
    for n, item in enumerate(stream):
        acked.append(item.batch)
        seen.add(item.split.split_id)
        item.ack()
        if n == 4:
            break
    stream.store = None  # a crash: what survives is what the acks wrote
    stream.stop()
    shown = open_store(ckpt).read()
    assert shown is not None and dict(shown.offsets)
    assert shown.plan_fingerprint == plan_fingerprint(None, True, 128 * MIB)

    again: list[pa.RecordBatch] = []
    with IcebergSource("db.big", catalog=catalog, options=options).stream(
            checkpoint=ckpt, parallelism=4, available_now=True,
            checkpoint_interval_s=0) as restored:
        for item in restored:
            again.append(item.batch)
            seen.add(item.split.split_id)
            item.ack()
    assert seen == set(whole) and len(whole) == len(byte_ranges(size, offsets, 128 * MIB))
    assert _ids(acked + again).equals(_file_ids(path))  # no row twice, none lost


def _catalog_opts(catalog: SqlCatalog) -> dict[str, str]:
    props = catalog.properties
    return {"catalog": "test", "catalog.type": "sql", "catalog.uri": props["uri"],
            "catalog.warehouse": props["warehouse"]}


@pytest.mark.parametrize("given", [{}, {"splitSize": str(128 * MIB)}])
def test_spark_cuts_for_its_partitions(catalog: SqlCatalog, given: dict[str, str]) -> None:
    """Spark's planner cuts for ``minPartitions`` (``defaultParallelism``), as Iceberg's
    Spark reader; an explicit ``splitSize`` is kept. Planning only: no Spark session."""
    pytest.importorskip("pyspark")
    from icefloe.spark.planning import SparkPlan
    from icefloe.splits import deserialize_split

    _, path, size, offsets = _big_file(catalog)
    plan = SparkPlan("db.big", {**_catalog_opts(catalog), "minPartitions": "8",
                                "columns": "id", **given})
    tasks = [[deserialize_split(b) for b in task] for task in plan.partitions()]
    splits = [s for task in tasks for s in task]
    expected = [(0, size)] if given else \
        [(0, offsets[3]), (offsets[3], offsets[5] - offsets[3]), (offsets[5], size - offsets[5])]
    assert [(s.start, s.length) for s in splits] == expected
    assert len(tasks) == len(splits)  # a split a task: fewer splits than minPartitions
    reader = SplitReader(plan.bounded().context)
    assert _ids([b for s in splits for b in reader.read(s)]).equals(_file_ids(path))


def test_ray_cuts_for_its_read_tasks(catalog: SqlCatalog) -> None:
    """Ray's datasource cuts for the parallelism Ray asks of it. Planning, and the read
    tasks run here: no Ray cluster."""
    pytest.importorskip("ray.data")
    from icefloe.ray.datasource import IcefloeDatasource

    _, path, _, _ = _big_file(catalog)
    tasks = IcefloeDatasource("db.big", catalog, {"columns": "id"}).get_read_tasks(8)
    assert len(tasks) == 3
    blocks = [block for task in tasks for block in task()]
    got = pa.chunked_array([c for b in blocks for c in b.column("id").chunks], pa.int64())
    assert got.equals(_file_ids(path))
    explicit = IcefloeDatasource("db.big", catalog, {"splitSize": str(128 * MIB)})
    assert len(explicit.get_read_tasks(8)) == 1


def _manifest_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every manifest list and manifest the planner opens, from here on."""
    import pyiceberg.io.pyarrow as pio

    opened: list[str] = []
    new_input = pio.PyArrowFileIO.new_input

    def counted(self: pio.PyArrowFileIO, location: str) -> pio.PyArrowFile:
        if location.endswith(".avro"):
            opened.append(location)
        return new_input(self, location)

    monkeypatch.setattr(pio.PyArrowFileIO, "new_input", counted)
    return opened


def test_a_read_the_cut_leaves_as_it_is_plans_once(catalog: SqlCatalog,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Small files no cut changes: the read's manifests are read once, as without a target
    (on an object store each read is round trips); a cut plan reads them for the decision
    and once more for the cut, and a second call reuses the decision."""
    source = IcebergSource("db.small", catalog=catalog)
    opened = _manifest_reads(monkeypatch)
    plan = source.bounded_plan()
    plain = list(plan.splits())
    once = list(opened)
    assert once and len(plain) == 3
    opened.clear()
    plan = source.bounded_plan()
    assert list(plan.splits(target_splits(2), local_only=True)) == plain
    assert opened == once  # planned once: the decision came from the same planning
    opened.clear()
    assert list(plan.splits(target_splits(2), local_only=True)) == plain
    assert opened == once
    opened.clear()
    big = IcebergSource("db.big", catalog=catalog).bounded_plan()
    cut = list(big.splits(target_splits(2), local_only=True))
    assert len(cut) == 3 and sorted(opened) == sorted(opened[:len(opened) // 2] * 2)
