"""Ray entry points of the ``icefloe`` command: ``read --engine ray`` and ``stream --engine ray``.

Run on the driver. Both connect to the Ray at ``address`` (``auto``, ``host:port`` of a
running cluster) or, without one, start a local Ray for the command and shut it down
afterwards; a Ray already initialized in the process is used as is.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import ray
from pyiceberg.catalog import Catalog

from icefloe.ray.datasource import read
from icefloe.ray.stream import RayStream
from icefloe.sinks import open_sink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackfillResult:
    """What :func:`backfill` wrote: the directory, its rows and Parquet files."""

    path: str
    rows: int
    files: int


@contextmanager
def ray_session(address: str | None) -> Iterator[None]:
    """Ray for one command: the running one, the cluster at ``address``, or a local one."""
    if ray.is_initialized():
        yield
        return
    ray.init(address=address, include_dashboard=False, log_to_driver=False,
             logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()


def backfill(table: str, catalog: str | Catalog | None = None,
             options: Mapping[str, Any] | None = None, to: str | None = None,
             address: str | None = None) -> BackfillResult:
    """Read ``table`` (a bounded read with ``options``) on Ray and write Parquet under ``to``.

    ``to`` (default ``icefloe-backfill``) is a directory every Ray worker can write to.
    Prints a one-line summary to stderr.
    """
    target = str(Path(to or "icefloe-backfill").absolute())
    started = time.monotonic()
    with ray_session(address):
        read(table, catalog=catalog, options=options).write_parquet(target)
    files = sorted(Path(target).glob("*.parquet"))
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    result = BackfillResult(path=target, rows=rows, files=len(files))
    print(f"# wrote {rows:,} rows in {len(files)} files to {target} "
          f"in {time.monotonic() - started:.1f} s (ray)", file=sys.stderr, flush=True)
    return result


def stream_cli(table: str, catalog: str | None = None, options: Mapping[str, Any] | None = None,
               sink: str = "console", checkpoint: str | None = None,
               available_now: bool = False, address: str | None = None,
               max_seconds: float | None = None) -> int:
    """``icefloe stream --engine ray``: actors read, the driver writes to ``sink`` and acks.

    Stops at SIGINT / SIGTERM, after ``max_seconds``, or (``available_now``) when what
    existed at start is delivered; writes the final checkpoint. Returns the exit status.
    """
    out = open_sink(sink)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda _s, _f: stop.set())
    deadline = time.monotonic() + max_seconds if max_seconds else None
    with ray_session(address):
        rs = RayStream(table, catalog=catalog, options=options, checkpoint=checkpoint,
                       available_now=available_now, reader_num_cpus=0.5)
        with rs:
            def watch() -> None:
                while not stop.wait(0.2):
                    if deadline is not None and time.monotonic() > deadline:
                        break
                rs.stop()

            threading.Thread(target=watch, daemon=True).start()
            last = 0.0
            for item in rs:
                out.write(item)
                item.ack()
                if time.monotonic() - last > 2:
                    last = time.monotonic()
                    _status(rs)
            stop.set()
            _status(rs)
    out.close()
    return 0


def _status(rs: RayStream) -> None:
    info = rs.describe()
    print(f"# committed: {info['committed']} | {info['rows']:,} rows | "
          f"{info['in_flight']} splits in flight, {info['pending']} pending",
          file=sys.stderr, flush=True)
