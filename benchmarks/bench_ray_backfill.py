"""icefloe on Ray vs ``ray.data.read_iceberg``: a full bounded read, materialized.

Same table, same local Ray (``--cpus`` CPUs), both datasets fully materialized
(``ds.materialize()``); runs interleaved round-robin after one warm-up each; reports
the median of the runs and the throughput ratio. Part of the suite
(``python -m benchmarks.run --only ray_backfill``); standalone, for other sizes:

    uv run python -m benchmarks.bench_ray_backfill --rows 4000000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

from benchmarks.common import (
    MIB,
    events_table_of,
    fmt_rate,
    fmt_s,
    interleaved,
    md_table,
    median,
    pick,
)

TARGET = 1.5


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

    def ray_read_iceberg() -> int:
        ds = ray.data.read_iceberg(table_identifier=bench.identifier, catalog_kwargs=props)
        return ds.materialize().count()

    try:
        results = interleaved({"icefloe.ray.read": icefloe_read,
                               "ray.data.read_iceberg": ray_read_iceberg}, reps=runs)
    finally:
        ray.shutdown()
    medians = {name: median([s for s, _ in timed]) for name, timed in results.items()}
    for name, timed in results.items():
        counts = {n for _, n in timed}
        assert counts == {rows}, (name, counts)
    ratio = medians["ray.data.read_iceberg"] / medians["icefloe.ray.read"]
    rows_table = [[name, fmt_s(medians[name]), fmt_rate(rows / medians[name], " rows/s"),
                   ", ".join(fmt_s(s) for s, _ in results[name])] for name in results]
    return "\n".join([
        f"- icefloe.ray.read = **{ratio:.2f}x** `ray.data.read_iceberg` throughput (target "
        f">= {TARGET}x: **{'met' if ratio >= TARGET else 'missed'}**)",
        "",
        f"Table: {rows:,} event rows in {files} Parquet files (row groups of 128k "
        f"rows), SQLite catalog, local warehouse. Local Ray with {cpus} CPUs; each "
        "dataset fully materialized (`ds.materialize()`), interleaved runs after a warm-up; "
        f"median of {runs}.",
        "",
        md_table(["reader", "median", "throughput", "runs"], rows_table),
    ])


def run(scale: str) -> str:
    """The suite's entry: quick 2M rows in 4 files, full 20M rows in 20 files; 3 runs."""
    rows, files = pick(scale, (2_000_000, 4), (20_000_000, 20))
    return measure(rows, files, runs=3, cpus=os.cpu_count() or 1, cache=f"events-{scale}")


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
