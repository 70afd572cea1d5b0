"""icefloe on Spark vs Spark's native Parquet reader vs PyIceberg: a full scan, materialized.

Same table, same local Spark (``local[<cores>]``, 1 GiB driver): icefloe's Python data
source and ``spark.read.parquet(*files)`` (the same data files) each feed every row to
``df.write.format("noop")`` (rows are decoded and materialized, nothing is written);
PyIceberg's ``table.scan().to_arrow()`` runs in this process. A fourth contender, a
minimal Python data source that yields ``pyarrow.parquet`` batches of the same files,
is the ceiling of any Python data source: the gap between it and Spark's native reader
is PySpark's Python-to-JVM transport, the gap between icefloe and it is icefloe's.
Runs are interleaved round-robin after one warm-up each; reports the median of
the runs, rows/s and the throughput ratio against Spark's native reader. Part of the
suite (``python -m benchmarks.run --only spark_backfill``); standalone, for other sizes:

    uv run python -m benchmarks.bench_spark_backfill --rows 20000000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from benchmarks.common import (
    BenchTable,
    events_table_of,
    interleaved,
    md_table,
    pick,
    ratio_rows,
    small_files_table,
)

TARGET = 0.8


class PyArrowSource(DataSource):
    """``format("pyarrow-files")``: the files of option ``paths`` read with pyarrow.parquet,
    one partition per ``partitions``-th file; the ceiling of a Python data source."""

    @classmethod
    def name(cls) -> str:
        return "pyarrow-files"

    def schema(self) -> str:
        return "id long, ts timestamp_ntz, kind string, value double, payload string"

    def reader(self, schema: StructType) -> DataSourceReader:
        return _PyArrowReader(schema, self.options["paths"].split(","),
                              int(self.options.get("partitions", "4")))


class _PyArrowReader(DataSourceReader):
    def __init__(self, schema: StructType, paths: list[str], partitions: int) -> None:
        self.schema_json = schema.json()
        self.paths = paths
        self.count = partitions

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(self.paths[i::self.count]) for i in range(self.count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import json

        from pyspark.sql.pandas.types import to_arrow_schema

        target = to_arrow_schema(StructType.fromJson(json.loads(self.schema_json)),
                                 timezone="UTC")
        for path in partition.value:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=65536):
                yield batch.cast(target)


if __name__ != "__main__":  # classes of __main__ are pickled by value already
    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def contenders(spark: Any, bench: BenchTable,
               options: dict[str, str]) -> dict[str, Callable[[], Any]]:
    """The three full scans; each returns None (Spark) or the Arrow table's row count."""
    import icefloe.spark

    catalog = bench.catalog()
    paths = bench.data_paths()

    def icefloe_spark() -> None:
        df = icefloe.spark.read(spark, bench.identifier, catalog=catalog, options=options)
        df.write.format("noop").mode("overwrite").save()

    def spark_parquet() -> None:
        spark.read.parquet(*paths).write.format("noop").mode("overwrite").save()

    def pyarrow_source() -> None:
        partitions = spark.read.parquet(*paths).rdd.getNumPartitions()
        (spark.read.format("pyarrow-files").option("paths", ",".join(paths))
         .option("partitions", str(partitions)).load()
         .write.format("noop").mode("overwrite").save())

    def pyiceberg() -> int:
        return int(catalog.load_table(bench.identifier).scan().to_arrow().num_rows)

    return {"icefloe on Spark": icefloe_spark, "Spark native Parquet": spark_parquet,
            "PyArrow Python data source (ceiling)": pyarrow_source,
            "PyIceberg to_arrow": pyiceberg}


