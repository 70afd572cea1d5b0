"""icefloe on Ray vs ``ray.data.read_iceberg``: a full bounded read, materialized.

Same table, same local Ray (``--cpus`` CPUs), both datasets fully materialized
(``ds.materialize()``); runs interleaved round-robin after one warm-up each; reports
the median of ``--runs`` and the throughput ratio. Writes ``benchmarks/RESULTS_ray.md``.

    uv run python -m benchmarks.bench_ray_backfill --rows 4000000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

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


def ray_events_table(rows: int, files: int) -> BenchTable:
    """``rows`` event rows in ``files`` appends (row groups of 128k rows), cached."""
    ident = "bench.events"

    def build(root: Path) -> None:
        bt = BenchTable(root, ident)
        per = rows // files
        table = _new_table(bt.catalog(), ident, event_rows(1).schema,
                           {"write.parquet.row-group-limit": "131072",
                            "write.target-file-size-bytes": str(1024 * MIB)})
        for i in range(files):
            table.append(event_rows(per, start=i * per))

    return BenchTable(_cached(f"ray-events-{rows}-{files}", build), ident)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--out", default=str(ROOT / "RESULTS_ray.md"))
    args = parser.parse_args(argv)

    import ray

    import icefloe.ray

    bench = ray_events_table(args.rows, args.files)
    catalog = bench.catalog()
    props = {"name": "bench", "type": "sql", **catalog.properties}
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
             object_store_memory=2 * 1024 * MIB)
    ray.data.DataContext.get_current().enable_progress_bars = False

    def icefloe_read() -> int:
        ds = icefloe.ray.read(bench.identifier, catalog=catalog)
        return ds.materialize().count()

    def ray_read_iceberg() -> int:
        ds = ray.data.read_iceberg(table_identifier=bench.identifier, catalog_kwargs=props)
        return ds.materialize().count()

    results = interleaved({"icefloe.ray.read": icefloe_read,
                           "ray.data.read_iceberg": ray_read_iceberg}, reps=args.runs)
    ray.shutdown()
    medians = {name: median([s for s, _ in runs]) for name, runs in results.items()}
    for name, runs in results.items():
        counts = {n for _, n in runs}
        assert counts == {args.rows // args.files * args.files}, (name, counts)
    ratio = medians["ray.data.read_iceberg"] / medians["icefloe.ray.read"]
    rows_table = [[name, fmt_s(medians[name]), fmt_rate(args.rows / medians[name], " rows/s"),
                   ", ".join(fmt_s(s) for s, _ in results[name])] for name in results]
    info = machine()
    text = "\n".join([
        "# Ray backfill: icefloe.ray.read vs ray.data.read_iceberg",
        "",
        f"`uv run python -m benchmarks.bench_ray_backfill --rows {args.rows} "
        f"--files {args.files} --runs {args.runs} --cpus {args.cpus}`",
        "",
        f"Table: {args.rows:,} event rows in {args.files} Parquet files (row groups of 128k "
        f"rows), SQLite catalog, local warehouse. Local Ray with {args.cpus} CPUs; each "
        "dataset fully materialized (`ds.materialize()`), interleaved runs after a warm-up; "
        "median of the runs.",
        "",
        md_table(["reader", "median", "throughput", "runs"], rows_table),
        "",
        f"**icefloe / read_iceberg throughput: {ratio:.2f}x** (target >= 1.5x: "
        f"{'met' if ratio >= 1.5 else 'NOT met'}).",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()),
        "",
    ])
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
