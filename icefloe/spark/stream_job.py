"""``icefloe stream --engine spark``: a Structured Streaming query from the CLI. Runs on the driver.

The query is ``spark.readStream.format("icefloe")`` into Spark's own sinks: ``parquet:DIR``
is Spark's file sink (exactly-once through its ``_spark_metadata`` log and the query's
checkpoint), ``console`` is Spark's console sink. The checkpoint is Spark's
``checkpointLocation`` (offsets and commits), not an icefloe checkpoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from icefloe.cli.remote import absolute, checkpoint_failure, probe_shared
from icefloe.cli.sinks import parse_sink
from icefloe.errors import InvalidOptionError
from icefloe.options import SourceOptions
from icefloe.spark.datasource import SOURCE_NAME
from icefloe.spark.session import (
    _option_text,
    catalog_options,
    register,
    session,
    warn_secret_options,
)

log = logging.getLogger(__name__)


def stream(table: str, catalog: str | None = None, options: Mapping[str, Any] | None = None,
           sink: str = "console", checkpoint: str | None = None, available_now: bool = False,
           master: str | None = None, max_seconds: float | None = None,
           remote: str | None = None) -> int:
    """Run a streaming query reading ``table`` into ``sink``; returns an exit status (0).

    Args:
        table: ``namespace.table``.
        catalog: catalog name (None: the embedded default).
        options: icefloe source options (``pollIntervalMs`` also sets the trigger interval).
        sink: ``console`` or ``parquet:DIR``.
        checkpoint: Spark checkpoint location (required: a restart resumes from it).
        available_now: process what exists at start (``Trigger.AvailableNow``), then stop.
        master: Spark master (default ``local[*]``); the running session is used if any.
        remote: a Spark Connect server (``sc://host:port``) to run the query on instead;
            then ``checkpoint`` (opened by the server's driver) and a ``parquet:DIR`` sink
            (written by its executors, and checked to be seen here too:
            :mod:`icefloe.cli.remote`) are paths of the server's hosts; relative ones are
            made absolute here first.
        max_seconds: stop the query after this long (None: until interrupted).

    Raises:
        InvalidOptionError: no checkpoint, or a sink that is neither ``console`` nor
            ``parquet:DIR``.
        OutputError: with ``remote``, a sink directory the server cannot write or writes
            where this machine does not see it.
        CheckpointError: with ``remote``, a checkpoint the server cannot create.
    """
    if not checkpoint:
        raise InvalidOptionError("checkpoint", "a Spark stream needs --checkpoint DIR")
    parsed = parse_sink(sink)
    fmt, path = parsed.kind, parsed.path
    opts = {k: _option_text(v) for k, v in (options or {}).items() if v is not None}
    if remote is not None:  # the server's hosts open them: absolute, as meant here
        checkpoint = absolute(checkpoint)
        path = None if path is None else absolute(path)
    running = None if remote is not None else SparkSession.getActiveSession()
    spark = running if running is not None else session(master or "local[*]", "icefloe-stream",
                                                         remote=remote)
    try:
        register(spark)
        if remote is not None and path is not None and "://" not in path:
            probe_shared(spark, "--sink parquet:", Path(path), remote)
        merged = {**catalog_options(catalog), **opts}
        warn_secret_options(spark, merged)
        df = spark.readStream.format(SOURCE_NAME).options(**merged).load(table)
        writer = df.writeStream.format(fmt).option("checkpointLocation", checkpoint)
        if path is not None:
            writer = writer.option("path", path)
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            poll_ms = SourceOptions.parse(opts).poll_interval_ms
            writer = writer.trigger(processingTime=f"{max(poll_ms, 1)} milliseconds")
        try:
            query = writer.start()
        except Exception as refused:
            failure = None if remote is None else checkpoint_failure(refused, checkpoint,
                                                                     remote)
            if failure is not None:
                raise failure from refused
            raise
        log.info("streaming %s into %s (checkpoint %s)", table, sink, checkpoint)
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        try:
            while query.isActive:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                query.awaitTermination(1)  # seconds; the deadline is checked each second
        finally:
            if query.isActive:
                query.stop()
        exc = query.exception()
        if exc is not None:
            failure = None if remote is None else checkpoint_failure(exc, checkpoint, remote)
            if failure is not None:
                raise failure from exc
            raise exc
        return 0
    finally:
        if running is None:
            spark.stop()
