"""icefloe on Spark 4 vs Iceberg's own Java Spark reader (1.10.2 on Spark 3.5): a full scan.

Issue 20, comparison 2. The same table files: icefloe reads them through the SQLite
catalog on PySpark 4.x in this process (``icefloe.spark.read``); Iceberg's reader reads
them by metadata JSON (``spark.read.format("iceberg").load(...)``, vectorized Parquet
reads, Iceberg's default, set explicitly) in a Spark 3.5 child under ``.venv-interop``
(:mod:`benchmarks.java_spark`). Both sessions are ``local[2]`` with a 1 GiB driver and both
stay up for the whole measurement (JVM start-up is excluded); each run times ``load()``
plus ``df.write.format("noop")``, which decodes and materializes every column of every
row. Runs alternate (rotating who goes first) after one warm-up each; medians. Part of the
suite (``python -m benchmarks.run --only spark_java``); without ``.venv-interop`` the
section says how to create it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from benchmarks.common import (
    BenchTable,
    events_table,
    fmt_rate,
    fmt_s,
    md_table,
    median,
    pick,
    small_files_table,
    verdict,
)
from benchmarks.java_spark import MISSING, JavaSpark, available, tree_cpu

TARGETS = {"big table": 0.8, "small files": 1.0}
CEILING_FILES = 100
"""Tables of at most this many files also get the two Spark 4 reference rows (given
10,000 paths one by one, Spark's native reader spends ~30 s listing them)."""
ICEFLOE = "icefloe on Spark 4 (Python data source)"
JAVA = "Iceberg Java reader on Spark 3.5 (vectorized)"
NATIVE = "Spark 4 native Parquet (same files)"
CEILING = "PyArrow Python data source on Spark 4 (ceiling)"


Run = tuple[float, float]
"""Wall seconds and CPU seconds of one read (the Spark application's process tree)."""


def _timed_runs(contenders: dict[str, Callable[[], Run]], reps: int) -> dict[str, list[Run]]:
    """One warm-up each, then ``reps`` rounds rotating who goes first; each contender
    returns its own seconds (the Java child times itself: no IPC in its figure)."""
    names = list(contenders)
    for name in names:
        contenders[name]()
    out: dict[str, list[Run]] = {n: [] for n in names}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            out[name].append(contenders[name]())
    return out


def _measured(action: Callable[[], object], exclude: frozenset[int]) -> Callable[[], Run]:
    """``action`` timed: wall seconds, and CPU seconds of this process's tree (the Spark 4
    driver, its JVM and Python workers) leaving out the Java child's (``exclude``)."""
    def run() -> Run:
        cpu = tree_cpu(os.getpid(), exclude)
        start = time.perf_counter()
        action()
        return time.perf_counter() - start, tree_cpu(os.getpid(), exclude) - cpu

    return run


def _icefloe(spark: object, bench: BenchTable) -> Callable[[], None]:
    import icefloe.spark

    catalog = bench.catalog()

    def run() -> None:
        df = icefloe.spark.read(spark, bench.identifier, catalog=catalog)  # type: ignore[arg-type]
        df.write.format("noop").mode("overwrite").save()

    return run


def _ceilings(spark: object, bench: BenchTable) -> dict[str, Callable[[], None]]:
    """Spark 4's own Parquet reader and the bare PyArrow Python data source of
    :mod:`benchmarks.bench_spark_backfill` on the same files: what Spark 4 reaches
    without Python, and what any Python data source reaches on it."""
    from benchmarks.bench_spark_backfill import PyArrowSource

    spark.dataSource.register(PyArrowSource)  # type: ignore[attr-defined]
    paths = bench.data_paths()
    partitions = spark.read.parquet(*paths).rdd.getNumPartitions()  # type: ignore[attr-defined]

    def native() -> None:
        spark.read.parquet(*paths).write.format("noop").mode(  # type: ignore[attr-defined]
            "overwrite").save()

    def ceiling() -> None:
        (spark.read.format("pyarrow-files").option(  # type: ignore[attr-defined]
            "paths", ",".join(paths)).option("partitions", str(partitions)).load()
         .write.format("noop").mode("overwrite").save())

    return {NATIVE: native, CEILING: ceiling}


def _java_run(java: JavaSpark, metadata: str) -> Run:
    answer = java.call("batch", metadata=metadata)
    return float(answer["seconds"]), float(answer["cpu"])


def measure(tables: list[tuple[str, BenchTable]], reps: int) -> str:
    import icefloe.spark

    load_before = os.getloadavg()
    spark = icefloe.spark.session("local[2]", "icefloe-bench-java")
    spark.sparkContext.setLogLevel("ERROR")
    lines: list[str] = []
    summary: list[str] = []
    try:
        with JavaSpark() as java:
            assert java.proc is not None
            exclude = frozenset({java.proc.pid})
            for label, bench in tables:
                metadata = bench.table().metadata_location
                checked = java.call("count", metadata=metadata)
                rows = icefloe.spark.read(spark, bench.identifier,
                                          catalog=bench.catalog()).count()
                assert rows == checked["rows"], (label, rows, checked["rows"])
                assert checked["vectorized"], checked["plan"]
                files = len(bench.data_paths())
                started = time.perf_counter()
                actions = {ICEFLOE: _icefloe(spark, bench)}
                if files <= CEILING_FILES:
                    actions.update(_ceilings(spark, bench))
                contenders = {name: _measured(action, exclude)
                              for name, action in actions.items()}
                contenders[JAVA] = lambda metadata=metadata: _java_run(java, metadata)
                order = [ICEFLOE, JAVA, *[n for n in contenders if n not in (ICEFLOE, JAVA)]]
                runs = _timed_runs({n: contenders[n] for n in order}, reps)
                took = time.perf_counter() - started
                medians = {name: median([t for t, _ in r]) for name, r in runs.items()}
                cpus = {name: median([c for _, c in r]) for name, r in runs.items()}
                ratio = medians[JAVA] / medians[ICEFLOE]
                cpu_ratio = cpus[JAVA] / cpus[ICEFLOE]
                target = TARGETS[label]
                summary.append(f"- {label} ({rows:,} rows in {files:,} files): icefloe = "
                               f"**{ratio:.2f}x** Iceberg's Java reader (target >= {target}x: "
                               f"{verdict(ratio >= target)}); per CPU second "
                               f"{cpu_ratio:.2f}x")
                table = [[name, fmt_s(medians[name]),
                          fmt_rate(rows / medians[name], " rows/s"),
                          f"{medians[JAVA] / medians[name]:.2f}x", f"{cpus[name]:.1f} s",
                          f"{cpus[JAVA] / cpus[name]:.2f}x",
                          ", ".join(fmt_s(t) for t, _ in r)]
                         for name, r in runs.items()]
                lines += [f"**{label}** ({files:,} files, {rows:,} rows; median of {reps}, "
                          f"interleaved, {took:.0f} s)", "",
                          md_table(["reader", "median", "throughput", "vs Java reader",
                                    "CPU (median)", "rows per CPU s vs Java", "runs"], table),
                          ""]
    finally:
        spark.stop()
    load_after = os.getloadavg()
    return "\n".join([
        *summary, "",
        "Same table files: icefloe through the SQLite catalog on PySpark "
        f"{spark.version} (`icefloe.spark.read`); Iceberg 1.10.2's Spark runtime on "
        "PySpark 3.5 in `.venv-interop`, the table loaded by its metadata JSON, vectorized "
        "Parquet reads. Both `local[2]`, 1 GiB driver, sessions started before timing; a run "
        "is `load()` + `write.format(\"noop\")` (every column of every row materialized). "
        "CPU: user + system seconds of each Spark application's processes (driver, JVM, "
        "Python workers) during the run; on a shared machine the CPU a read burns is "
        "steadier than its wall time. "
        f"Load average {load_before[0]:.1f} before, {load_after[0]:.1f} after (2 cores, "
        "shared).", "",
        *lines,
    ]).rstrip()


def run(scale: str) -> str:
    """The suite's entry: the big table (quick 2M rows in 4 files, full 20M in 20) and the
    small-files table (quick 1,000, full 10,000 files of 500 rows); 5 runs each."""
    if not available():
        return MISSING
    return measure([("big table", events_table(scale)),
                    ("small files", small_files_table(scale))], reps=pick(scale, 3, 5))


if __name__ == "__main__":
    import sys

    print(run(sys.argv[1] if len(sys.argv) > 1 else "quick"))
