"""The soak: a stream follows a table under a fast writer, compaction and expiry.

``make soak`` (``SOAK_MINUTES``, default 30) or
``uv run python -m benchmarks.bench_soak --minutes N``. Not part of ``make bench``.

A SQLite catalog in a temp dir. The parent process is the writer: it appends 5-row
batches as fast as PyIceberg commits them (the rate reached is reported), every
``COMPACT_EVERY`` commits rewrites the files of the last commits in a ``replace``
snapshot (skipped by the stream, as compactions are), and every ``EXPIRE_EVERY`` commits
expires all snapshots but the newest ``KEEP`` (PyIceberg's own commit cost grows with the
metadata; expiry keeps both sides' history bounded, as a production table's retention
does). The table has ``KEEP`` snapshots before the first window, as a table with a retention
policy has. A child process runs the local stream (``pollIntervalMs=200``, checkpoint on
disk, ``checkpoint_interval_s=1``) acknowledging every item, and reports its CPU, RSS,
lag, rows and the ids it saw.

Per window: snapshots committed, the stream's CPU per new snapshot, its RSS, lag (records
and seconds, from ``stream.lag``), checkpoint size. At the end: every row exactly once
(the writer's ids, and PyIceberg's scan of the head). Targets (issue 26): CPU per new
snapshot in the last window within 1.5x of the first, RSS growth under 50 MB, lag
without an upward trend, every row exactly once.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import StreamChild, md_table, median, serve_stream_reports, verdict

POLL_MS = 200
WINDOW_S = 60.0
COMPACT_EVERY = 100
EXPIRE_EVERY = 50
KEEP = 200
ROWS = 5
IDLE_S = 20.0


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def child(root: str) -> None:
    """The stream process: answers ``report`` lines on stdin with a JSON line."""
    from icefloe import IcebergSource
    from tests.helpers.tables import make_catalog

    catalog = make_catalog(Path(root))
    ckpt = Path(root) / "ckpt"
    seen: set[int] = set()
    counts = {"rows": 0, "duplicates": 0}
    source = IcebergSource("soak.t", catalog=catalog, options={
        "pollIntervalMs": str(POLL_MS), "startingVersion": "earliest"})
    stream = source.stream(checkpoint=str(ckpt), checkpoint_interval_s=1)

    def check(item: Any) -> None:
        for value in item.batch.column("id").to_pylist():
            if value in seen:
                counts["duplicates"] += 1
            seen.add(value)
        counts["rows"] += item.batch.num_rows

    def report() -> dict[str, Any]:
        r = resource.getrusage(resource.RUSAGE_SELF)
        lag = stream.lag
        size = sum(p.stat().st_size for p in ckpt.rglob("*") if p.is_file()) \
            if ckpt.exists() else 0
        return {"cpu": r.ru_utime + r.ru_stime, "rss_mb": _rss_mb(), "rows": counts["rows"],
                "distinct": len(seen), "duplicates": counts["duplicates"],
                "lag_records": lag.records, "lag_seconds": lag.seconds,
                "lag_snapshots": lag.snapshots, "checkpoint_bytes": size}

    serve_stream_reports(stream, check, report)


class Writer(threading.Thread):
    """Appends, compacts and expires until stopped; counts commits and ids written."""

    def __init__(self, catalog: Any) -> None:
        super().__init__(daemon=True)
        self.catalog = catalog
        self.commits = 0
        self.next_id = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from tests.helpers.tables import commit_replace, expire_snapshots, rows

        table = self.catalog.load_table("soak.t")
        try:
            while not self.stop.is_set():
                table.append(rows(ROWS, start=self.next_id))
                self.next_id += ROWS
                self.commits += 1
                if self.commits % COMPACT_EVERY == 0:
                    commit_replace(table)
                    table = table.refresh()
                if self.commits % EXPIRE_EVERY == 0:
                    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)
                    heads = {ref.snapshot_id for ref in table.metadata.refs.values()}
                    old = [s.snapshot_id for s in snapshots[:-KEEP] if s.snapshot_id not in heads]
                    if old:
                        expire_snapshots(table, old)
                        table = table.refresh()
        except BaseException as exc:
            self.error = exc


def soak(minutes: float, window_s: float = WINDOW_S) -> dict[str, Any]:
    from tests.helpers.tables import make_catalog, make_table, rows

    root = Path(tempfile.mkdtemp(prefix="icefloe-soak-"))
    try:
        catalog = make_catalog(root)
        make_table(catalog, "soak.t")
        child_process = StreamChild("benchmarks.bench_soak", str(root))
        report = child_process.report

        # the history a long-running table has: KEEP snapshots before the first window
        table = catalog.load_table("soak.t")
        for i in range(KEEP):
            table.append(rows(ROWS, start=ROWS * i))
        while report()["rows"] < ROWS * KEEP:
            time.sleep(0.2)
        # the stream's CPU at rest, per second (subtracted per window)
        idle0 = report()
        time.sleep(IDLE_S)
        idle_per_s = (report()["cpu"] - idle0["cpu"]) / IDLE_S
        writer = Writer(catalog)
        writer.next_id = ROWS * KEEP
        windows = []
        last = report()
        last_t = time.monotonic()
        writer.start()
        start = time.monotonic()
        commits_before = 0
        while time.monotonic() - start < minutes * 60:
            time.sleep(window_s)
            now, now_t = report(), time.monotonic()
            commits = writer.commits - commits_before
            commits_before = writer.commits
            busy = now["cpu"] - last["cpu"] - idle_per_s * (now_t - last_t)
            last_t = now_t
            windows.append({
                "t_min": (time.monotonic() - start) / 60, "commits": commits,
                "cpu_per_snapshot_ms": busy / max(1, commits) * 1000,
                "rss_mb": now["rss_mb"], "lag_records": now["lag_records"],
                "lag_seconds": now["lag_seconds"], "checkpoint_kb": now["checkpoint_bytes"] / 1e3})
            print(f"  window {len(windows)}: {windows[-1]}", file=sys.stderr, flush=True)
            last = now
            if writer.error is not None:
                raise RuntimeError(f"the writer failed: {writer.error!r}")
        writer.stop.set()
        writer.join()
        written = writer.next_id
        deadline = time.monotonic() + 300
        final = report()
        while final["distinct"] < written and time.monotonic() < deadline:
            time.sleep(0.5)
            final = report()
        child_process.stop()
        head_ids = catalog.load_table("soak.t").scan().to_arrow().column("id").to_pylist()
        return {"windows": windows, "written": written, "commits": writer.commits,
                "idle_cpu_per_s_ms": idle_per_s * 1000,
                "final": final, "oracle_rows": len(head_ids),
                "oracle_same": sorted(head_ids) == list(range(written))}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def plot(result: dict[str, Any], path: Path) -> None:
    """Four panels over time (matplotlib): CPU per snapshot, RSS, lag, checkpoint size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = result["windows"]
    t = [x["t_min"] for x in w]
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    for ax, key, label in zip(axes.flat, (
            "cpu_per_snapshot_ms", "rss_mb", "lag_seconds", "checkpoint_kb"), (
            "stream CPU per new snapshot (ms)", "stream RSS (MB)", "lag (s behind)",
            "checkpoint size (kB)"), strict=True):
        ax.plot(t, [x[key] for x in w], marker="o")
        ax.set_title(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("minutes")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=80)
    tmp.replace(path)


