"""The continuous part of ``icefloe demo``: ingest while a writer commits, stop, resume.

Runs in the user's process (a writer thread commits snapshots meanwhile).
"""

from __future__ import annotations

import datetime as dt
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icefloe.demo_data import TABLE, demo_rows
from icefloe.source import IcebergSource

OPTIONS = {"pollIntervalMs": "200", "ignoreDeletes": "true", "startingVersion": "latest"}


def run_stream_demo(catalog: Catalog, table: Table, root: Path,
                    say: Callable[[str], None], checkpoint: str | None = None) -> bool:
    """Stream ``table`` while committing appends and one delete; returns True when
    every appended row arrived exactly once, across a stop and a resume.

    ``checkpoint``: the checkpoint location (default ``root/checkpoint``, emptied first;
    a URI must name a new, empty location)."""
    ckpt: str | Path
    if checkpoint is None:
        ckpt = root / "checkpoint"
        shutil.rmtree(ckpt, ignore_errors=True)
    else:
        ckpt = checkpoint
    say(f"== continuous ingestion from the head (startingVersion=latest), checkpoint {ckpt}")
    say("   policy: ignoreDeletes=true (a delete snapshot is skipped, not a failure)")
    seen: list[int] = []
    expected: list[int] = []

    def writer() -> None:
        for i in range(3):
            rows = demo_rows(10_000 + i * 500, 500, with_score=True)
            table.append(rows)
            expected.extend(rows.column("id").to_pylist())
            time.sleep(0.3)
        table.delete(delete_filter=f"day == '{dt.date(2026, 1, 1).isoformat()}'")

    src = IcebergSource(TABLE, catalog=catalog, options=OPTIONS)
    with src.stream(checkpoint=str(ckpt), parallelism=2, checkpoint_interval_s=0) as stream:
        thread = threading.Thread(target=writer)
        thread.start()
        deadline = time.monotonic() + 60
        for item in stream:
            seen.extend(item.batch.column("id").to_pylist())
            item.ack()
            if len(seen) >= 3 * 500:  # every row the writer appends
                break
            if time.monotonic() > deadline:
                break
        thread.join()
        snap = table.refresh().current_snapshot()
        op = snap.summary.operation.value if snap and snap.summary else "?"
        say(f"   ingested {len(seen)} rows from 3 appends; last snapshot is a {op} "
            f"(skipped by ignoreDeletes); committed {stream.committed().describe()}")
    say("   stopped; the checkpoint holds the acknowledged position")

    more = demo_rows(20_000, 700, with_score=True)
    table.append(more)
    expected.extend(more.column("id").to_pylist())
    resumed = IcebergSource(TABLE, catalog=catalog, options=OPTIONS)
    new_rows = 0
    with resumed.stream(checkpoint=str(ckpt), available_now=True) as stream:
        for item in stream:
            seen.extend(item.batch.column("id").to_pylist())
            new_rows += item.batch.num_rows
            item.ack()
    say(f"   resumed from the checkpoint (available-now): {new_rows} new rows, "
        "nothing re-read")
    ok = sorted(seen) == sorted(expected)
    say(f"   every appended row exactly once: {ok} ({len(seen)} rows)")
    return ok
