"""Sinks of ``icefloe stream``: the one sink grammar, the console and a Parquet directory.

Runs in the stream's consumer thread (the driver for Ray; Spark uses its own sinks,
parsed by the same :func:`parse_sink`). The Parquet sink names each file after the split
and the batch's resume offset, so a batch re-delivered after a crash overwrites its own
earlier file instead of duplicating rows: with it, the local stream is effectively
exactly-once.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from icefloe.errors import InvalidOptionError, OutputError

SINK_GRAMMAR = "console | parquet:DIR"
CONSOLE_ROWS = 20


@dataclass(frozen=True)
class SinkSpec:
    """A parsed ``--sink``: ``kind`` is ``console`` or ``parquet``; ``path`` for parquet."""

    kind: str
    path: str | None = None


def parse_sink(spec: str) -> SinkSpec:
    """Parse ``console`` or ``parquet:DIR`` (checked before anything starts).

    Raises:
        InvalidOptionError: any other text.
        OutputError: ``parquet:DIR`` where DIR is an existing file.
    """
    if spec == "console":
        return SinkSpec("console")
    kind, sep, target = spec.partition(":")
    if kind == "parquet" and sep and target.strip():
        if Path(target).exists() and not Path(target).is_dir():
            raise OutputError(f"--sink {spec}: {target} is a file; give a directory")
        return SinkSpec("parquet", target)
    raise InvalidOptionError("--sink", f"{spec!r} is not a sink; give {SINK_GRAMMAR}")


class Sink(Protocol):
    def write(self, item: Any) -> None:
        """Make ``item.batch`` durable (the caller acks it afterwards)."""
        ...

    def close(self) -> None: ...


def _cell(value: Any) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= 30 else text[:27] + "..."


class ConsoleSink:
    """Prints each batch's rows (the first 20) as a table, under a one-line header."""

    def __init__(self, out: Any = None) -> None:
        self.out = out or sys.stdout

    def write(self, item: Any) -> None:
        batch = item.batch
        shown = batch.slice(0, CONSOLE_ROWS).to_pylist()
        names = batch.schema.names
        rows = [[_cell(r[n]) for n in names] for r in shown]
        widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
        change = getattr(item, "schema_change", None)
        lines = [] if change is None else [
            f"-- schema {change.from_schema_id} -> {change.to_schema_id} at snapshot "
            f"{change.snapshot_id}: {change.describe()}"]
        lines += [f"-- snapshot {item.snapshot_id}, split {item.split_id}: "
                  f"{batch.num_rows:,} rows",
                 "  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        if batch.num_rows > CONSOLE_ROWS:
            lines.append(f"... {batch.num_rows - CONSOLE_ROWS:,} more rows")
        print("\n".join(line.rstrip() for line in lines), file=self.out, flush=True)

    def close(self) -> None:
        self.out.flush()


class ParquetDirSink:
    """One Parquet file per batch: ``<dir>/<split id>-<offset>.parquet`` (idempotent)."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"--sink parquet:{directory}: cannot create the directory "
                              f"({exc.strerror or exc})") from exc

    def write(self, item: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        final = self.directory / f"{item.split_id}-{item.consumed:012d}.parquet"
        temp = final.with_suffix(".parquet.tmp")
        pq.write_table(pa.Table.from_batches([item.batch]), temp)
        with open(temp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(temp, final)

    def close(self) -> None:
        pass


def open_sink(spec: str | SinkSpec) -> Sink:
    """A sink for ``console`` or ``parquet:DIR`` (see :func:`parse_sink`)."""
    parsed = parse_sink(spec) if isinstance(spec, str) else spec
    if parsed.kind == "console":
        return ConsoleSink()
    assert parsed.path is not None
    return ParquetDirSink(parsed.path)