def summarize(result: dict[str, Any], minutes: float) -> str:
    w = result["windows"]
    first, lastw = w[0], w[-1]
    rate = result["commits"] / (minutes * 60)
    cpu_ok = lastw["cpu_per_snapshot_ms"] <= 1.5 * first["cpu_per_snapshot_ms"]
    rss_growth = max(x["rss_mb"] for x in w) - first["rss_mb"]
    half = len(w) // 2
    lag_trend = median([x["lag_seconds"] for x in w[half:]]) <= 2 * max(
        1.0, median([x["lag_seconds"] for x in w[:half]] or [0.0]))
    final = result["final"]
    once = (final["distinct"] == result["written"] and final["duplicates"] == 0
            and final["rows"] == result["written"] and result["oracle_same"])
    rows = [[f"{x['t_min']:.1f}", x["commits"], f"{x['cpu_per_snapshot_ms']:.1f}",
             f"{x['rss_mb']:.0f}", x["lag_records"], f"{x['lag_seconds']:.1f}",
             f"{x['checkpoint_kb']:.1f}"] for x in w]
    return "\n".join([
        f"{minutes:g} minutes; the writer reached {rate:.1f} commits/s ({result['commits']} "
        f"commits of {ROWS} rows; a `replace` every {COMPACT_EVERY}, expiry to the newest "
        f"{KEEP} every {EXPIRE_EVERY}; {KEEP} snapshots of history before the first "
        f"window); windows of {WINDOW_S:.0f} s. CPU per snapshot: the stream process's CPU "
        f"in the window less its CPU at rest ({result['idle_cpu_per_s_ms']:.1f} ms per "
        "second, measured before the writer started), per commit.",
        "",
        md_table(["minute", "commits", "stream CPU per snapshot (ms)", "RSS (MB)",
                  "lag (records)", "lag (s)", "checkpoint (kB)"], rows),
        "",
        f"- CPU per new snapshot, last window within 1.5x of the first: {verdict(cpu_ok)} "
        f"({first['cpu_per_snapshot_ms']:.1f} -> {lastw['cpu_per_snapshot_ms']:.1f} ms)",
        f"- RSS growth under 50 MB: {verdict(rss_growth < 50)} ({rss_growth:.0f} MB)",
        f"- lag without an upward trend (second half's median at most 2x the first's, "
        f"or 1 s): {verdict(lag_trend)}",
        f"- every row exactly once (the writer's ids; PyIceberg's scan of the head): "
        f"{verdict(once)} ({final['rows']} rows delivered, {final['distinct']} distinct, "
        f"{final['duplicates']} duplicates; {result['written']} written; oracle "
        f"{result['oracle_rows']} rows, same ids: {result['oracle_same']})",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_soak")
    ap.add_argument("--child")
    ap.add_argument("--minutes", type=float,
                    default=float(os.environ.get("SOAK_MINUTES", "30")))
    ap.add_argument("--plot", default=str(Path(__file__).resolve().parent / "soak.png"))
    a = ap.parse_args()
    if a.child:
        child(a.child)
        return
    result = soak(a.minutes)
    print(summarize(result, a.minutes))
    try:
        plot(result, Path(a.plot))
        print(f"\n![soak]({Path(a.plot).name})")
    except ImportError:
        print("\n(no plot: matplotlib is not installed)", file=sys.stderr)


if __name__ == "__main__":
    main()
