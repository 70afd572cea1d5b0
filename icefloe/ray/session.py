"""Ray sessions and backfills for the driver (``icefloe read`` / ``stream --engine ray``).

Run on the driver. Both connect to the Ray at ``address`` (``auto``, ``host:port`` of a
running cluster) or, without one, start a local Ray for the command and shut it down
afterwards; a Ray already initialized in the process is used as is.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import ray
from pyiceberg.catalog import Catalog

from icefloe.ray._uv_env import opt_out
from icefloe.ray.datasource import read

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
    opt_out()  # the variable may have changed since import icefloe.ray
    ray.init(address=address, include_dashboard=False, log_to_driver=False,
             logging_level=logging.WARNING)
    if os.environ.get("ICEFLOE_QUIET_ENGINES") == "1":  # the icefloe command without -v
        from ray.data import DataContext

        DataContext.get_current().enable_progress_bars = False
        for name in ("ray", "ray.data"):
            logging.getLogger(name).setLevel(logging.ERROR)
    try:
        yield
    finally:
        ray.shutdown()


def backfill(table: str, catalog: str | Catalog | None = None,
             options: Mapping[str, Any] | None = None, to: str | None = None,
             address: str | None = None) -> BackfillResult:
    """Read ``table`` (a bounded read with ``options``) on Ray and write Parquet under ``to``.

    ``to`` (default ``icefloe-backfill``) is a directory every Ray worker can write to.
    Logs a one-line summary (INFO).
    """
    target = str(Path(to or "icefloe-backfill").absolute())
    started = time.monotonic()
    with ray_session(address):
        read(table, catalog=catalog, options=options).write_parquet(target)
    files = sorted(Path(target).glob("*.parquet"))
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    result = BackfillResult(path=target, rows=rows, files=len(files))
    log.info("wrote %d rows in %d files to %s in %.1f s (ray)", rows, len(files), target,
             time.monotonic() - started)
    return result
