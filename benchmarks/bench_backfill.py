"""Backfill throughput: icefloe local read vs plain PyArrow dataset vs PyIceberg.

Two tables: a big one (quick 2M rows, full 20M) and one of many small files (quick
1,000, full 10,000). Each contender reads every row of the current snapshot; the
three are interleaved round-robin and the median of ``reps`` runs is reported.
MB/s counts decoded Arrow bytes (``RecordBatch.nbytes``). Target: icefloe >= 0.9x
plain PyArrow (``pyarrow.dataset.dataset(paths).to_batches()``, the machine's limit).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pyarrow.dataset as ds

from benchmarks.common import (
    BenchTable,
    events_table,
    fmt_rate,
    fmt_s,
    interleaved,
    md_table,
    median,
    pick,
    small_files_table,
    verdict,
)
from icefloe import IcebergSource

TARGET = 0.9


def _cpu() -> float:
    """CPU seconds of this process so far (user + system, every thread)."""
    t = os.times()
    return t.user + t.system


def _drain(batches: Any) -> tuple[int, int]:
    rows = nbytes = 0
    for b in batches:
        rows += b.num_rows
        nbytes += b.nbytes
    return rows, nbytes


def _with_cpu(fn: Callable[[], tuple[int, int]]) -> Callable[[], tuple[int, int, float]]:
    """``fn`` returning its CPU seconds too: on a shared machine the CPU a reader burns is
    steadier than its wall time (other jobs take cores away from one run, not another)."""
    def run() -> tuple[int, int, float]:
        start = _cpu()
        rows, nbytes = fn()
        return rows, nbytes, _cpu() - start
    return run


def contenders(bt: BenchTable, parallelism: int = 2,
               options: dict[str, str] | None = None) -> dict[str, Callable[[], tuple[int, int]]]:
    catalog = bt.catalog()
    paths = bt.data_paths()

    def icefloe() -> tuple[int, int]:
        src = IcebergSource(bt.identifier, catalog=catalog, options=options)
        return _drain(src.read(parallelism=parallelism))

    def pyarrow() -> tuple[int, int]:
        return _drain(ds.dataset(paths, format="parquet").to_batches())

    def pyiceberg() -> tuple[int, int]:
        return _drain(catalog.load_table(bt.identifier).scan().to_arrow_batch_reader())

    return {"icefloe": icefloe, "pyarrow": pyarrow, "pyiceberg": pyiceberg}


def measure(bt: BenchTable, reps: int) -> dict[str, Any]:
    runs = interleaved({k: _with_cpu(f) for k, f in contenders(bt).items()}, reps)
    out: dict[str, Any] = {}
    for name, results in runs.items():
        rows, nbytes, _ = results[0][1]
        assert all(r[1][0] == rows for r in results), f"{name}: row count changed"
        t = median([r[0] for r in results])
        out[name] = {"seconds": t, "rows": rows, "bytes": nbytes,
                     "rows_s": rows / t, "mb_s": nbytes / t / 1e6,
                     "cpu": median([r[1][2] for r in results]),
                     "all": [r[0] for r in results]}
    return out


def run(scale: str) -> str:
    sections = []
    summary = []
    for label, bt, reps in (("big table", events_table(scale), pick(scale, 5, 7)),
                            ("small files", small_files_table(scale), pick(scale, 7, 3))):
        res = measure(bt, reps)
        files = len(bt.data_paths())
        rows = []
        base = res["pyarrow"]["seconds"]
        for name in ("icefloe", "pyarrow", "pyiceberg"):
            r = res[name]
            rows.append([name, f"{r['rows']:,}", fmt_s(r["seconds"]),
                         fmt_rate(r["rows_s"], "rows/s"), f"{r['mb_s']:.0f} MB/s",
                         f"{base / r['seconds']:.2f}x", f"{r['cpu']:.2f} s",
                         f"{res['pyarrow']['cpu'] / r['cpu']:.2f}x",
                         ", ".join(fmt_s(x) for x in r["all"])])
        ratio = base / res["icefloe"]["seconds"]
        vs_pi = res["pyiceberg"]["seconds"] / res["icefloe"]["seconds"]
        cpu_ratio = res["pyarrow"]["cpu"] / res["icefloe"]["cpu"]
        summary.append(f"- {label}: icefloe = **{ratio:.2f}x** plain PyArrow "
                       f"(target >= {TARGET}x: {verdict(ratio >= TARGET)}), "
                       f"**{vs_pi:.2f}x** PyIceberg; CPU per read {cpu_ratio:.2f}x PyArrow's "
                       "(higher: less CPU)")
        sections.append(f"**{label}** ({files:,} files, {res['icefloe']['rows']:,} rows; "
                        f"median of {reps}, interleaved)\n\n" + md_table(
                            ["reader", "rows", "median", "rows/s", "Arrow MB/s",
                             "speed vs PyArrow", "CPU (median)", "CPU vs PyArrow", "runs"],
                            rows))
    return ("icefloe: `IcebergSource(...).read(parallelism=2)`; pyarrow: "
            "`pyarrow.dataset.dataset(paths).to_batches()` over the same files; pyiceberg: "
            "`table.scan().to_arrow_batch_reader()`. All batches iterated, nothing kept. "
            "CPU: user + system seconds of the process (all threads) during one read.\n\n"
            + "\n".join(summary) + "\n\n" + "\n\n".join(sections))


if __name__ == "__main__":
    import sys

    print(run(sys.argv[1] if len(sys.argv) > 1 else "quick"))
