"""The idle poll at 100 and at 100,000 snapshots, and Java's refresh, interleaved (issue 26).

``uv run python -m benchmarks.bench_idle [--blocks N]`` (under the bench lock). Two tables
in one SQLite catalog each, as :mod:`benchmarks.bench_history` builds them (one real append
at the head after 100, or 100,000, synthetic snapshots; 0.1 MB and 65 MB of metadata JSON),
and three local streams (``pollIntervalMs=100``, ``startingVersion=latest``), each in a
child process, **all polling at once**: one per table, and a third on the large table
with the pointer probe of before session 11 (:func:`pooled_probe`: a pool check-out per
poll), the before of a before / after in the same run. Beside them, block after block,
Java Iceberg's ``table.refresh()`` of the unchanged table
(``benchmarks/java/RefreshTable.java``: one refresh per 100 ms after a JIT warm-up; a
Hadoop-catalog copy of the same metadata), alternately of the small and the large table.
A block measures the streams over the same seconds as that block's Java run, so the
figures of a block share the machine's load; the verdicts take medians over the blocks,
with their range.

Per stream and block: the enumeration thread's CPU per idle poll (``refresh`` +
``enumerate``, ``time.thread_time``), of which the pointer probe (the catalog's one-row
``SELECT``), and the whole process's CPU per poll (reader and queue threads waking
included), with the Python garbage collections in the block (a collection of the oldest
generation walks every object, the 100,000 snapshots too).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_history import build, hadoop_copy
from benchmarks.common import StreamChild, md_table, serve_stream_reports, verdict

POLL_MS = 100
HISTORIES = (100, 100_000)
BLOCK_REFRESHES = 60  # Java's measured refreshes per block: 6 s at 100 ms


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def pooled_probe(self: Any, current: Any) -> Any:
    """The pointer probe before session 11: a pool check-out and check-in per poll
    (``--pooled``: the before of the before / after, in the same run)."""
    from pyiceberg.exceptions import NoSuchTableError

    from icefloe.catalog.refresh import Pointer

    connection = self._engine.raw_connection()
    try:
        cursor = connection.cursor()
        try:
            cursor.execute(self._sql, self._args)
            row = cursor.fetchone()
        finally:
            cursor.close()
    except BaseException:
        connection.invalidate()
        raise
    finally:
        connection.close()
    if row is None:
        raise NoSuchTableError(f"Table does not exist: {current.name()}")
    return Pointer(row[0])


def child(root: str, identifier: str, variant: str = "kept") -> None:
    """A local stream on ``identifier``, answering reports: polls, the enumeration
    thread's CPU in them (and in the pointer probe), the process's CPU, collections.
    ``variant``: ``kept`` (the probe's own connection) or ``pooled`` (:func:`pooled_probe`)."""
    from icefloe import IcebergSource
    from icefloe.catalog.refresh import SqlPointerProbe
    from icefloe.enumerator.continuous import ContinuousEnumerator
    from tests.helpers.tables import make_catalog

    totals = {"polls": 0, "poll_cpu": 0.0, "probe_cpu": 0.0}
    refresh, enumerate_ = ContinuousEnumerator.refresh, ContinuousEnumerator.enumerate
    probe = pooled_probe if variant == "pooled" else SqlPointerProbe.probe

    def timed_refresh(self: ContinuousEnumerator) -> None:
        start = time.thread_time()
        try:
            refresh(self)
        finally:
            totals["polls"] += 1
            totals["poll_cpu"] += time.thread_time() - start

    def timed_enumerate(self: ContinuousEnumerator, *args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return enumerate_(self, *args, **kwargs)
        finally:
            totals["poll_cpu"] += time.thread_time() - start

    def timed_probe(self: SqlPointerProbe, current: Any) -> Any:
        start = time.thread_time()
        try:
            return probe(self, current)
        finally:
            totals["probe_cpu"] += time.thread_time() - start

    ContinuousEnumerator.refresh = timed_refresh  # type: ignore[method-assign]
    ContinuousEnumerator.enumerate = timed_enumerate  # type: ignore[method-assign]
    SqlPointerProbe.probe = timed_probe  # type: ignore[method-assign]
    catalog = make_catalog(Path(root))
    stream = IcebergSource(identifier, catalog=catalog, options={
        "pollIntervalMs": str(POLL_MS), "startingVersion": "latest"}).stream()
    serve_stream_reports(stream, lambda item: None, lambda: {
        **totals, "cpu": _cpu(),
        "collections": [s["collections"] for s in gc.get_stats()]})


def java_block(table_dir: Path) -> subprocess.Popen[str]:
    """Java's refreshes of the unchanged table: a JIT warm-up, then
    :data:`BLOCK_REFRESHES` at the poll cadence (``RefreshTable``), started now."""
    from benchmarks.java_planning import classpath, compiled_class

    cp, why = classpath()
    if cp is None:
        raise RuntimeError(f"Java's refresh needs the interop environment: {why}")
    args = compiled_class(cp, "RefreshTable")
    return subprocess.Popen(["java", "-Xmx1g", *args, str(table_dir),
                             str(2000 + BLOCK_REFRESHES), str(POLL_MS)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def measure(blocks: int, histories: tuple[int, int] = HISTORIES) -> dict[str, Any]:
    """Run the blocks (module docstring) on tables of ``histories`` snapshots."""
    root = Path(tempfile.mkdtemp(prefix="icefloe-idle-"))
    streams: dict[int, StreamChild] = {}
    try:
        tables: dict[int, tuple[Path, float]] = {}
        for n in histories:
            sub = root / f"h{n}"
            sub.mkdir()
            catalog, identifier = build(sub, n)
            size = Path(catalog.load_table(identifier).metadata_location
                        .removeprefix("file://")).stat().st_size
            tables[n] = (hadoop_copy(catalog, identifier, sub), size / 1e6)
            streams[n] = StreamChild("benchmarks.bench_idle", str(sub), identifier)
            if n == histories[-1]:  # the same table, the probe before this session's
                streams[-n] = StreamChild("benchmarks.bench_idle", str(sub), identifier,
                                          "pooled")
        for s in streams.values():  # started and polling
            first = s.report()
            deadline = time.monotonic() + 300
            while s.report()["polls"] < first["polls"] + 3:
                if time.monotonic() > deadline:
                    raise RuntimeError("a stream did not start polling in 300 s")
                time.sleep(0.1)
        rows = []
        for b in range(blocks):
            java_n = histories[b % len(histories)]
            java = java_block(tables[java_n][0])
            # the icefloe figures over Java's run: from its start to its end
            before = {n: s.report() for n, s in streams.items()}
            t0 = time.monotonic()
            out, err = java.communicate(timeout=600)
            if java.returncode != 0:
                raise RuntimeError(f"RefreshTable failed: {err[-2000:]}")
            after = {n: s.report() for n, s in streams.items()}
            row: dict[str, Any] = {"block": b, "seconds": time.monotonic() - t0,
                                   "load1": os.getloadavg()[0], "java_history": java_n,
                                   "java_ms": json.loads(out.strip().splitlines()[-1])
                                   ["cpu_ms_per_refresh"]}
            for n in streams:
                polls = max(1, after[n]["polls"] - before[n]["polls"])
                row[f"h{n}"] = {
                    "polls": polls,
                    "poll_ms": (after[n]["poll_cpu"] - before[n]["poll_cpu"]) / polls * 1000,
                    "probe_ms": (after[n]["probe_cpu"] - before[n]["probe_cpu"]) / polls * 1000,
                    "process_ms": (after[n]["cpu"] - before[n]["cpu"]) / polls * 1000,
                    "gc": [a - b for a, b in zip(after[n]["collections"],
                                                 before[n]["collections"], strict=True)]}
            rows.append(row)
        return {"blocks": rows, "histories": list(histories),
                "sizes_mb": {f"h{n}": tables[n][1] for n in histories}}
    finally:
        for s in streams.values():
            try:
                s.stop()
            except Exception:  # the first error is the one raised
                s.proc.kill()
        shutil.rmtree(root, ignore_errors=True)


def _spread(values: list[float], digits: int = 3) -> str:
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def summarize(result: dict[str, Any]) -> str:
    """A row per block, then medians with their range and the verdicts."""
    small, large = result["histories"]
    s, g, old = f"h{small}", f"h{large}", f"h-{large}"  # the blocks' keys (JSON: strings)
    blocks = result["blocks"]
    table = []
    for r in blocks:
        table.append([r["block"] + 1, f"{r['load1']:.1f}",
                      f"{r[s]['poll_ms']:.3f} ({r[s]['probe_ms']:.3f})",
                      f"{r[g]['poll_ms']:.3f} ({r[g]['probe_ms']:.3f})",
                      f"{r[g]['poll_ms'] / r[s]['poll_ms']:.2f}x",
                      f"{r[old]['poll_ms']:.3f} ({r[old]['probe_ms']:.3f})",
                      f"{r['java_ms']:.3f} ({r['java_history']:,})",
                      f"{r[s]['process_ms']:.2f} / {r[g]['process_ms']:.2f}",
                      f"{r[s]['gc'][2]} / {r[g]['gc'][2]}"])
    ratio = [r[g]["poll_ms"] / r[s]["poll_ms"] for r in blocks]
    java_large = [r["java_ms"] for r in blocks if r["java_history"] == large]
    java_small = [r["java_ms"] for r in blocks if r["java_history"] == small]
    ours_large = [r[g]["poll_ms"] for r in blocks]
    ours_small = [r[s]["poll_ms"] for r in blocks]
    # against Java's refresh of the same (large) table in the same block
    vs_java = [r[g]["poll_ms"] / r["java_ms"] for r in blocks
               if r["java_history"] == large]
    loads = [r["load1"] for r in blocks]
    kept_vs_pooled = [r[g]["poll_ms"] / r[old]["poll_ms"] for r in blocks]
    pooled = [r[old]["poll_ms"] for r in blocks]
    lines = [
        f"{len(blocks)} blocks of about {BLOCK_REFRESHES * POLL_MS / 1000:.0f} s (Java's "
        f"measured refreshes after its warm-up), the three streams polling throughout; metadata "
        f"{result['sizes_mb'][s]:.1f} MB and {result['sizes_mb'][g]:.1f} MB; "
        f"1-minute load average {min(loads):.1f}-{max(loads):.1f}.",
        "",
        md_table(["block", "load", f"idle poll at {small:,} (probe) ms",
                  f"idle poll at {large:,} (probe) ms", f"{large:,} / {small:,}",
                  f"before: pooled probe, {large:,} (probe) ms",
                  "Java refresh ms (table)", "process per poll ms (small / large)",
                  "oldest-generation collections (small / large)"], table),
        "",
        f"- idle poll, medians over the blocks (range): {small:,} snapshots "
        f"{_spread(ours_small)} ms, {large:,} snapshots {_spread(ours_large)} ms; per block "
        f"{large:,} / {small:,}: {_spread(ratio, 2)}",
        f"- before (a pool check-out per poll), {large:,} snapshots: {_spread(pooled)} ms; "
        f"per block after / before: {_spread(kept_vs_pooled, 2)}",
        f"- Java's refresh of the unchanged table: {small:,} snapshots "
        f"{_spread(java_small) if java_small else 'n/a'} ms, {large:,} snapshots "
        f"{_spread(java_large) if java_large else 'n/a'} ms",
        f"- idle poll at {large:,} snapshots within 1.5x of {small:,}: "
        f"{verdict(statistics.median(ratio) <= 1.5)} (median {statistics.median(ratio):.2f}x)",
        f"- idle poll at {large:,} snapshots at most Java's refresh of the same table in the "
        f"same block: "
        + (f"{verdict(statistics.median(vs_java) <= 1.0)} (median "
           f"{statistics.median(vs_java):.2f}x, range {min(vs_java):.2f}-{max(vs_java):.2f}x "
           f"over {len(vs_java)} blocks)" if vs_java else "n/a"),
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_idle")
    ap.add_argument("--child", nargs="+", metavar="ROOT TABLE [VARIANT]")
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--histories", default=",".join(map(str, HISTORIES)),
                    help="the two history lengths (snapshots), small first")
    ap.add_argument("--json", help="also write the raw result here")
    ap.add_argument("--report", metavar="JSON", help="only summarize a --json result")
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    small, large = (int(x) for x in a.histories.split(","))
    result = json.loads(Path(a.report).read_text()) if a.report else \
        measure(a.blocks, (small, large))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    print(summarize(result))


if __name__ == "__main__":
    main()
