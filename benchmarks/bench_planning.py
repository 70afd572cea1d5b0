"""Planning at scale: initial enumeration of a table of 100k (quick) / 1M (full) data files.

Synthetic manifests (PyIceberg's manifest writer, 2,000 entries per manifest with
column stats for 5 columns; the data files do not exist). Each measurement runs in a
fresh subprocess that reports its wall time and its peak RSS (``VmHWM``, reset after
imports and table-metadata load; not ``ru_maxrss``, which a child inherits from its parent)
above the baseline RSS taken at that point. icefloe iterates
``TableSplitPlanner.plan_snapshot(snapshot)`` keeping no split; PyIceberg runs
``table.scan().plan_files()`` (which returns a list). Runs alternate between the two.
Targets: icefloe >= 3x faster; enumerator peak < 300 MB over baseline.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import (
    child_report,
    fmt_s,
    md_table,
    median,
    peak_rss_mb,
    pick,
    reset_peak_rss,
    rss_mb,
    run_child,
    synthetic_table,
    verdict,
)

MODULE = "benchmarks.bench_planning"
SPEED_TARGET = 3.0
MEMORY_TARGET_MB = 300.0


def _child(contender: str, n_files: int) -> None:
    from icefloe.enumerator.planner import TableSplitPlanner

    st = synthetic_table(n_files, 2)
    table = st.static()
    snapshot = table.metadata.snapshot_by_id(st.new_id)
    peak_before = peak_rss_mb()  # imports and metadata load
    reset_peak_rss()
    base = rss_mb()
    start = time.perf_counter()
    if contender == "icefloe":
        planner = TableSplitPlanner(table.metadata, table.io, table.schema(), None, True,
                                    128 * 1024 * 1024)
        count = sum(1 for _ in planner.plan_snapshot(snapshot))
    else:
        count = len(table.scan().plan_files())
    seconds = time.perf_counter() - start
    peak = peak_rss_mb()
    child_report(contender=contender, seconds=seconds, count=count, base_mb=base,
                 peak_mb=peak, over_mb=peak - max(base, 0.0), peak_before_mb=peak_before)


def run(scale: str) -> str:
    n_files = pick(scale, 100_000, 1_000_000)
    reps = pick(scale, 2, 3)
    synthetic_table(n_files, 2)  # build (cached) before timing
    res: dict[str, list[dict]] = {"icefloe": [], "pyiceberg": []}
    for r in range(reps):
        order = ["icefloe", "pyiceberg"] if r % 2 == 0 else ["pyiceberg", "icefloe"]
        for name in order:
            res[name].append(run_child(MODULE, name, str(n_files)))
    rows = []
    t = {n: median([x["seconds"] for x in v]) for n, v in res.items()}
    mem = {n: median([x["over_mb"] for x in v]) for n, v in res.items()}
    for name in ("icefloe", "pyiceberg"):
        v = res[name]
        rows.append([name, f"{v[0]['count']:,}", fmt_s(t[name]),
                     f"{v[0]['count'] / t[name]:,.0f} files/s",
                     f"{mem[name]:.0f} MB", f"{median([x['base_mb'] for x in v]):.0f} MB",
                     ", ".join(f"{fmt_s(x['seconds'])} / {x['over_mb']:.0f} MB" for x in v)])
    speedup = t["pyiceberg"] / t["icefloe"]
    return (
        f"{n_files:,} data files in {-(-n_files // 2000)} manifests; fresh subprocess per "
        f"measurement, {reps} alternating runs each, medians.\n\n"
        f"- icefloe is **{speedup:.2f}x** faster than PyIceberg `plan_files()` "
        f"(target >= {SPEED_TARGET}x: {verdict(speedup >= SPEED_TARGET)})\n"
        f"- icefloe enumerator peak **{mem['icefloe']:.0f} MB** over baseline vs "
        f"{mem['pyiceberg']:.0f} MB for PyIceberg (target < {MEMORY_TARGET_MB:.0f} MB: "
        f"{verdict(mem['icefloe'] < MEMORY_TARGET_MB)}; worst run "
        f"{max(x['over_mb'] for x in res['icefloe']):.0f} MB)\n\n"
        + md_table(["planner", "files", "median", "rate", "peak RSS over baseline",
                    "baseline RSS", "runs (time / peak over baseline)"], rows)
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=2, metavar=("CONTENDER", "N_FILES"))
    ap.add_argument("--scale", default="quick")
    a = ap.parse_args()
    if a.child:
        _child(a.child[0], int(a.child[1]))
    else:
        print(run(a.scale))
