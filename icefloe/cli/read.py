"""``icefloe read``: a bounded read on the local engine, Spark or Ray, to Parquet.

Runs in the user's process (the driver for Spark and Ray). Everything that can be checked
before reading is checked first (the target, the mode, the options), and the output is
written into a temporary sibling that is moved into place only on success
(:mod:`icefloe.cli.output`). The counts printed are the rows and files this run wrote.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from icefloe.cli.common import (
    Progress,
    add_changelog_arg,
    add_remote_arg,
    add_table_args,
    check_remote,
    positive_int,
    source,
    table_options,
)
from icefloe.cli.output import MODES, Staged, is_file_target, parquet_counts, staged
from icefloe.errors import InvalidOptionError, OutputError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("read", help="backfill a bounded read (to Parquet)")
    add_table_args(p)
    add_changelog_arg(p)
    p.add_argument("--to", help="output: a .parquet file or a directory (local engine), "
                   "a directory (spark / ray, required there)")
    p.add_argument("--mode", choices=MODES, default="error",
                   help="when --to exists: error (default), overwrite, append (directories)")
    p.add_argument("--parallelism", type=positive_int, default=None,
                   help="reader threads (local; default 2, 4 for a table on an object store)")
    p.add_argument("--engine", choices=["local", "spark", "ray"], default="local")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    add_remote_arg(p)
    p.add_argument("--address", help="Ray address (default: start a local Ray)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_remote(args)
    if args.engine != "local" and not args.to:
        raise InvalidOptionError("--to", f"--engine {args.engine} writes Parquet files: give "
                                 "--to DIR (a directory on this machine)")
    options = table_options(args)
    if args.engine == "local":
        src = source(args)  # options are checked before any output exists
        if not args.to:
            rows, total = _read_local(src, args, None)
            print(f"read {rows:,} rows from {total} splits")
            return 0
    elif args.remote is None:  # this process is the driver: the table, its snapshot,
        source(args).bounded_plan()  # columns and filter checked before Spark or Ray starts
    else:  # the Connect server resolves the table; the options are checked here
        from icefloe.options import SourceOptions

        SourceOptions.parse(options).for_mode("bounded")
    started = time.monotonic()
    single = is_file_target(args.to, args.engine)
    with staged(args.to, args.mode, single) as stage:
        if args.engine == "local":
            _, total = _read_local(src, args, stage)
        elif args.engine == "spark":
            _read_spark(args, options, stage)
        else:
            _read_ray(args, options, stage)
        if single:
            import pyarrow.parquet as pq

            stage.rows, stage.files = pq.ParquetFile(stage.path).metadata.num_rows, 1
        else:
            stage.rows, stage.files = parquet_counts(stage.path)
    print(f"wrote {stage.rows:,} rows in {stage.files} file{'s' if stage.files != 1 else ''} "
          f"to {args.to} (engine {args.engine}, --mode {args.mode}, "
          f"{time.monotonic() - started:.1f} s)")
    return 0


def _read_local(src: Any, args: argparse.Namespace, stage: Staged | None) -> tuple[int, int]:
    """Read with local threads; write to ``stage`` when given. Returns (rows, splits)."""
    import pyarrow.parquet as pq

    from icefloe.local.engine import read_splits, target_splits
    from icefloe.source import default_parallelism, retrying_splits

    plan = src.bounded_plan()
    threads = default_parallelism(plan) if args.parallelism is None else args.parallelism
    # the splits IcebergSource.read cuts, planned once (counted, then read), re-planned
    # after a transient manifest fault as IcebergSource.read's are
    splits = list(retrying_splits(plan, src.retry, target_splits(threads)))
    total = len(splits)
    if plan.options.net_changes:  # the net effect of a changelog range needs all of it
        table = src.to_arrow(threads)
        if stage is not None:
            path = stage.path if stage.single_file else stage.path / "part-00000.parquet"
            path.parent.mkdir(exist_ok=True)
            pq.write_table(table, path)
        return table.num_rows, total
    progress = Progress(total, enabled=not args.quiet)
    writer = None
    if stage is not None:
        path = stage.path
        if not stage.single_file:
            path.mkdir()
            path = path / "part-00000.parquet"
        writer = pq.ParquetWriter(path, plan.context.arrow_schema)
    try:
        for item in read_splits(splits, plan.context,
                                threads, plan.options.preserve_order,
                                retry=src.retry):
            if item.batch.num_rows and writer is not None:
                writer.write_batch(item.batch)
            progress.update(rows=item.batch.num_rows, nbytes=item.batch.nbytes,
                            splits=1 if item.last else 0)
    finally:
        if writer is not None:
            writer.close()
        progress.close()
    return progress.rows, total


def _read_spark(args: argparse.Namespace, options: dict[str, str], stage: Staged) -> None:
    from icefloe.spark.session import backfill

    if args.remote is None:
        backfill(args.table, catalog=args.catalog, options=options, to=str(stage.path),
                 master=args.master, mode="errorifexists")
        return
    _read_remote(args, options, stage)


def _read_remote(args: argparse.Namespace, options: dict[str, str], stage: Staged) -> None:
    """A backfill on a Spark Connect server: its executors write ``stage.path``, which
    must be where this machine sees it (checked with a one-row probe first, and the
    rows Spark wrote against the rows found here after)."""
    from icefloe.cli.remote import SHARE_FIX, probe_shared
    from icefloe.spark.session import backfill, session

    spark = session(remote=args.remote, app_name="icefloe-backfill")
    try:
        probe_shared(spark, "--to", stage.target.parent, args.remote)
        result = backfill(args.table, catalog=args.catalog, options=options,
                          to=str(stage.path), mode="errorifexists", spark=spark)
    finally:
        spark.stop()
    found = parquet_counts(stage.path) if stage.path.is_dir() else (0, 0)
    if found != (result.rows, result.files):
        raise OutputError(f"--to {args.to}: the Spark Connect server {args.remote} wrote "
                          f"{result.rows:,} rows in {result.files} files to {stage.path}, this "
                          f"machine sees {found[0]:,} rows in {found[1]} files; {SHARE_FIX}")


def _read_ray(args: argparse.Namespace, options: dict[str, str], stage: Staged) -> None:
    from icefloe.ray.datasource import read
    from icefloe.ray.session import ray_session

    with ray_session(args.address):
        read(args.table, catalog=args.catalog, options=options).write_parquet(str(stage.path))
    if not stage.path.exists():  # Ray writes no directory for an empty read
        stage.path.mkdir()
