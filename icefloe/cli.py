"""The ``icefloe`` command: plan | read | stream | demo | checkpoint.

Runs in the user's process. Errors icefloe raises on purpose are printed as one
line (``error: <type>: <message>``) with exit status 2; anything else is a bug
and shows its traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from icefloe.errors import IcefloeError, InvalidOptionError


def _parse_kv(items: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidOptionError(item, "give options as key=value, e.g. --option snapshotId=12")
        out[key.strip()] = value
    return out


def _source(args: argparse.Namespace) -> Any:
    from icefloe.source import IcebergSource

    return IcebergSource(args.table, catalog=args.catalog, options=_parse_kv(args.option))


class Progress:
    """A one-line progress display on stderr: rows, bytes, splits done / total."""

    def __init__(self, total_splits: int | None, enabled: bool) -> None:
        self.total = total_splits
        self.enabled = enabled
        self.rows = 0
        self.bytes = 0
        self.splits = 0
        self.start = time.monotonic()
        self._last = 0.0

    def update(self, rows: int = 0, nbytes: int = 0, splits: int = 0, force: bool = False) -> None:
        self.rows += rows
        self.bytes += nbytes
        self.splits += splits
        now = time.monotonic()
        if not self.enabled or (not force and now - self._last < 0.2):
            return
        self._last = now
        elapsed = max(now - self.start, 1e-9)
        total = "?" if self.total is None else str(self.total)
        bar = ""
        if self.total:
            done = int(20 * self.splits / self.total)
            bar = "[" + "#" * done + "." * (20 - done) + "] "
        sys.stderr.write(
            f"\r{bar}splits {self.splits}/{total}  rows {self.rows:,}  "
            f"{self.bytes / 1e6:,.1f} MB  {self.rows / elapsed:,.0f} rows/s"
        )
        sys.stderr.flush()

    def close(self) -> None:
        self.update(force=True)
        if self.enabled:
            sys.stderr.write("\n")


def cmd_plan(args: argparse.Namespace) -> int:
    src = _source(args)
    plan = src.bounded_plan()
    count = rows = 0
    for split in plan.splits():
        count += 1
        rows += split.record_count
        if args.json:
            print(json.dumps({
                "split_id": split.split_id, "file": split.file_path, "start": split.start,
                "length": split.length, "rows": split.record_count,
                "snapshot_id": str(split.snapshot_id), "sequence_number": split.sequence_number,
                "spec_id": split.spec_id, "partition": [str(v) for v in split.partition],
                "delete_files": [d.path for d in split.delete_files],
            }))
        else:
            part = ",".join(str(v) for v in split.partition) or "-"
            print(f"{split.split_id}  {split.file_path}  [{split.start}, {split.end})  "
                  f"rows={split.record_count}  snapshot={split.snapshot_id}  partition={part}"
                  + (f"  deletes={len(split.delete_files)}" if split.delete_files else ""))
    if not args.json:
        snap = plan.snapshot.snapshot_id if plan.snapshot else None
        print(f"# {count} splits, {rows} rows (before deletes), snapshot {snap}",
              file=sys.stderr)
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    if args.engine == "spark":
        from icefloe.spark import backfill

        backfill(args.table, catalog=args.catalog, options=_parse_kv(args.option),
                 to=args.to, master=args.master)
        return 0
    if args.engine == "ray":
        from icefloe.ray import backfill as ray_backfill

        ray_backfill(args.table, catalog=args.catalog, options=_parse_kv(args.option),
                     to=args.to, address=args.address)
        return 0
    import pyarrow.parquet as pq

    from icefloe.local.engine import read_splits

    src = _source(args)
    plan = src.bounded_plan()
    total = sum(1 for _ in plan.splits())
    progress = Progress(total, enabled=not args.quiet)
    writer = pq.ParquetWriter(args.to, plan.context.arrow_schema) if args.to else None
    try:
        for item in read_splits(plan.splits(), plan.context, args.parallelism,
                                plan.options.preserve_order):
            if item.batch.num_rows and writer is not None:
                writer.write_batch(item.batch)
            progress.update(rows=item.batch.num_rows, nbytes=item.batch.nbytes,
                            splits=1 if item.last else 0)
    finally:
        if writer is not None:
            writer.close()
        progress.close()
    target = f" to {args.to}" if args.to else ""
    print(f"read {progress.rows} rows from {total} splits{target}")
    return 0


def cmd_stream(args: argparse.Namespace) -> int:
    from icefloe.stream_cli import run_stream

    return run_stream(args, _parse_kv(args.option))


def cmd_checkpoint(args: argparse.Namespace) -> int:
    from icefloe.state import open_store

    store = open_store(args.location)
    ckpt = store.read()
    if ckpt is None:
        print(f"no checkpoint at {args.location}", file=sys.stderr)
        return 1
    shown = ckpt.to_display_dict()
    if args.json:
        print(json.dumps(shown, indent=2, sort_keys=True))
    else:
        for key in sorted(shown):
            print(f"{key:>26}: {shown[key]}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    if args.s3:
        from icefloe.demo_s3 import run_s3_demo

        return run_s3_demo(home=args.home, spark=args.spark, stream=not args.no_stream)
    from icefloe.demo import run_demo

    return run_demo(home=args.home, spark=args.spark, stream=not args.no_stream)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="icefloe", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True)

    def table_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("table", help="namespace.table")
        p.add_argument("--catalog", help="PyIceberg catalog name (default: the embedded one)")
        p.add_argument("-o", "--option", action="append", metavar="KEY=VALUE",
                       help="source option (repeatable), e.g. snapshotId=123, catalog.uri=...")

    p = sub.add_parser("plan", help="list the splits of a bounded read")
    table_args(p)
    p.add_argument("--json", action="store_true", help="one JSON object per split")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("read", help="backfill a bounded read (to Parquet)")
    table_args(p)
    p.add_argument("--to", help="output Parquet file (local engine) or directory (spark/ray)")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--engine", choices=["local", "spark", "ray"], default="local")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument("--address", help="Ray address (default: start a local Ray)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_read)

    p = sub.add_parser("stream", help="ingest continuously, with a checkpoint")
    table_args(p)
    p.add_argument("--checkpoint", required=True, help="checkpoint directory or URI")
    p.add_argument("--sink", default="console", help="console | parquet:DIR")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--available-now", action="store_true",
                   help="process what exists at start, then exit")
    p.add_argument("--engine", choices=["local", "spark", "ray"], default="local")
    p.add_argument("--master", help="Spark master URL")
    p.add_argument("--address", help="Ray address")
    p.add_argument("--max-seconds", type=float, default=None, help="stop after this long")
    p.set_defaults(func=cmd_stream)

    p = sub.add_parser("checkpoint", help="inspect checkpoints")
    csub = p.add_subparsers(dest="action", required=True)
    show = csub.add_parser("show", help="print a checkpoint")
    show.add_argument("location", help="checkpoint directory or URI")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_checkpoint)

    p = sub.add_parser("demo", help="build a demo warehouse and backfill / stream it")
    p.add_argument("--home", default="icefloe-demo", help="demo warehouse directory")
    p.add_argument("--spark", action=argparse.BooleanOptionalAction, default=None,
                   help="also backfill through local Spark (default: when PySpark is installed)")
    p.add_argument("--no-stream", action="store_true", help="skip the continuous part")
    p.add_argument("--s3", action="store_true",
                   help="start a local SeaweedFS: data in S3 behind its Iceberg REST catalog")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except IcefloeError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
