"""A stream process for the kill tests: reads a table with LocalStream into a line sink.

Run as ``python -m tests.reliability.child --root DIR ...`` (the parent kills it with
SIGKILL or arms ``ICEFLOE_CRASH_POINT``). For every delivered batch it appends one
JSON line ``{"run", "split", "consumed", "ids"}`` to ``--out`` (a changelog's rows as
``"id:change type:commit snapshot"``) and fsyncs it, then acks
the batch (with ``checkpoint_interval_s=0`` the ack writes the checkpoint), then
appends ``{"run", "ack", "consumed"}``. An ack line therefore proves the batch was
durably acknowledged; a batch line without one was not (or only just).

``--available-now`` processes what exists at start and exits 0; without it the
stream runs until killed (or ``--max-seconds`` passes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog

from icefloe import IcebergSource


def catalog_for(root: Path, uri: str | None = None) -> SqlCatalog:
    """The test catalog under ``root`` (the same one the parent built)."""
    return SqlCatalog("test", uri=uri or f"sqlite:///{root}/catalog.db",
                      warehouse=f"file://{root}/warehouse")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--catalog-uri")
    parser.add_argument("--table", default="db.events")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--run", type=int, default=0)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--poll-ms", type=int, default=100)
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--max-seconds", type=float, default=120.0)
    parser.add_argument("--option", action="append", default=[],
                        help="extra source option key=value")
    args = parser.parse_args(argv)

    options = {"batchSize": str(args.batch_size), "pollIntervalMs": str(args.poll_ms),
               "retryBackoffMs": "50", "maxAttempts": "8"}
    options.update(dict(o.split("=", 1) for o in args.option))
    source = IcebergSource(args.table, catalog=catalog_for(args.root, args.catalog_uri),
                           options=options)
    fd = os.open(args.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    deadline = time.monotonic() + args.max_seconds
    try:
        with source.stream(checkpoint=args.checkpoint, parallelism=args.parallelism,
                           available_now=args.available_now,
                           checkpoint_interval_s=0) as stream:
            for item in stream:
                ids = item.batch.column("id").to_pylist()
                if "_change_type" in item.batch.schema.names:  # a changelog: id:type:commit
                    ids = [f"{i}:{kind}:{commit}" for i, kind, commit in zip(
                        ids, item.batch.column("_change_type").to_pylist(),
                        item.batch.column("_commit_snapshot_id").to_pylist(), strict=True)]
                line = {"run": args.run, "split": item.split_id,
                        "consumed": item.consumed, "ids": ids}
                os.write(fd, (json.dumps(line) + "\n").encode())
                os.fsync(fd)
                item.ack()
                os.write(fd, (json.dumps({"run": args.run, "ack": item.split_id,
                                          "consumed": item.consumed}) + "\n").encode())
                if time.monotonic() > deadline:
                    break
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
