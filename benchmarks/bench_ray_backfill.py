"""icefloe on Ray vs ``ray.data.read_iceberg``: a full bounded read, materialized.

Same table, same local Ray (``--cpus`` CPUs), every dataset fully materialized
(``ds.materialize()``, or icefloe's ``materialize=True``: its read tasks as plain Ray
tasks, no streaming executor); runs interleaved round-robin after one warm-up each; reports
the median of the runs and the throughput ratio. The last row is Ray Data's ceiling on
this machine: a bare datasource whose read tasks are ``pyarrow.parquet.read_table`` of
one data file each (no Iceberg, no planning, no conversion), with icefloe's block count.
Part of the suite (``python -m benchmarks.run --only ray_backfill``); standalone, for
other sizes:

    uv run python -m benchmarks.bench_ray_backfill --rows 4000000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

from benchmarks.common import (
    MIB,
    events_table_of,
    interleaved,
    md_table,
    pick,
    ratio_rows,
    small_files_table,
)

TARGET = 1.5
EAGER = "icefloe.ray.read(materialize=True)"
LAZY = "icefloe.ray.read + .materialize()"


def measure(rows: int, files: int, runs: int, cpus: int,
            cache: str | None = None) -> str:
    """Both reads interleaved on a ``rows``-row, ``files``-file table; the RESULTS.md
    section (markdown, no title). Starts and shuts down a local Ray."""
    import ray

    import icefloe.ray

    bench = events_table_of(rows, files, cache=cache)
    rows = rows // files * files
    catalog = bench.catalog()
    props = {"name": "bench", "type": "sql", **catalog.properties}
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
             object_store_memory=2 * 1024 * MIB)
    ray.data.DataContext.get_current().enable_progress_bars = False

    def icefloe_read() -> int:
        ds = icefloe.ray.read(bench.identifier, catalog=catalog)
        return ds.materialize().count()

    def icefloe_materialized() -> int:
        return icefloe.ray.read(bench.identifier, catalog=catalog, materialize=True).count()

    def ray_read_iceberg() -> int:
        ds = ray.data.read_iceberg(table_identifier=bench.identifier, catalog_kwargs=props)
        return ds.materialize().count()

    paths = bench.data_paths()

    def ceiling() -> int:
        ds = ray.data.read_datasource(_files_datasource(paths),
                                      override_num_blocks=icefloe.ray.default_num_blocks())
        return ds.materialize().count()

    try:
        results = interleaved({EAGER: icefloe_materialized,
                               LAZY: icefloe_read,
                               "ray.data.read_iceberg": ray_read_iceberg,
                               "ceiling: read_table per file": ceiling}, reps=runs)
    finally:
        ray.shutdown()
    for name, timed in results.items():
        counts = {n for _, n in timed}
        assert counts == {rows}, (name, counts)
    medians, rows_table = ratio_rows(results, rows, "ray.data.read_iceberg")
    peer = medians["ray.data.read_iceberg"]
    ratio = peer / medians[EAGER]
    lazy = peer / medians[LAZY]
    top = peer / medians["ceiling: read_table per file"]
    return "\n".join([
        f"- `icefloe.ray.read(materialize=True)` = **{ratio:.2f}x** `ray.data.read_iceberg` "
        f"throughput (target >= {TARGET}x: **{'met' if ratio >= TARGET else 'missed'}**)",
        f"- the lazy `icefloe.ray.read(...).materialize()` = **{lazy:.2f}x** (target: "
        f"**{'met' if lazy >= TARGET else 'missed'}**); Ray Data's ceiling here (bare "
        f"`read_table` per file, through the same executor) is {top:.2f}x",
        "",
        f"Table: {rows:,} event rows in {files} Parquet files (row groups of 128k "
        f"rows), SQLite catalog, local warehouse. Local Ray with {cpus} CPUs; each "
        "dataset fully materialized (`ds.materialize()`), interleaved runs after a warm-up; "
        f"median of {runs}.",
        "",
        md_table(["reader", "median", "throughput", "vs read_iceberg", "runs"], rows_table),
    ])


def _files_datasource(paths: list[str]) -> Any:
    """The ceiling: a Ray datasource reading each file with ``pq.read_table`` (Ray is
    imported here, so the module imports without it)."""
    import pyarrow.parquet as pq
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    def task(path: str) -> ReadTask:
        meta = BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None,
                             input_files=[path])
        return ReadTask(lambda: [pq.read_table(path)], meta)

    class Files(Datasource):
        def estimate_inmemory_data_size(self) -> None:
            return None

        def get_read_tasks(self, parallelism: int, **kwargs: Any) -> list[ReadTask]:
            return [task(p) for p in paths]

    return Files()


def measure_small(scale: str, runs: int, cpus: int) -> str:
    """icefloe and ``read_iceberg`` interleaved on the small-files table (quick 1,000, full
    10,000 files of 500 rows); markdown. Starts and shuts down a local Ray."""
    import ray

    import icefloe.ray

    bench = small_files_table(scale)
    catalog = bench.catalog()
    props = {"name": "bench", "type": "sql", **catalog.properties}
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
             object_store_memory=2 * 1024 * MIB)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        results = interleaved({
            "icefloe.ray.read": lambda: icefloe.ray.read(
                bench.identifier, catalog=catalog).materialize().count(),
            "ray.data.read_iceberg": lambda: ray.data.read_iceberg(
                table_identifier=bench.identifier, catalog_kwargs=props).materialize().count(),
        }, reps=runs)
    finally:
        ray.shutdown()
    counts = {n for timed in results.values() for _, n in timed}
    assert len(counts) == 1, counts
    rows = counts.pop()
    medians, table = ratio_rows(results, rows, "ray.data.read_iceberg")
    peer = medians["ray.data.read_iceberg"]
    files = len(bench.data_paths())
    return "\n".join([
        f"**small files** ({files:,} files, {rows:,} rows; median of {runs}, interleaved): "
        f"icefloe.ray.read = **{peer / medians['icefloe.ray.read']:.2f}x** "
        "`ray.data.read_iceberg`",
        "",
        md_table(["reader", "median", "throughput", "vs read_iceberg", "runs"], table),
    ])


def run(scale: str) -> str:
    """The suite's entry: quick 2M rows in 4 files, full 20M rows in 20 files (5 runs);
    then the small-files table (quick 1,000 files, 3 runs; full 10,000, 2 runs)."""
    rows, files = pick(scale, (2_000_000, 4), (20_000_000, 20))
    cpus = os.cpu_count() or 1
    big = measure(rows, files, runs=5, cpus=cpus, cache=f"events-{scale}")
    return big + "\n\n" + measure_small(scale, runs=pick(scale, 3, 2), cpus=cpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=min(4, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    print(measure(args.rows, args.files, args.runs, args.cpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
