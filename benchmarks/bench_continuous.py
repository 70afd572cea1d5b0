"""Continuous latency and sustained throughput of the local stream.

A fresh table (SQLite catalog in a temp dir). The stream starts at ``latest`` with
``pollIntervalMs=500``; a writer thread in the same process commits small appends at
random gaps (0.3-1.3 s, so commits land at random phases of the poll). Latency is from
the writer's ``append()`` returning to the stream yielding the first item of that
snapshot. Sustained: the writer appends 50k-row commits back to back while the stream
reads and acks; we report both rates and the catch-up time after the last commit.
Target: p99 latency < poll interval + 1 s.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import (
    BenchTable,
    _new_table,
    event_rows,
    fmt_rate,
    fmt_s,
    md_table,
    percentile,
    pick,
    verdict,
)
from icefloe import IcebergSource

POLL_MS = 500


def _stream(bt: BenchTable, ckpt: Path):  # type: ignore[no-untyped-def]
    src = IcebergSource(bt.identifier, catalog=bt.catalog(),
                        options={"pollIntervalMs": str(POLL_MS), "startingVersion": "latest"})
    return src.stream(checkpoint=str(ckpt))


def latency(bt: BenchTable, ckpt: Path, commits: int) -> list[float]:
    table = bt.table()
    committed: dict[int, float] = {}
    seen: dict[int, float] = {}
    rng = random.Random(7)
    stream = _stream(bt, ckpt)
    stream.start()
    time.sleep(1.0)  # let the enumerator resolve `latest` first

    def writer() -> None:
        for i in range(commits):
            time.sleep(rng.uniform(0.3, 1.3))
            table.append(event_rows(1_000, start=10_000_000 + i * 1_000))
            committed[table.metadata.current_snapshot_id] = time.perf_counter()

    w = threading.Thread(target=writer, daemon=True)
    w.start()
    watchdog = threading.Timer(commits * 1.3 + 30, stream.close)
    watchdog.start()
    try:
        for item in stream:
            seen.setdefault(item.snapshot_id, time.perf_counter())
            item.ack()
            if not w.is_alive() and set(committed) <= set(seen):
                break
    finally:
        watchdog.cancel()
        stream.close()
    w.join()
    # the stream may see a commit before append() returns to the writer: clamp at 0
    return [max(0.0, seen[s] - t) for s, t in committed.items() if s in seen]


def sustained(bt: BenchTable, ckpt: Path, seconds: float) -> dict[str, float]:
    table = bt.table()
    per_commit = 50_000
    state = {"written": 0, "first": 0.0, "last_commit": 0.0, "read": 0, "done_at": 0.0}
    stream = _stream(bt, ckpt)
    stream.start()
    time.sleep(1.0)
    stop = threading.Event()

    def writer() -> None:
        state["first"] = time.perf_counter()
        i = 0
        while time.perf_counter() - state["first"] < seconds:
            table.append(event_rows(per_commit, start=50_000_000 + i * per_commit))
            state["written"] += per_commit
            i += 1
        state["last_commit"] = time.perf_counter()
        stop.set()

    w = threading.Thread(target=writer, daemon=True)
    w.start()
    watchdog = threading.Timer(seconds + 60, stream.close)
    watchdog.start()
    try:
        for item in stream:
            state["read"] += item.batch.num_rows
            item.ack()
            if stop.is_set() and state["read"] >= state["written"]:
                state["done_at"] = time.perf_counter()
                break
    finally:
        watchdog.cancel()
        stream.close()
    w.join()
    span_w = state["last_commit"] - state["first"]
    span_r = (state["done_at"] or time.perf_counter()) - state["first"]
    return {"written": state["written"], "read": state["read"],
            "write_rows_s": state["written"] / span_w, "read_rows_s": state["read"] / span_r,
            "catch_up": max(0.0, (state["done_at"] or time.perf_counter())
                            - state["last_commit"])}


def run(scale: str) -> str:
    commits = pick(scale, 8, 20)
    seconds = pick(scale, 8.0, 30.0)
    with tempfile.TemporaryDirectory(prefix="icefloe-bench-") as tmp:
        root = Path(tmp)
        (root / "warehouse").mkdir()
        bt = BenchTable(root, "bench.live")
        _new_table(bt.catalog(), bt.identifier, event_rows(1).schema).append(event_rows(1_000))
        lat = latency(bt, root / "ckpt-latency", commits)
        sus = sustained(bt, root / "ckpt-sustained", seconds)
    p50, p99 = percentile(lat, 50), percentile(lat, 99)
    ok = p99 < POLL_MS / 1000 + 1.0 and len(lat) == commits
    return (
        f"pollIntervalMs={POLL_MS}, startingVersion=latest, parallelism=2, acks on every item; "
        "writer and stream in one process (they share the GIL).\n\n"
        f"- commit-to-first-row over {len(lat)}/{commits} commits: p50 **{fmt_s(p50)}**, "
        f"p99 **{fmt_s(p99)}**, max {fmt_s(max(lat))} (target p99 < {POLL_MS + 1000} ms: "
        f"{verdict(ok)})\n"
        f"- sustained ({seconds:.0f} s of back-to-back 50k-row commits): writer "
        f"{fmt_rate(sus['write_rows_s'], 'rows/s')}, "
        f"stream {fmt_rate(sus['read_rows_s'], 'rows/s')}"
        f" ({sus['read']:,}/{sus['written']:,} rows), caught up "
        f"{fmt_s(sus['catch_up'])} after the last commit\n\n"
        + md_table(["commit", "latency"], [[i + 1, fmt_s(x)] for i, x in enumerate(lat)])
    )


if __name__ == "__main__":
    import sys

    print(run(sys.argv[1] if len(sys.argv) > 1 else "quick"))
