"""Sinks for ``icefloe stream``: console and an idempotent Parquet directory.

Runs in the stream's consumer thread. The Parquet sink names each file after the
split and the batch's resume offset, so a batch re-delivered after a crash
overwrites its own earlier file instead of duplicating rows: with it, the local
stream is effectively exactly-once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from icefloe.errors import InvalidOptionError
from icefloe.local.stream import StreamItem


class Sink(Protocol):
    def write(self, item: StreamItem) -> None:
        """Make ``item.batch`` durable (the caller acks it afterwards)."""
        ...

    def close(self) -> None: ...


class ConsoleSink:
    """Prints one line per batch."""

    def write(self, item: StreamItem) -> None:
        print(f"snapshot={item.snapshot_id} split={item.split_id} rows={item.batch.num_rows}"
              f" offset={item.consumed}{' (split done)' if item.last else ''}", flush=True)

    def close(self) -> None:
        sys.stdout.flush()


class ParquetDirSink:
    """One Parquet file per batch: ``<dir>/<split id>-<offset>.parquet`` (idempotent)."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def write(self, item: StreamItem) -> None:
        final = self.directory / f"{item.split_id}-{item.consumed:012d}.parquet"
        temp = final.with_suffix(".parquet.tmp")
        pq.write_table(pa.Table.from_batches([item.batch]), temp)
        with open(temp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(temp, final)

    def close(self) -> None:
        pass


def open_sink(spec: str) -> Sink:
    """``console`` or ``parquet:DIR``."""
    if spec == "console":
        return ConsoleSink()
    kind, _, target = spec.partition(":")
    if kind == "parquet" and target:
        return ParquetDirSink(target)
    raise InvalidOptionError("sink", f"{spec!r} is not a sink; use console or parquet:DIR")
