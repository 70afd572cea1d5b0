"""What serving a stream's metrics costs (issue 26, the soak's item 4).

``flock /tmp/icefloe-bench.lock uv run python -m benchmarks.bench_metrics_overhead``
(not part of ``benchmarks.run``: a comparison printed as a RESULTS.md block).

**Local stream**: the same ``available_now`` stream over the same table (the events table
of ``events_table_of``, read in small batches so the per-batch work shows), with and
without ``metrics_port=0`` (the Prometheus endpoint, ``prometheus_client``), the served
runs scraped every ``SCRAPE_S`` seconds by a thread of this process, as a Prometheus
server would (harder: Prometheus scrapes every 15-60 s). The counters behind
``stream.metrics()`` are kept in both (the coordinator keeps them anyway): the difference
is the registry, the HTTP server and the scrapes. Runs interleaved (off, on, off, on, ...),
each measured as this process's CPU time (``getrusage``: every thread) and wall time;
medians, the spread, the per-batch difference.

**Ray**: ``icefloe.ray.RayStream`` over the same table with ``metrics_interval_s=0`` (no
export) and ``1`` (the enumerator actor sets its ``ray.util.metrics`` gauges every second),
interleaved; the CPU of this process's whole tree (the local Ray's daemons, which reap the
actors, included) and wall. Ray's metrics reach Ray's endpoint through its metrics agent,
which needs ``ray[default]`` (the ``ray-metrics`` extra): its install size is reported from
the environment.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import urllib.request
from typing import Any

from benchmarks.common import events_table_of, md_table, process_cpu_s, tree_processes

ROWS = 2_000_000
FILES = 20
BATCH = 256
SCRAPE_S = 0.5


def local_run(table: Any, served: bool) -> dict[str, float]:
    """One available-now local stream over the table; CPU, wall, batches, scrapes."""
    from icefloe import IcebergSource

    source = IcebergSource(table.identifier, catalog=table.catalog(),
                           options={"batchSize": str(BATCH)})
    scrapes = 0
    stop = threading.Event()
    c0, t0 = process_cpu_s(), time.perf_counter()
    with source.stream(available_now=True, metrics_port=0 if served else None) as stream:
        def scrape() -> None:
            nonlocal scrapes
            host, port = stream.metrics_address
            while not stop.wait(SCRAPE_S):
                urllib.request.urlopen(f"http://{host}:{port}/metrics").read()
                scrapes += 1

        scraper = threading.Thread(target=scrape, daemon=True)
        if served:
            scraper.start()
        batches = rows = 0
        for item in stream:
            batches += 1
            rows += item.batch.num_rows
            item.ack()
        stop.set()
        if served:
            scraper.join()
    cpu, wall = process_cpu_s() - c0, time.perf_counter() - t0
    if rows != ROWS:
        raise RuntimeError(f"read {rows} rows, the table has {ROWS}")
    return {"cpu": cpu, "wall": wall, "batches": batches, "scrapes": scrapes}


def _rayprocess_cpu_s() -> float:
    """CPU of this process and its whole tree (Ray's daemons too: they reap the actors,
    whose CPU would otherwise leave the count when the stream ends)."""
    return sum(p[2] for p in tree_processes(os.getpid()))


def ray_run(table: Any, interval_s: float) -> dict[str, float]:
    """One available-now Ray stream (driver mode) with the given metrics export interval."""
    import icefloe.ray

    options = {"batchSize": str(BATCH), "catalog": "bench", "catalog.type": "sql",
               "catalog.uri": f"sqlite:///{table.root}/catalog.db",
               "catalog.warehouse": (table.root / "warehouse").as_uri()}
    c0, t0 = _rayprocess_cpu_s(), time.perf_counter()
    stream = icefloe.ray.RayStream(table.identifier, options=options, available_now=True,
                                   num_readers=1, metrics_interval_s=interval_s)
    rows = 0
    with stream:
        for item in stream:
            rows += item.batch.num_rows
            item.ack()
    cpu, wall = _rayprocess_cpu_s() - c0, time.perf_counter() - t0
    if rows != ROWS:
        raise RuntimeError(f"read {rows} rows, the table has {ROWS}")
    return {"cpu": cpu, "wall": wall}


def extra_size() -> str:
    """Disk size of what ``ray[default]`` adds to ``ray`` in this environment."""
    from importlib import metadata

    base = {r.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip()
            .lower() for r in metadata.requires("ray") or [] if "extra ==" not in r}
    default = {r.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0]
               .strip().lower() for r in metadata.requires("ray") or []
               if 'extra == "default"' in r}
    added = sorted(default - base)
    total = 0
    found = []
    for name in added:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(name)
        for f in dist.files or []:
            p = dist.locate_file(f)
            if os.path.isfile(p):
                total += os.path.getsize(p)
    return (f"{len(found)} packages ({', '.join(found)}), {total / 1e6:.0f} MB on disk, "
            "not counting their own dependencies")


def _summary(name: str, off: list[float], on: list[float]) -> list[str]:
    mo, mn = statistics.median(off), statistics.median(on)
    return [name, f"{mo:.2f} ({min(off):.2f}-{max(off):.2f})",
            f"{mn:.2f} ({min(on):.2f}-{max(on):.2f})", f"{mn / mo:.3f}x"]


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_metrics_overhead")
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--ray-pairs", type=int, default=3)
    a = ap.parse_args()
    table = events_table_of(ROWS, FILES)
    local_run(table, False)  # warm the page cache and imports
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(a.pairs):
        for served in (False, True):
            runs[served].append(local_run(table, served))
    batches = runs[False][0]["batches"]
    rows = [_summary("local: CPU (s)", [r["cpu"] for r in runs[False]],
                     [r["cpu"] for r in runs[True]]),
            _summary("local: wall (s)", [r["wall"] for r in runs[False]],
                     [r["wall"] for r in runs[True]])]
    per_batch_us = (statistics.median(r["cpu"] for r in runs[True])
                    - statistics.median(r["cpu"] for r in runs[False])) / batches * 1e6
    scrapes = statistics.median(r["scrapes"] for r in runs[True])
    if a.ray_pairs:
        import logging

        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 object_store_memory=300 * 1024 * 1024, logging_level=logging.WARNING)
        try:
            ray_run(table, 0)  # warm the workers
            ray_runs: dict[float, list[dict[str, float]]] = {0: [], 1: []}
            for _ in range(a.ray_pairs):
                for interval in (0, 1):
                    ray_runs[interval].append(ray_run(table, interval))
        finally:
            ray.shutdown()
        rows += [_summary("ray, metrics_interval_s 0 vs 1: CPU (s)",
                          [r["cpu"] for r in ray_runs[0]], [r["cpu"] for r in ray_runs[1]]),
                 _summary("ray, metrics_interval_s 0 vs 1: wall (s)",
                          [r["wall"] for r in ray_runs[0]], [r["wall"] for r in ray_runs[1]])]
    print(f"{ROWS:,} rows in {FILES} files, batchSize {BATCH} ({batches} batches); "
          f"{a.pairs} interleaved pairs (local), {a.ray_pairs} (Ray); served runs scraped every "
          f"{SCRAPE_S} s (median {scrapes:.0f} scrapes a run); load average "
          f"{os.getloadavg()[0]:.1f} at the end.\n")
    print(md_table(["measure", "without (median, range)", "with (median, range)",
                    "with / without"], rows))
    print(f"\nPer batch, served less not served (CPU medians): {per_batch_us:+.1f} us.")
    print(f"The ray-metrics extra (ray[default]) adds {extra_size()}.")


if __name__ == "__main__":
    main()
