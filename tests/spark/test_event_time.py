"""Event time on Spark: a withWatermark window count over the initial snapshot equals the
batch query's with watermarkColumn, and drops rows without it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from icefloe.splits import deserialize_split
from tests.helpers.event_time import HOURS, event_table, event_time_order
from tests.helpers.tables import make_catalog
from tests.spark.test_streaming import catalog_opts

pytestmark = pytest.mark.spark


def windowed_counts(spark, catalog, ckpt: Path, **extra: str) -> tuple[dict[str, int], int]:
    """The final count per 1-hour window of a streaming query with a 10-minute watermark
    (update mode: the last update of each window), and its micro-batches with data."""
    from pyspark.sql import functions as F

    reader = spark.readStream.format("icefloe")
    for key, value in {**catalog_opts(catalog), **extra}.items():
        reader = reader.option(key, value)
    counts: dict[str, int] = {}

    def collect(batch_df, batch_id: int) -> None:
        for row in batch_df.collect():
            counts[row["window"]["start"].isoformat()] = row["count"]

    query = (reader.load("db.events").withWatermark("ts", "10 minutes")
             .groupBy(F.window("ts", "1 hour")).count()
             .writeStream.outputMode("update").foreachBatch(collect)
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    query.awaitTermination(300)
    exc = query.exception()
    if exc is not None:
        raise exc
    batches = len([p for p in query.recentProgress if p["numInputRows"] > 0])
    return counts, batches


@pytest.fixture
def few_shuffle_partitions(spark):  # type: ignore[no-untyped-def]
    """Two shuffle partitions (Spark's 200 mean 200 state stores per micro-batch)."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", before)


@pytest.mark.usefixtures("few_shuffle_partitions")
def test_window_counts_equal_the_batch_query_only_in_event_time_order(spark,
                                                                      tmp_path) -> None:
    from pyspark.sql import functions as F

    catalog = make_catalog(tmp_path)
    table = event_table(catalog)
    batch = (spark.read.format("icefloe").options(**catalog_opts(catalog)).load("db.events")
             .groupBy(F.window("ts", "1 hour")).count().collect())
    expected = {row["window"]["start"].isoformat(): row["count"] for row in batch}
    # the batch query against PyIceberg's scan: twelve events in each appended hour
    assert sorted(expected.values()) == [12] * len(HOURS)
    assert sum(expected.values()) == len(table.scan().to_arrow())

    ordered, batches = windowed_counts(spark, catalog, tmp_path / "c1",
                                       watermarkColumn="ts", maxFilesPerTrigger="2")
    assert ordered == expected
    assert batches == len(HOURS) // 2  # the admission limit still holds: two files a batch

    plain, _ = windowed_counts(spark, catalog, tmp_path / "c2", maxFilesPerTrigger="2")
    assert plain != expected  # file order jumps the watermark: rows dropped as late
    assert sum(plain.values()) < sum(expected.values())


def _first_batch_in_subprocess(options: dict[str, str]) -> str:
    script = (
        "import json\n"
        "from pyspark.sql.types import StructType\n"
        "from icefloe.spark.streaming import IcefloeStreamReader\n"
        "from pyspark.sql.streaming.datasource import ReadMaxFiles\n"
        f"r = IcefloeStreamReader('db.events', {options!r}, StructType())\n"
        "s = r.initialOffset()\n"
        "e = r.latestOffset(s, ReadMaxFiles(2))\n"
        "parts = [[b.hex() for b in p.value] for p in r.partitions(s, e)]\n"
        "print(json.dumps([s, e, parts]))\n"
    )
    return subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                          text=True).stdout.strip().splitlines()[-1]


def test_offsets_and_partitions_are_identical_across_driver_processes(tmp_path) -> None:
    catalog = make_catalog(tmp_path)
    table = event_table(catalog)
    opts = {**catalog_opts(catalog), "watermarkColumn": "ts"}
    first, second = _first_batch_in_subprocess(opts), _first_batch_in_subprocess(opts)
    assert first == second
    start, end, parts = json.loads(first)
    assert (start["phase"], start["ordinal"], end["ordinal"]) == ("scan", 0, 2)
    files = [deserialize_split(bytes.fromhex(b)).file_path for p in parts for b in p]
    assert files == event_time_order(table)[:2]  # the first batch: the two oldest files


def test_offsets_record_the_order_and_a_switch_inside_a_unit_is_refused(tmp_path) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles
    from pyspark.sql.types import StructType

    from icefloe import InvalidOptionError
    from icefloe.spark.streaming import IcefloeStreamReader

    catalog = make_catalog(tmp_path)
    event_table(catalog)
    opts = catalog_opts(catalog)
    plain = IcefloeStreamReader("db.events", opts, StructType())
    ordered = IcefloeStreamReader("db.events", {**opts, "watermarkColumn": "ts"}, StructType())
    start = plain.initialOffset()
    end = plain.latestOffset(start, ReadMaxFiles(2))
    assert end["v"] == 2 and "order" not in end  # offsets without the option are as before
    with pytest.raises(InvalidOptionError, match=r"inside snapshot .* in file order"):
        ordered.latestOffset(end, ReadMaxFiles(2))
    ordered_start = ordered.initialOffset()
    ordered_end = ordered.latestOffset(ordered_start, ReadMaxFiles(2))
    assert (ordered_end["v"], ordered_end["order"]) == (3, "ts/fail")
    with pytest.raises(InvalidOptionError, match="event-time order 'ts/fail'"):
        plain.partitions(ordered_start, ordered_end)
    boundary = ordered.latestOffset(ordered_end, ReadAllAvailable())
    assert boundary["ordinal"] == -1  # past the scan: any order goes on from here
    assert plain.latestOffset(boundary, ReadAllAvailable())["ordinal"] == -1


def test_batch_read_partitions_in_event_time_order(tmp_path) -> None:
    from icefloe.spark.planning import SparkPlan

    catalog = make_catalog(tmp_path)
    table = event_table(catalog)
    plan = SparkPlan("db.events", {**catalog_opts(catalog), "watermarkColumn": "ts",
                                   "minPartitions": "3"})
    tasks = plan.partitions()
    assert len(tasks) == 3  # packed: each task starts at its smallest bound
    files = [deserialize_split(b).file_path for task in tasks for b in task]
    assert files == event_time_order(table)
