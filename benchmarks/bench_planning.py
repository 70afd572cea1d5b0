"""Planning at scale: initial enumeration of a table of 100k (quick) / 1M (full) data files.

Synthetic manifests (PyIceberg's manifest writer, 2,000 entries per manifest with
column stats for 5 columns; the data files do not exist). Three planners, each without
and with a row filter (``id >= X`` keeping the last 10% of the files by their ``id``
bounds: every entry's stats are read, a tenth of the files planned):

- icefloe: ``TableSplitPlanner(...).plan_snapshot(snapshot)`` iterated, keeping no split;
- PyIceberg: ``table.scan(row_filter=...).plan_files()`` (which returns a list);
- Java Iceberg 1.10.2: ``table.newScan().planFiles()`` iterated to the end, in a fresh
  JVM of the interop environment (:mod:`benchmarks.java_planning`), timed inside the JVM;
  the first pass of the fresh JVM (as icefloe's and PyIceberg's fresh processes) and a
  second, warm pass in the same JVM are both reported, and JVM start-up and the table
  load apart. Java plans on its worker pool (one thread per core: 2 here); a third Java
  row runs it with one worker thread.

Each icefloe / PyIceberg measurement runs in a fresh subprocess that reports its wall time
and its peak RSS (``VmHWM``, reset after imports and table-metadata load; not
``ru_maxrss``, which a child inherits from its parent) above the baseline RSS taken at
that point. Every repetition runs every contender, in a rotating order.
icefloe plans with the compiled manifest decoder when it is built
(``icefloe.enumerator._native_manifest``: manifests decoded on a thread pool, GIL
released); then two more rows plan with the pure-Python decoder
(``ICEFLOE_NATIVE_DECODER=0``), what users without a wheel get.
Targets: icefloe >= 3x PyIceberg; icefloe >= Java's rate (entries/s) with and without
the filter; issue 31: >= 1.5x a warm JVM's rate without the filter and >= 1.2x with it;
enumerator peak < 300 MB over baseline.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable
from typing import Any

from benchmarks import java_planning
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
JAVA_TARGET = 1.0
WARM_TARGET = 1.5  # issue 31: rate vs a warm JVM's planFiles(), no filter
WARM_FILTER_TARGET = 1.2  # and with the filter
SKIP_PYICEBERG = "ICEFLOE_BENCH_SKIP_PYICEBERG"
"""``1``: no PyIceberg rows (minutes at 1M), for repeated runs that compare with Java."""
MEMORY_TARGET_MB = 300.0
ROWS_PER_FILE = 100_000  # the synthetic files' id ranges: file i holds ids i*100k ..
KEEP = 0.1


def filter_column_value(n_files: int) -> tuple[str, int]:
    """``id >= value`` keeps the files from ``(1 - KEEP) * n_files`` on (by their bounds)."""
    return "id", int(n_files * (1 - KEEP)) * ROWS_PER_FILE


def filter_text(n_files: int) -> str:
    column, value = filter_column_value(n_files)
    return f"{column} >= {value}"


def _child(contender: str, n_files: int) -> None:
    from icefloe.enumerator import columnar
    from icefloe.enumerator.planner import TableSplitPlanner

    if "-py" in contender:  # the pure-Python decoder even where the compiled one is built
        os.environ[columnar.NATIVE_ENV] = "0"
    st = synthetic_table(n_files, 2)
    table = st.static()
    snapshot = table.metadata.snapshot_by_id(st.new_id)
    planner_name = contender.split("-")[0]
    row_filter = filter_text(n_files) if contender.endswith("-filter") else None
    peak_before = peak_rss_mb()  # imports and metadata load
    reset_peak_rss()
    base = rss_mb()
    cpu = time.process_time()
    start = time.perf_counter()
    if planner_name == "icefloe":
        planner = TableSplitPlanner(table.metadata, table.io, table.schema(), row_filter, True,
                                    128 * 1024 * 1024)
        count = sum(1 for _ in planner.plan_snapshot(snapshot))
    else:
        scan = table.scan(row_filter=row_filter) if row_filter else table.scan()
        count = len(scan.plan_files())
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    peak = peak_rss_mb()
    child_report(contender=contender, seconds=seconds, cpu_s=cpu, count=count, base_mb=base,
                 peak_mb=peak, over_mb=peak - max(base, 0.0), peak_before_mb=peak_before,
                 native=columnar.native_decoder() is not None)


def _java(metadata: str, n_files: int, filtered: bool, threads: int | None
          ) -> Callable[[], dict[str, Any]]:
    def run() -> dict[str, Any]:
        report = java_planning.plan_files(
            metadata, 2, threads, filter_column_value(n_files) if filtered else None)
        first, warm = report["seconds"]
        return {**report, "seconds": first, "warm_s": warm}
    return run


def run(scale: str) -> str:
    n_files = pick(scale, 100_000, 1_000_000)
    reps = pick(scale, 3, 3)
    pyiceberg_reps = pick(scale, 3, 2)  # ~3 min per run at 1M
    if os.environ.get(SKIP_PYICEBERG) == "1":  # repeated runs against Java only
        pyiceberg_reps = 0
    st = synthetic_table(n_files, 2)  # build (cached) before timing
    cp, why_not = java_planning.classpath()
    contenders: dict[str, Callable[[], dict[str, Any]]] = {}
    from icefloe.enumerator import columnar

    native = columnar.native_decoder() is not None
    planners: tuple[str, ...] = ("icefloe", "icefloe-py") if native else ("icefloe",)
    if pyiceberg_reps:
        planners += ("pyiceberg",)
    for filtered in (False, True):
        suffix = "-filter" if filtered else ""
        for name in planners:
            contenders[name + suffix] = functools.partial(
                run_child, MODULE, name + suffix, str(n_files), timeout=7200)
        if cp is not None:
            contenders["java" + suffix] = _java(st.metadata_path, n_files, filtered, None)
    if cp is not None:
        contenders["java-1thread"] = _java(st.metadata_path, n_files, False, 1)
    res: dict[str, list[dict[str, Any]]] = {n: [] for n in contenders}
    names = list(contenders)
    loads = []
    for r in range(reps):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            if name.startswith("pyiceberg") and r >= pyiceberg_reps:
                continue
            loads.append(os.getloadavg()[0])
            res[name].append(contenders[name]())
    t = {n: median([x["seconds"] for x in v]) for n, v in res.items()}
    warm = {n: median([x["warm_s"] for x in v]) for n, v in res.items() if n.startswith("java")}
    mem = {n: median([x["over_mb"] for x in v]) for n, v in res.items() if "over_mb" in v[0]}
    rate = {n: n_files / s for n, s in t.items()}

    def vs_java(seconds: float, filtered: bool) -> str:
        ref = "java-filter" if filtered else "java"
        return f"{t[ref] / seconds:.2f}x / {warm[ref] / seconds:.2f}x" if ref in t else "-"

    def row(name: str, label: str, filt: str) -> list[str]:
        v = res[name]
        if name.startswith("java"):
            runs = ", ".join(f"{fmt_s(x['seconds'])} (warm {fmt_s(x['warm_s'])})" for x in v)
            memory = "-"
        else:
            runs = ", ".join(f"{fmt_s(x['seconds'])} / {x['over_mb']:.0f} MB" for x in v)
            memory = f"{mem[name]:.0f} MB"
        return [label, filt, f"{v[0]['count']:,}", fmt_s(t[name]), f"{rate[name]:,.0f}",
                vs_java(t[name], "filter" in name), memory, runs]

    rows = []
    decoder_name = "compiled decoder" if native else "pure-Python decoder"
    for filtered in (False, True):
        suffix = "-filter" if filtered else ""
        filt = f"`{filter_text(n_files)}`" if filtered else "none"
        rows.append(row("icefloe" + suffix, f"icefloe ({decoder_name})", filt))
        if native:
            rows.append(row("icefloe-py" + suffix, "icefloe (pure-Python decoder)", filt))
        if "java" + suffix in res:
            rows.append(row("java" + suffix, "Java `planFiles()`, fresh JVM", filt))
            jw = res["java" + suffix]
            w = warm["java" + suffix]
            rows.append(["Java `planFiles()`, warm (2nd pass)", filt, f"{jw[0]['count']:,}",
                         fmt_s(w), f"{n_files / w:,.0f}", vs_java(w, filtered), "-",
                         ", ".join(fmt_s(x["warm_s"]) for x in jw)])
        if pyiceberg_reps:
            rows.append(row("pyiceberg" + suffix, "PyIceberg `plan_files()`", filt))
    if "java-1thread" in res:
        rows.append(row("java-1thread", "Java `planFiles()`, 1 worker thread, fresh JVM",
                        "none"))

    lines = [
        f"icefloe planned with the {decoder_name}"
        + (" (rows 'pure-Python decoder': `ICEFLOE_NATIVE_DECODER=0`)" if native else "")
        + f" on {os.cpu_count()} cores. "
        f"{n_files:,} data files in {-(-n_files // 2000)} manifests; filter `"
        f"{filter_text(n_files)}` keeps {KEEP:.0%} of them (every entry's stats are read). "
        f"Fresh process per measurement (icefloe, PyIceberg: a Python child; Java: a JVM), "
        f"{reps} rotating runs each ({pyiceberg_reps} for PyIceberg), medians. Load average "
        f"during the runs: {min(loads):.1f}-{max(loads):.1f} (2 cores).",
        "",
    ]
    if pyiceberg_reps:
        speedup = t["pyiceberg"] / t["icefloe"]
        speedup_f = t["pyiceberg-filter"] / t["icefloe-filter"]
        lines.append(
            f"- icefloe is **{speedup:.2f}x** faster than PyIceberg `plan_files()` without a "
            f"filter, **{speedup_f:.2f}x** with it (target >= {SPEED_TARGET}x: "
            f"{verdict(min(speedup, speedup_f) >= SPEED_TARGET)})")
    else:
        lines.append(f"- PyIceberg: not run ({SKIP_PYICEBERG}=1)")
    if "java" in t:
        for suffix, label in (("", "without a filter"), ("-filter", "with the filter")):
            cold = t["java" + suffix] / t["icefloe" + suffix]
            hot = warm["java" + suffix] / t["icefloe" + suffix]
            warm_target = WARM_FILTER_TARGET if suffix else WARM_TARGET
            lines.append(
                f"- {label}: icefloe's rate is **{cold:.2f}x** Java's first `planFiles()` in a "
                f"fresh JVM ({verdict(cold >= JAVA_TARGET)}, target >= {JAVA_TARGET:.1f}x) "
                f"and **{hot:.2f}x** a warm JVM's (issue 31's target >= {warm_target:.1f}x: "
                f"{verdict(hot >= warm_target)})")
        java_runs = [x for n, v in res.items() if n.startswith("java") for x in v]
        lines.append(
            f"- Java outside the timed passes: JVM start-up to `main` "
            f"{fmt_s(median([x['startup_s'] for x in java_runs]))}, table load (Hadoop, "
            f"metadata JSON) {fmt_s(median([x['load_s'] for x in java_runs]))}, whole JVM "
            f"process (start-up, load, two passes) "
            f"{fmt_s(median([x['process_s'] for x in res['java']]))} without the filter")
    else:
        lines.append(f"- Java Iceberg: **not measured** ({why_not}); {java_planning.HOW_TO}")
    worst = max(x["over_mb"] for n in ("icefloe", "icefloe-filter") for x in res[n])
    lines.append(
        f"- icefloe enumerator peak **{mem['icefloe']:.0f} MB** over baseline "
        f"({mem['icefloe-filter']:.0f} MB filtered)"
        + (f" vs {mem['pyiceberg']:.0f} MB for PyIceberg" if "pyiceberg" in mem else "")
        + f" (target < {MEMORY_TARGET_MB:.0f} MB: "
        f"{verdict(worst < MEMORY_TARGET_MB)}; worst run {worst:.0f} MB)")
    return "\n".join(lines) + "\n\n" + md_table(
        ["planner", "filter", "files planned", "median", "entries/s",
         "rate vs Java (fresh / warm JVM)", "peak RSS over baseline",
         "runs (time / peak over baseline)"], rows)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=2, metavar=("CONTENDER", "N_FILES"))
    ap.add_argument("--scale", default="quick")
    a = ap.parse_args()
    if a.child:
        _child(a.child[0], int(a.child[1]))
    else:
        print(run(a.scale))