def measure(rows: int, files: int, runs: int, cores: int = 2,
            batch_size: int | None = None, cache: str | None = None) -> str:
    """Run the contenders interleaved on a ``rows``-row, ``files``-file table; the
    RESULTS.md section (markdown, no title)."""
    import icefloe.spark

    bench = events_table_of(rows, files, cache=cache)
    rows = rows // files * files
    options = {} if batch_size is None else {"batchSize": str(batch_size)}
    spark = icefloe.spark.session(f"local[{cores}]", "icefloe-bench")
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(PyArrowSource)
    try:
        icefloe_rows = icefloe.spark.read(spark, bench.identifier, catalog=bench.catalog(),
                                          options=options).count()
        assert icefloe_rows == rows, (icefloe_rows, rows)
        partitions = icefloe.spark.read(spark, bench.identifier, catalog=bench.catalog(),
                                        options=options).rdd.getNumPartitions()
        native_partitions = spark.read.parquet(*bench.data_paths()).rdd.getNumPartitions()
        started = time.perf_counter()
        results = interleaved(contenders(spark, bench, options), reps=runs)
        elapsed = time.perf_counter() - started
    finally:
        spark.stop()
    for name, timed in results.items():
        counts = {n for _, n in timed if n is not None}
        assert counts <= {rows}, (name, counts)
    medians, table = ratio_rows(results, rows, "Spark native Parquet")
    native = medians["Spark native Parquet"]
    ratio = native / medians["icefloe on Spark"]
    ceiling = native / medians["PyArrow Python data source (ceiling)"]
    best = min(s for s, _ in results["Spark native Parquet"]) / min(
        s for s, _ in results["icefloe on Spark"])
    return "\n".join([
        f"- icefloe on Spark = **{ratio:.2f}x** Spark's native Parquet scan (target >= "
        f"{TARGET}x: **{'met' if ratio >= TARGET else 'missed'}**); best run vs best run "
        f"{best:.2f}x; the Python data source ceiling is {ceiling:.2f}x.",
        "",
        f"Table: {rows:,} event rows (id, ts, kind, value, payload) in {files} Parquet "
        "files (row groups of 128k rows), SQLite catalog, local warehouse. Spark "
        f"`local[{cores}]`, 1 GiB driver; both Spark reads are fully materialized by "
        "`df.write.format(\"noop\")`; PyIceberg materializes `scan().to_arrow()` in the "
        f"driver process. Spark partitions: icefloe {partitions}, native "
        f"{native_partitions}. Interleaved runs after one warm-up each, median of "
        f"{runs} (measurement {elapsed:.0f}s).",
        "",
        md_table(["reader", "median", "throughput", "vs Spark native", "runs"], table),
    ])


def measure_small(scale: str, runs: int, cores: int = 2) -> str:
    """icefloe on Spark and Spark's native Parquet reader interleaved on the small-files
    table (quick 1,000, full 10,000 files of 500 rows), both materialized by a ``noop``
    write; markdown. Starts and stops its own local Spark."""
    import icefloe.spark

    bench = small_files_table(scale)
    catalog = bench.catalog()
    paths = bench.data_paths()
    # the native reader lists the one directory that holds exactly the table's files:
    # given the 10,000 paths one by one, Spark spends ~30 s planning (a lookup per path)
    directory = os.path.dirname(paths[0])
    assert sorted(os.path.join(directory, name) for name in os.listdir(directory)
                  ) == sorted(paths), "the small-files directory holds other files"
    spark = icefloe.spark.session(f"local[{cores}]", "icefloe-bench-small")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        rows = icefloe.spark.read(spark, bench.identifier, catalog=catalog).count()
        assert rows == spark.read.parquet(directory).count(), "row counts differ"
        partitions = icefloe.spark.read(spark, bench.identifier,
                                        catalog=catalog).rdd.getNumPartitions()
        native_partitions = spark.read.parquet(directory).rdd.getNumPartitions()
        results = interleaved({
            "icefloe on Spark": lambda: icefloe.spark.read(
                spark, bench.identifier, catalog=catalog).write.format("noop")
            .mode("overwrite").save(),
            "Spark native Parquet": lambda: spark.read.parquet(directory).write
            .format("noop").mode("overwrite").save(),
        }, reps=runs)
    finally:
        spark.stop()
    medians, table = ratio_rows(results, rows, "Spark native Parquet")
    native = medians["Spark native Parquet"]
    ratio = native / medians["icefloe on Spark"]
    return "\n".join([
        f"**small files** ({len(paths):,} files, {rows:,} rows; median of {runs}, "
        f"interleaved): icefloe on Spark = **{ratio:.2f}x** Spark's native Parquet scan "
        f"(target >= {TARGET}x: **{'met' if ratio >= TARGET else 'missed'}**). Spark "
        f"partitions: icefloe {partitions}, native {native_partitions}; both include "
        "listing and planning (native: `spark.read.parquet(directory)`, the directory "
        "holding exactly the table's files; icefloe: the catalog and the manifests).",
        "",
        md_table(["reader", "median", "throughput", "vs Spark native", "runs"], table),
    ])


def run(scale: str) -> str:
    """The suite's entry: quick 2M rows in 4 files, full 20M rows in 20 files (3 runs);
    then the small-files table (quick 1,000 files, 5 runs; full 10,000, 3 runs)."""
    rows, files = pick(scale, (2_000_000, 4), (20_000_000, 20))
    big = measure(rows, files, runs=3, cache=f"events-{scale}")
    return big + "\n\n" + measure_small(scale, runs=pick(scale, 5, 3))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="icefloe batchSize option (rows per Arrow batch)")
    args = parser.parse_args(argv)
    print(measure(args.rows, args.files, args.runs, args.cores, args.batch_size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
