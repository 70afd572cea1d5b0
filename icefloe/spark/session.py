"""Entry points of the Spark adapter: register, session, read, backfill. Run on the driver."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyiceberg.catalog import Catalog
from pyspark.sql import DataFrame, SparkSession

from icefloe.catalog.loader import catalog_options
from icefloe.spark.datasource import SOURCE_NAME, IcefloeDataSource

log = logging.getLogger(__name__)

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
"""PySpark refuses a reader with ``pushFilters`` unless this is true (default false)."""



_MARK = "_icefloe_registered"
"""Attribute set on a SparkSession once the format is registered with it."""


def register(spark: SparkSession) -> None:
    """Register the ``icefloe`` format with ``spark`` (once per session; safe to call again).

    With a local master (``local``, ``local[N]``), Python workers run on this machine:
    ``register`` points them at this interpreter (``sc.pythonExec``, which PySpark
    otherwise takes from ``PYSPARK_PYTHON`` or ``python3`` on the PATH, often one without
    pyarrow or icefloe), so an ordinary ``SparkSession.builder.getOrCreate()`` works. On
    a cluster it cannot: set ``spark.pyspark.python`` (or ``PYSPARK_PYTHON``) to an
    interpreter with icefloe installed on every executor. Other session settings are left
    alone: the opt-in ``pushFilters=true`` option also needs
    ``spark.sql.python.filterPushdown.enabled=true`` (PySpark refuses the read with
    DATA_SOURCE_PUSHDOWN_DISABLED otherwise); :func:`session` sets it.
    """
    if getattr(spark, _MARK, False):
        return
    sc = spark.sparkContext
    if str(sc.master).startswith("local") and sc.pythonExec != sys.executable:
        log.info("local Spark: Python workers run %s (was %s)", sys.executable, sc.pythonExec)
        sc.pythonExec = sys.executable
    if os.environ.get("ICEFLOE_QUIET_ENGINES") == "1":
        sc.setLogLevel("ERROR")
    spark.dataSource.register(IcefloeDataSource)
    setattr(spark, _MARK, True)


def session(master: str = "local[2]", app_name: str = "icefloe",
            config: Mapping[str, str] | None = None, preload: bool = True) -> SparkSession:
    """A SparkSession (created, or the running one) whose Python workers run this interpreter.

    Sets ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` to ``sys.executable`` (so executors
    import the same icefloe), and small-footprint defaults: 1 GiB driver memory, 2 shuffle
    partitions, no UI, Python filter pushdown enabled (used only by ``pushFilters=true``
    reads). With ``preload``, Python workers fork from
    :mod:`icefloe.spark.daemon`, which has imported icefloe already (saves seconds per
    worker; needs icefloe in every worker's interpreter, which this session guarantees on
    one machine). ``config`` overrides all of these. The ``icefloe`` format is registered.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    settings = {
        "spark.driver.memory": "1g",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        PUSHDOWN_CONF: "true",
        **({"spark.python.daemon.module": "icefloe.spark.daemon"} if preload else {}),
        **(config or {}),
    }
    if os.environ.get("ICEFLOE_QUIET_ENGINES") == "1" and "spark.driver.extraJavaOptions" \
            not in settings:  # the icefloe command without -v: no JVM start-up chatter
        quiet = Path(__file__).with_name("log4j2-quiet.properties")
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={quiet.as_uri()}"
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def read(spark: SparkSession, table: str, catalog: str | Catalog | None = None,
         options: Mapping[str, Any] | None = None) -> DataFrame:
    """``spark.read.format("icefloe")`` over ``table`` with ``options`` (registers the format).

    Raises:
        AnalysisException: wrapping ``InvalidOptionError`` (class name and option name in
            the message) for a bad option, or the catalog / snapshot error.
    """
    register(spark)
    merged = {"minPartitions": str(spark.sparkContext.defaultParallelism),
              **catalog_options(catalog),
              **{k: _option_text(v) for k, v in (options or {}).items() if v is not None}}
    return spark.read.format(SOURCE_NAME).options(**merged).load(table)


@dataclass(frozen=True)
class BackfillResult:
    """What a backfill wrote: ``rows`` rows in ``files`` Parquet files under ``path``."""

    path: str
    rows: int
    files: int


def backfill(table: str, catalog: str | Catalog | None = None,
             options: Mapping[str, Any] | None = None, to: str = "icefloe-backfill",
             master: str | None = None, *, mode: str = "errorifexists") -> BackfillResult:
    """Read ``table`` (a bounded read with ``options``) on Spark and write it as Parquet to ``to``.

    Uses the running SparkSession if there is one, else starts one on ``master``
    (default ``local[*]``) and stops it afterwards. ``mode`` is Spark's save mode.
    """
    running = SparkSession.getActiveSession()
    spark = running if running is not None else session(master or "local[*]", "icefloe-backfill")
    try:
        df = read(spark, table, catalog=catalog, options=options)
        df.write.mode(mode).parquet(to)
        written = spark.read.parquet(to)
        result = BackfillResult(path=to, rows=written.count(), files=len(written.inputFiles()))
        log.info("backfilled %s: %d rows in %d files under %s", table, result.rows,
                 result.files, to)
        return result
    finally:
        if running is None:
            spark.stop()
