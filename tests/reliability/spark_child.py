"""The Spark driver process of the Spark kill tests: one streaming query, icefloe -> Parquet.

Run as ``python -m tests.reliability.spark_child --root DIR --out DIR --checkpoint DIR``
(``--root`` holds the SQLite catalog the parent built, as for :mod:`.child`). The query
is ``spark.readStream.format("icefloe")`` with ``maxFilesPerTrigger`` (so there are many
micro-batches) into ``writeStream.format("parquet")`` with a ``checkpointLocation``.

Triggers:

- ``--trigger continuous`` (default): a micro-batch every ``--interval-ms`` until the
  file ``--stop-file`` appears; then ``processAllAvailable()`` (everything committed to
  the table by then is written) and a clean stop. The parent SIGKILLs the process group
  (this Python process, its JVM, the JVM's Python workers) at random moments instead.
- ``--trigger available-now``: ``Trigger.AvailableNow``, exits when done.

``--master`` is ``local[2]`` by default or a ``spark://`` URL (the executor kill tests);
``--ui-port`` turns Spark's UI on (its REST API tells the parent when tasks run).
Exit code 0 after a clean stop, 1 if the query failed (its exception on stderr).
Prints one JSON line at the end: ``{"batches": <micro-batches with input rows>}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import icefloe.spark


def catalog_options(root: Path, uri: str | None = None) -> dict[str, str]:
    """Spark options opening the test catalog under ``root`` (see :func:`.child.catalog_for`)."""
    return {"catalog": "test", "catalog.type": "sql",
            "catalog.uri": uri or f"sqlite:///{root}/catalog.db",
            "catalog.warehouse": f"file://{root}/warehouse"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--catalog-uri")
    parser.add_argument("--table", default="db.events")
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--trigger", choices=("continuous", "available-now"),
                        default="continuous")
    parser.add_argument("--interval-ms", type=int, default=200)
    parser.add_argument("--stop-file", type=Path)
    parser.add_argument("--max-files", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=2000)
    parser.add_argument("--ui-port", type=int)
    parser.add_argument("--local-dir", help="spark.local.dir (scratch space)")
    parser.add_argument("--java-options", default="", help="driver and executor JVM options")
    parser.add_argument("--log-level", default="ERROR", help="Spark's log level (WARN logs "
                        "lost executors and most lost tasks)")
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args(argv)

    config = {"spark.sql.session.timeZone": "UTC", "spark.python.worker.reuse": "true",
              "spark.driver.memory": "512m", "spark.sql.shuffle.partitions": "1",
              "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    if args.local_dir:
        config["spark.local.dir"] = args.local_dir
    if args.java_options:
        config["spark.driver.extraJavaOptions"] = args.java_options
        config["spark.executor.extraJavaOptions"] = args.java_options
    if args.master.startswith("spark://"):
        config.update({"spark.executor.memory": "512m", "spark.executor.cores": "1",
                       "spark.cores.max": "1", "spark.task.maxFailures": "8"})
    if args.ui_port:
        config.update({"spark.ui.enabled": "true", "spark.ui.port": str(args.ui_port),
                       "spark.port.maxRetries": "0"})
    spark = icefloe.spark.session(args.master, "icefloe-kill-test", config=config)
    spark.sparkContext.setLogLevel(args.log_level)

    reader = spark.readStream.format("icefloe")
    options = {**catalog_options(args.root, args.catalog_uri),
               "maxFilesPerTrigger": str(args.max_files), "batchSize": str(args.batch_size),
               "pollIntervalMs": "100"}
    for key, value in options.items():
        reader = reader.option(key, value)
    writer = (reader.load(args.table).writeStream.format("parquet")
              .option("path", args.out).option("checkpointLocation", args.checkpoint))
    if args.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.interval_ms} milliseconds")
    query = writer.start()

    deadline = time.monotonic() + args.max_seconds
    try:
        while not query.awaitTermination(0.2):
            if args.stop_file is not None and args.stop_file.exists():
                query.processAllAvailable()
                query.stop()
                break
            if time.monotonic() > deadline:
                print(f"query still running after {args.max_seconds}s", file=sys.stderr)
                query.stop()
                return 1
        exc = query.exception()
        if exc is not None:
            print(f"query failed: {exc}", file=sys.stderr)
            return 1
        batches = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
        print(json.dumps({"batches": batches}), flush=True)
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
