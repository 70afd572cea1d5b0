"""``icefloe stream``: run a continuous read into a sink until stopped.

Runs in the user's process; SIGINT / SIGTERM stop it gracefully (final checkpoint).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any

from icefloe.sinks import open_sink


def run_stream(args: argparse.Namespace, options: dict[str, str]) -> int:
    """Run ``icefloe stream`` with parsed ``args``; returns the exit status."""
    if args.engine == "spark":
        from icefloe.spark.stream_job import stream as spark_stream

        return int(spark_stream(args.table, catalog=args.catalog, options=options,
                                sink=args.sink, checkpoint=args.checkpoint,
                                available_now=args.available_now, master=args.master,
                                max_seconds=args.max_seconds) or 0)
    if args.engine == "ray":
        from icefloe.ray import stream_cli as ray_stream

        return int(ray_stream(args.table, catalog=args.catalog, options=options,
                              sink=args.sink, checkpoint=args.checkpoint,
                              available_now=args.available_now, address=args.address,
                              max_seconds=args.max_seconds) or 0)
    from icefloe.source import IcebergSource

    src = IcebergSource(args.table, catalog=args.catalog, options=options)
    sink = open_sink(args.sink)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    deadline = time.monotonic() + args.max_seconds if args.max_seconds else None
    last_status = 0.0
    with src.stream(checkpoint=args.checkpoint, parallelism=args.parallelism,
                    available_now=args.available_now) as stream:
        watcher = threading.Thread(
            target=_watch, args=(stream, stop, deadline), daemon=True)
        watcher.start()
        for item in stream:
            sink.write(item)
            item.ack()
            now = time.monotonic()
            if now - last_status > 2:
                last_status = now
                _status(stream)
            if stop.is_set():
                break
        _status(stream)
    sink.close()
    return 0


def _watch(stream: Any, stop: threading.Event, deadline: float | None) -> None:
    """Close the stream when a signal arrives or the deadline passes (unblocks iteration)."""
    while not stop.wait(0.2):
        if deadline is not None and time.monotonic() > deadline:
            stop.set()
    stream.stop()


def _status(stream: Any) -> None:
    info = stream.describe()
    print(f"# committed: {info['committed']} | lag: {info['snapshots_behind']} snapshots, "
          f"{info['seconds_behind']} s | {info['rows']:,} rows, {info['rows_per_s']:,} rows/s",
          file=sys.stderr, flush=True)
