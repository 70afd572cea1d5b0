"""Entry points of the Spark adapter: register, session, read, backfill.

Run in the user's process: the driver of a classic session, or the client of a Spark
Connect session (``SparkSession.builder.remote("sc://host:port")``). A Connect client has
no JVM and no ``sparkContext``: everything here that needs one is done only for classic
sessions, and what a Connect server's Python workers need (an interpreter with icefloe,
``spark.pyspark.python``) is configured where the server starts.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyiceberg.catalog import Catalog
from pyspark.sql import DataFrame, SparkSession

from icefloe.catalog.loader import catalog_options
from icefloe.errors import EngineError
from icefloe.logs import secret_keys
from icefloe.spark.datasource import SOURCE_NAME, IcefloeDataSource

log = logging.getLogger(__name__)

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
"""PySpark refuses a reader with ``pushFilters`` unless this is true (default false)."""



_MARK = "_icefloe_registered"
"""Attribute set on a SparkSession once the format is registered with it."""


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no JVM, no ``sparkContext``).

    Decided by the session's class, so PySpark's Connect client (and its gRPC
    dependencies) is never imported for a classic session.
    """
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: Any) -> int | None:
    """The session's default parallelism, or None where a Connect client cannot know it.

    Classic: ``sparkContext.defaultParallelism`` (the cores of the cluster's executors).
    Connect: ``spark.default.parallelism`` when the server sets it; otherwise None, and
    the planner (on the Connect server's driver) packs for its own core count.
    """
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    value = spark.conf.get("spark.default.parallelism", None)
    return int(value) if value else None


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

    A Spark Connect session (:func:`is_connect`) only gets the format registered: the
    client ships the data source class to the server, whose Python workers run it with
    the interpreter the server was started with (``spark.pyspark.python`` or
    ``PYSPARK_PYTHON`` on the server's hosts), which must have icefloe installed, or be
    ``./environment/bin/python`` of an archive the client adds to its session
    (``spark.addArtifacts("env.tar.gz#environment", archive=True)``).
    """
    if getattr(spark, _MARK, False):
        return
    if not is_connect(spark):
        sc = spark.sparkContext
        if str(sc.master).startswith("local") and sc.pythonExec != sys.executable:
            log.info("local Spark: Python workers run %s (was %s)", sys.executable,
                     sc.pythonExec)
            sc.pythonExec = sys.executable
        if os.environ.get("ICEFLOE_QUIET_ENGINES") == "1":
            sc.setLogLevel("ERROR")
    spark.dataSource.register(IcefloeDataSource)
    setattr(spark, _MARK, True)


def session(master: str = "local[2]", app_name: str = "icefloe",
            config: Mapping[str, str] | None = None, preload: bool = True, *,
            remote: str | None = None) -> SparkSession:
    """A SparkSession (created, or the running one) whose Python workers run this interpreter
    (with a local master, or when nothing else is set), or ``config["spark.pyspark.python"]``
    (a cluster's: e.g. ``./environment/bin/python`` of a ``spark.archives`` environment).

    With ``remote`` (``sc://host:port``) it is a Spark Connect client session instead:
    ``master`` and ``preload`` do not apply (the server chose its master and Python
    workers when it started), and only runtime settings are sent: Python filter
    pushdown enabled, then ``config``. The ``icefloe`` format is registered.

    Sets ``PYSPARK_PYTHON`` accordingly, ``PYSPARK_DRIVER_PYTHON`` to ``sys.executable``,
    and small-footprint defaults: 1 GiB driver memory, 2 shuffle
    partitions, no UI, Python filter pushdown enabled (used only by ``pushFilters=true``
    reads). With ``preload``, Python workers fork from
    :mod:`icefloe.spark.daemon`, which has imported icefloe already (saves seconds per
    worker; needs icefloe in every worker's interpreter, which this session guarantees on
    one machine). ``config`` overrides all of these. The ``icefloe`` format is registered.
    """
    if remote is not None:
        return _connect_session(remote, app_name, config)
    # PySpark takes the Python workers' interpreter from the variable only, not the setting
    shipped = (config or {}).get("spark.pyspark.python")
    if shipped:  # e.g. ./environment/bin/python of a packed environment (spark.archives)
        os.environ["PYSPARK_PYTHON"] = shipped
    elif master.startswith("local") or "PYSPARK_PYTHON" not in os.environ:
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


def _connect_session(remote: str, app_name: str,
                     config: Mapping[str, str] | None) -> SparkSession:
    """A Spark Connect client session to ``remote`` with icefloe registered.

    PySpark's builder refuses a Connect session in a process that runs a classic one
    (``SESSION_ALREADY_EXIST``); there the Connect client's own builder is used, and
    PySpark's functions in that process stay classic (the process is not switched to
    Connect mode).
    """
    from pyspark import SparkContext

    _reach(remote)
    if SparkContext._active_spark_context is None:
        builder = SparkSession.builder.remote(remote).appName(app_name)
    else:
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        builder = ConnectSession.builder.remote(remote).appName(app_name)  # type: ignore[assignment]
    for key, value in {PUSHDOWN_CONF: "true", **(config or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


CONNECT_PORT = 15002
"""Spark Connect's default port (``sc://host`` without one)."""


def _reach(remote: str, timeout_s: float = 10.0) -> None:
    """Open (and close) a TCP connection to ``remote``'s server, so that a wrong address
    fails at once with its name: PySpark's client retries an unreachable server for about
    a minute, then reports a gRPC error that does not name it.

    Raises:
        EngineError: nothing answers at ``remote``'s host and port.
    """
    from urllib.parse import urlparse

    try:
        url = urlparse(remote)
        host, port = url.hostname or "localhost", url.port or CONNECT_PORT
    except ValueError as exc:
        raise EngineError(f"Spark Connect URL {remote!r}: {exc}; give sc://host:port") from exc
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise EngineError(
            f"no Spark Connect server answers at {remote} ({host}:{port}: {exc}); start one "
            "there (sbin/start-connect-server.sh of your Spark) or give the address of a "
            "running one") from exc


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


class SecretInPlanWarning(UserWarning):
    """Credentials given as options of a Spark Connect query (see :func:`warn_secret_options`)."""


def warn_secret_options(spark: Any, options: Mapping[str, Any]) -> list[str]:
    """Warn when a Spark Connect query's ``options`` hold credentials; returns their keys.

    On a Connect client, data source options are fields of the query's plan, which the
    client sends to the server and the server logs whole at INFO on some paths (Spark 4.3:
    ``SparkConnectExecutionManager`` printing the request when a session closes with an
    operation still registered), without redaction. The fix is to configure the catalog
    on the server's hosts (PyIceberg's ``PYICEBERG_CATALOG__<NAME>__*`` variables or
    ``.pyiceberg.yaml`` of the server's user) and pass only its name. A classic session's
    plans and event log do not show a Python data source's options: nothing to warn.
    The warning names the keys, never the values. Runs on the client.
    """
    keys = secret_keys(options) if is_connect(spark) else []
    if keys:
        message = (f"options {', '.join(keys)} travel inside the query plan to the Spark "
                   "Connect server, which may log the plan whole: configure the catalog on "
                   "the server's hosts (PYICEBERG_CATALOG__<NAME>__* variables or "
                   ".pyiceberg.yaml) and pass only catalog=<name>")
        log.warning("%s", message)
        warnings.warn(message, SecretInPlanWarning, stacklevel=3)
    return keys


def read(spark: SparkSession, table: str, catalog: str | Catalog | None = None,
         options: Mapping[str, Any] | None = None) -> DataFrame:
    """``spark.read.format("icefloe")`` over ``table`` with ``options`` (registers the format).

    Raises:
        AnalysisException: wrapping ``InvalidOptionError`` (class name and option name in
            the message) for a bad option, or the catalog / snapshot error.
    """
    register(spark)
    parallelism = default_parallelism(spark)
    merged = {**({"minPartitions": str(parallelism)} if parallelism else {}),
              **catalog_options(catalog),
              **{k: _option_text(v) for k, v in (options or {}).items() if v is not None}}
    warn_secret_options(spark, merged)
    return spark.read.format(SOURCE_NAME).options(**merged).load(table)


@dataclass(frozen=True)
class BackfillResult:
    """What a backfill wrote: ``rows`` rows in ``files`` Parquet files under ``path``."""

    path: str
    rows: int
    files: int


def backfill(table: str, catalog: str | Catalog | None = None,
             options: Mapping[str, Any] | None = None, to: str = "icefloe-backfill",
             master: str | None = None, *, mode: str = "errorifexists",
             remote: str | None = None, spark: SparkSession | None = None) -> BackfillResult:
    """Read ``table`` (a bounded read with ``options``) on Spark and write it as Parquet to ``to``.

    Uses the running SparkSession if there is one, else starts one on ``master``
    (default ``local[*]``), or connects to the Spark Connect server ``remote``
    (``sc://host:port``), and stops it afterwards; a given ``spark`` session is used
    instead and left running. ``mode`` is Spark's save mode. ``to``
    is written by the executors and counted through Spark: a path they can write (on a
    cluster, an object store URI or a shared filesystem).
    """
    running = spark if spark is not None else (
        None if remote is not None else SparkSession.getActiveSession())
    spark = running if running is not None else session(
        master or "local[*]", "icefloe-backfill", remote=remote)
    try:
        df = read(spark, table, catalog=catalog, options=options)
        # "error" and "errorifexists" are one mode; Spark Connect's client knows only "error"
        df.write.mode("error" if mode == "errorifexists" else mode).parquet(to)
        written = spark.read.parquet(to)
        result = BackfillResult(path=to, rows=written.count(), files=len(written.inputFiles()))
        log.info("backfilled %s: %d rows in %d files under %s", table, result.rows,
                 result.files, to)
        return result
    finally:
        if running is None:
            spark.stop()
