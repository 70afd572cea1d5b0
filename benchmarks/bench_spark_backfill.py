"""icefloe on Spark vs Spark's native Parquet reader vs PyIceberg: a full scan, materialized.

Same table, same local Spark (``local[<cores>]``, 1 GiB driver): icefloe's Python data
source and ``spark.read.parquet(*files)`` (the same data files) each feed every row to
``df.write.format("noop")`` (rows are decoded and materialized, nothing is written);
PyIceberg's ``table.scan().to_arrow()`` runs in this process. A fourth contender, a
minimal Python data source that yields ``pyarrow.parquet`` batches of the same files,
is the ceiling of any Python data source: the gap between it and Spark's native reader
is PySpark's Python-to-JVM transport, the gap between icefloe and it is icefloe's.
Runs are interleaved round-robin after one warm-up each; reports the median of
``--runs``, rows/s and the throughput ratio against Spark's native reader.
Writes ``benchmarks/RESULTS_spark.md``.

    uv run python -m benchmarks.bench_spark_backfill --rows 20000000 --runs 3
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from benchmarks.common import (
    MIB,
    ROOT,
    BenchTable,
    _cached,
    _new_table,
    event_rows,
    fmt_rate,
    fmt_s,
    interleaved,
    machine,
    md_table,
    median,
)

TARGET = 0.8


def spark_events_table(rows: int, files: int) -> BenchTable:
    """``rows`` event rows in ``files`` appends (row groups of 128k rows), cached. The
    20M-row, 20-file table is the one ``bench_backfill`` builds (``events-full``)."""
    name = "events-full" if (rows, files) == (20_000_000, 20) else f"events-{rows}-{files}"
    ident = "bench.events"

    def build(root: Path) -> None:
        bt = BenchTable(root, ident)
        per = rows // files
        table = _new_table(bt.catalog(), ident, event_rows(1).schema,
                           {"write.parquet.row-group-limit": "131072",
                            "write.target-file-size-bytes": str(1024 * MIB)})
        for i in range(files):
            table.append(event_rows(per, start=i * per))

    return BenchTable(_cached(name, build), ident)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="icefloe batchSize option (rows per Arrow batch)")
    parser.add_argument("--out", default=str(ROOT / "RESULTS_spark.md"))
    args = parser.parse_args(argv)

    import icefloe.spark

    bench = spark_events_table(args.rows, args.files)
    rows = args.rows // args.files * args.files
    options = {} if args.batch_size is None else {"batchSize": str(args.batch_size)}
    spark = icefloe.spark.session(f"local[{args.cores}]", "icefloe-bench")
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
        results = interleaved(contenders(spark, bench, options), reps=args.runs)
        elapsed = time.perf_counter() - started
    finally:
        spark.stop()
    for name, runs in results.items():
        counts = {n for _, n in runs if n is not None}
        assert counts <= {rows}, (name, counts)
    medians = {name: median([s for s, _ in runs]) for name, runs in results.items()}
    native = medians["Spark native Parquet"]
    table = [[name, fmt_s(medians[name]), fmt_rate(rows / medians[name], " rows/s"),
              f"{native / medians[name]:.2f}x", ", ".join(fmt_s(s) for s, _ in results[name])]
             for name in results]
    ratio = native / medians["icefloe on Spark"]
    ceiling = native / medians["PyArrow Python data source (ceiling)"]
    best = min(s for s, _ in results["Spark native Parquet"]) / min(
        s for s, _ in results["icefloe on Spark"])
    info = machine()
    text = "\n".join([
        "# Spark backfill: icefloe on Spark vs Spark's Parquet reader vs PyIceberg",
        "",
        f"`uv run python -m benchmarks.bench_spark_backfill --rows {args.rows} "
        f"--files {args.files} --runs {args.runs} --cores {args.cores}"
        + (f" --batch-size {args.batch_size}" if args.batch_size else "") + "`",
        "",
        f"Table: {rows:,} event rows (id, ts, kind, value, payload) in {args.files} Parquet "
        "files (row groups of 128k rows), SQLite catalog, local warehouse. Spark "
        f"`local[{args.cores}]`, 1 GiB driver; both Spark reads are fully materialized by "
        "`df.write.format(\"noop\")`; PyIceberg materializes `scan().to_arrow()` in the "
        f"driver process. Spark partitions: icefloe {partitions}, native "
        f"{native_partitions}. Interleaved runs after one warm-up each, median of "
        f"{args.runs} (whole benchmark {elapsed:.0f}s).",
        "",
        md_table(["reader", "median", "throughput", "vs Spark native", "runs"], table),
        "",
        f"**icefloe on Spark / Spark native throughput: {ratio:.2f}x** (target >= {TARGET}x: "
        f"{'met' if ratio >= TARGET else 'NOT met'}); best run vs best run {best:.2f}x; the "
        f"Python data source ceiling is {ceiling:.2f}x.",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()),
        "",
    ])
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
