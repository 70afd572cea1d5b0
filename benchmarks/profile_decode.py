"""Where 1.5x PyIceberg is out of reach: the CPU a read of a matrix cell's table costs
each contender against the cost of decoding its Parquet files alone (issue 30, item 2).
Not a benchmark (no ``run(scale)``): a tool for the "Defaults matrix" section of
RESULTS.md.

    uv run python -m benchmarks.profile_decode [--cells 32:1,32:4,32:16,256:16] [--reps 3]
        [--rounds 2]

For each cell (``SIZE_MB:ROW_GROUPS``: the matrix's cached Parquet files, on the local
disk, in a SQLite catalog) it starts, per round, one fresh process per contender (as
:mod:`benchmarks.bench_matrix` does: imports and catalog untimed) and times ``reps`` reads
in each, interleaved: icefloe at its defaults (2 reader threads), PyIceberg, PyArrow's
dataset reader and ``decode``: ``pq.read_table`` of each file in turn (Arrow's C++ Parquet
reader with its own threads; no Iceberg, no batching, no projection). It prints each one's
median wall and CPU seconds per read (the process's CPU, all its threads).

When every contender is bound by the 2 cores, a read's wall time tends to its CPU time
over the cores it keeps busy, so icefloe at 1.5x PyIceberg needs about 1/1.5 of
PyIceberg's CPU per read; ``decode`` is a floor under any reader's CPU (each must decode
every page of every column chunk).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks.bench_matrix import MB, Contender, cached_files, local_catalog
from benchmarks.common import event_rows, median

KINDS = {"icefloe (defaults)": {"kind": "icefloe", "options": {}, "threads": 2},
         "pyiceberg": {"kind": "pyiceberg"}, "pyarrow dataset": {"kind": "pyarrow"},
         "decode": {"kind": "decode"}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", default="32:1,32:4,32:16")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with local_catalog("icefloe-profile-decode-") as (props, catalog):
        for cell in args.cells.split(","):
            size_mb, groups = (int(x) for x in cell.split(":"))
            files = cached_files(size_mb * MB, groups)
            identifier = f"matrix.t_{size_mb}mb_{groups}rg"
            table = catalog.create_table(identifier, schema=event_rows(1).schema)
            table.add_files([p.as_uri() for p in files])
            seconds: dict[str, list[float]] = {k: [] for k in KINDS}
            cpus: dict[str, list[float]] = {k: [] for k in KINDS}
            names = list(KINDS)
            load = []
            for r in range(args.rounds):
                load.append(_load())
                procs: dict[str, Any] = {n: Contender({"identifier": identifier,
                                                      "catalog": props, "s3": None,
                                                      **KINDS[n]}) for n in names}
                try:
                    for proc in procs.values():
                        proc.ready()
                    for rep in range(args.reps):
                        k = (r + rep) % len(names)
                        for name in names[k:] + names[:k]:
                            s, _, c = procs[name].read()
                            seconds[name].append(s)
                            cpus[name].append(c)
                finally:
                    for proc in procs.values():
                        proc.close()
            load.append(_load())
            floor = median(cpus["decode"])
            print(f"{size_mb} MB x {groups} row groups ({len(files)} files), load "
                  f"{' / '.join(load)}, {args.rounds} fresh processes x {args.reps} reads:")
            for name in names:
                print(f"  {name:20s} wall {median(seconds[name]):.3f} s  CPU "
                      f"{median(cpus[name]):.3f} s ({median(cpus[name]) / floor:.2f}x decode)"
                      f"  CPU runs {', '.join(f'{c:.2f}' for c in sorted(cpus[name]))}",
                      flush=True)


def _load() -> str:
    import os

    return f"{os.getloadavg()[0]:.1f}"


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
