"""Streaming catch-up: ``Trigger.AvailableNow`` over a backlog of small append snapshots,
icefloe's Spark stream (Spark 4) vs Iceberg's Java Spark stream (1.10.2 on Spark 3.5).

Issue 20, comparison 3 (apache/iceberg#16940: Iceberg's micro-batch planning walks the
backlog one snapshot at a time on one thread). The table: N snapshots, each a merge append
of one Parquet file of 500 event rows, written by Java Iceberg (transactions of 500 commits, so the
metadata JSON is written 1/500 as often; merge appends, Iceberg's default, keep manifest
lists short). Both streams start at the first snapshot and read every snapshot's added file:
Iceberg's default start (the oldest ancestor, its added files only), icefloe's
``startingVersion=<first snapshot>`` (inclusive). The same rate limit on both sides
(both at 1,000 files per micro-batch, :data:`FILES_PER_BATCH`). A run is
``readStream...load()`` to ``awaitTermination()`` of a ``noop`` sink with
``trigger(availableNow=True)`` and a fresh checkpoint directory; both Spark sessions are
up before timing. Rows per second of the whole run; runs alternate after one warm-up each.
Backlogs: quick 1,000 snapshots; full 1,000, 3,000 and 10,000 (the target at 10,000).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import (
    BenchTable,
    _cached,
    event_rows,
    fmt_rate,
    fmt_s,
    md_table,
    median,
    pick,
    verdict,
)
from benchmarks.java_spark import MISSING, JavaSpark, available, tree_cpu

TARGET = 1.5
ROWS_PER_SNAPSHOT = 500
IDENTIFIER = "bench.stream"
LONG_RUN_S = 120
FILES_PER_BATCH = 1_000
"""Both streams' rate limit (icefloe ``maxFilesPerTrigger``, Iceberg
``streaming-max-files-per-micro-batch``). Iceberg 1.10.2's stream ignores it under
``Trigger.AvailableNow`` (its ``SparkMicroBatchStream`` does not implement
``SupportsTriggerAvailableNow``, apache/iceberg#13823, so Spark reads all available data
in one micro-batch); it is set anyway, as a user would."""
JAVA_DRIVER_MEMORY = "4g"
"""The Java Spark driver's heap: planning the whole 10,000-snapshot backlog as one
micro-batch ran out of 1 GiB (twice, 2026-11-24 and -25)."""
ICEFLOE = "icefloe stream on Spark 4"
JAVA = "Iceberg Java stream on Spark 3.5"


def _with_field_ids(table: pa.Table) -> pa.Table:
    """``table`` with Parquet field ids 1..5, as the Java-created table numbers its columns."""
    fields = [f.with_metadata({b"PARQUET:field_id": str(i).encode()})
              for i, f in enumerate(table.schema, start=1)]
    return table.cast(pa.schema(fields))


def stream_table(snapshots: int) -> BenchTable:
    """``snapshots`` append snapshots of one 500-row file each, cached under
    ``benchmarks/data/stream-<snapshots>-v1`` (written by Java Iceberg in a Spark 3.5 child
    of its own: a session configures its catalog ``bench`` once)."""

    def build(root: Path) -> None:
        data = root / "warehouse" / "bench" / "stream" / "data"
        data.mkdir(parents=True)
        paths = []
        for i in range(snapshots):
            path = data / f"part-{i:06d}.parquet"
            pq.write_table(_with_field_ids(event_rows(ROWS_PER_SNAPSHOT,
                                                      start=i * ROWS_PER_SNAPSHOT)), path)
            paths.append(path.as_uri())
        with JavaSpark(driver_memory="4g") as java:
            built = java.call("build_stream", home=str(root), identifier=IDENTIFIER,
                              paths=paths)
        assert built["snapshots"] == snapshots, built

    return BenchTable(_cached(f"stream-{snapshots}", build), IDENTIFIER)


def _icefloe(spark: Any, bench: BenchTable, first: int,
             exclude: frozenset[int]) -> Callable[[], tuple[float, int, int, float]]:
    from icefloe.spark import catalog_options

    options = {**catalog_options(bench.catalog()), "startingVersion": str(first),
               "maxFilesPerTrigger": str(FILES_PER_BATCH)}

    def run() -> tuple[float, int, int, float]:
        checkpoint = tempfile.mkdtemp(prefix="icefloe-stream-bench-")
        try:
            cpu = tree_cpu(os.getpid(), exclude)
            start = time.perf_counter()
            query = (spark.readStream.format("icefloe").options(**options)
                     .load(bench.identifier).writeStream.format("noop")
                     .option("checkpointLocation", checkpoint)
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            seconds = time.perf_counter() - start
            cpu = tree_cpu(os.getpid(), exclude) - cpu
            progress = query.recentProgress
        finally:
            shutil.rmtree(checkpoint, ignore_errors=True)
        return (seconds, sum(int(p["numInputRows"]) for p in progress),
                sum(1 for p in progress if int(p["numInputRows"]) > 0), cpu)

    return run


def _java(java: JavaSpark, metadata: str) -> Callable[[], tuple[float, int, int, float]]:
    def run() -> tuple[float, int, int, float]:
        checkpoint = tempfile.mkdtemp(prefix="iceberg-stream-bench-")
        try:
            answer = java.call("stream", metadata=metadata, checkpoint=checkpoint, options={
                "streaming-max-files-per-micro-batch": str(FILES_PER_BATCH)})
        finally:
            shutil.rmtree(checkpoint, ignore_errors=True)
        return (float(answer["seconds"]), int(answer["rows"]), int(answer["batches"]),
                float(answer["cpu"]))

    return run


def _runs(contenders: dict[str, Callable[[], tuple[float, int, int, float]]],
          reps: int, warmup: bool) -> dict[str, list[tuple[float, int, int, float]]]:
    names = list(contenders)
    for name in names if warmup else ():
        contenders[name]()
    out: dict[str, list[tuple[float, int, int, float]]] = {n: [] for n in names}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            out[name].append(contenders[name]())
    return out


def measure(backlogs: list[int], reps: int) -> str:
    import icefloe.spark

    tables = {n: stream_table(n) for n in backlogs}  # built once, before any timing
    load_before = os.getloadavg()
    spark = icefloe.spark.session("local[2]", "icefloe-bench-stream")
    spark.sparkContext.setLogLevel("ERROR")
    rows_out: list[list[str]] = []
    summary: list[str] = []
    predicted = 0.0  # seconds per snapshot of the slower stream at the last backlog
    try:
        with JavaSpark(driver_memory=JAVA_DRIVER_MEMORY) as java:
            assert java.proc is not None
            exclude = frozenset({java.proc.pid})
            for snapshots in backlogs:
                bench = tables[snapshots]
                table = bench.table()
                first = min(table.snapshots(), key=lambda s: s.sequence_number).snapshot_id
                expected = snapshots * ROWS_PER_SNAPSHOT
                # a backlog whose slower stream would take minutes per run gets one run
                count = reps if predicted * snapshots < LONG_RUN_S else 1
                started = time.perf_counter()
                runs = _runs({ICEFLOE: _icefloe(spark, bench, first, exclude),
                              JAVA: _java(java, table.metadata_location)}, count,
                             warmup=snapshots == backlogs[0])
                took = time.perf_counter() - started
                for name, results in runs.items():
                    assert {r[1] for r in results} == {expected}, (name, results)
                medians = {name: median([r[0] for r in rs]) for name, rs in runs.items()}
                cpus = {name: median([r[3] for r in rs]) for name, rs in runs.items()}
                predicted = max(medians.values()) / snapshots
                ratio = medians[JAVA] / medians[ICEFLOE]
                for name, results in runs.items():
                    rows_out.append([f"{snapshots:,}", name, fmt_s(medians[name]),
                                     fmt_rate(expected / medians[name], " rows/s"),
                                     f"{medians[JAVA] / medians[name]:.2f}x",
                                     str(max(r[2] for r in results)), f"{cpus[name]:.1f} s",
                                     f"{cpus[JAVA] / cpus[name]:.2f}x",
                                     ", ".join(fmt_s(r[0]) for r in results)])
                summary.append(f"- {snapshots:,} snapshots ({expected:,} rows): icefloe = "
                               f"**{ratio:.2f}x** Iceberg's Java stream (median of {count}, "
                               f"{took:.0f} s; per CPU second "
                               f"{cpus[JAVA] / cpus[ICEFLOE]:.2f}x)")
                # as it goes (a later backlog may fail): the runs of this one
                print(summary[-1], {n: [round(r[0], 2) for r in rs] for n, rs in runs.items()},
                      file=sys.stderr, flush=True)
    finally:
        spark.stop()
    load_after = os.getloadavg()
    target_line = summary[-1] + (f"; target >= {TARGET}x at the largest backlog: "
                                 f"{verdict(ratio >= TARGET)}")
    return "\n".join([
        *summary[:-1], target_line, "",
        f"Median of {reps} runs per backlog (1 where a run would take minutes), "
        "alternating, after one warm-up of each stream on the first backlog. Every "
        "run read every row (`numInputRows` summed over the query's progress). CPU: user + "
        "system seconds of each Spark application's processes (driver, JVM, Python "
        "workers) during the run. Load "
        f"average {load_before[0]:.1f} before, {load_after[0]:.1f} after (2 cores, shared).",
        "",
        md_table(["snapshots", "stream", "median (start to end)", "rows/s",
                  "vs Java stream", "micro-batches", "CPU (median)",
                  "rows per CPU s vs Java", "runs"], rows_out),
    ])


def run(scale: str) -> str:
    """The suite's entry: quick 1,000 snapshots (3 runs); full 1,000, 3,000, 10,000 (3)."""
    if not available():
        return MISSING
    return measure(pick(scale, [1_000], [1_000, 3_000, 10_000]), reps=3)


if __name__ == "__main__":
    print(run(sys.argv[1] if len(sys.argv) > 1 else "quick"))
