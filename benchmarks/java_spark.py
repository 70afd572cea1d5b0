"""Iceberg's Java Spark reader (Iceberg 1.10.2 on PySpark 3.5) as a benchmark peer.

icefloe runs on PySpark 4.x in ``.venv``; Iceberg's Spark runtime needs Spark 3.5, which
lives in ``.venv-interop`` (``make interop-env``, see ``interop/setup.sh``). This module is
both sides of that split:

- in ``.venv`` (the benchmark), :class:`JavaSpark` starts this file as a child under
  ``.venv-interop/bin/python`` and keeps it running, so the Java session starts once and
  the runs of both readers can be interleaved; each request is one JSON line on the
  child's stdin, each answer one ``@@`` line on its stdout;
- in ``.venv-interop`` (the child, ``python benchmarks/java_spark.py --serve``), a local
  Spark 3.5 session with Iceberg's runtime (``interop/session.py``'s jars, vectorized
  Parquet reads on) answers: ``batch`` (a full read materialized by a ``noop`` write),
  ``stream`` (a ``Trigger.AvailableNow`` query into ``noop``), ``build_stream`` (a table of
  N one-file append snapshots written by Java Iceberg (transactions of 500 commits)).

Tables are read by their metadata JSON (``spark.read.format("iceberg").load(path)``:
Iceberg's ``HadoopTables`` opens a ``*.metadata.json`` location as a static table), the
same files icefloe reads through the SQLite catalog. Only the standard library is imported
at module level: the child has neither icefloe nor PyIceberg.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
INTEROP_PYTHON = REPO / ".venv-interop" / "bin" / "python"
MARK = "@@"
COMMITS_PER_TRANSACTION = 500
"""A transaction keeps every change of its commits in memory: 5,000 commits in one filled
a 1 GiB driver and each commit then took seconds of garbage collection."""

MISSING = (
    "_Not measured: the interop environment (`.venv-interop`: PySpark 3.5 with Iceberg "
    "1.10.2's Spark runtime) does not exist. Create it with `make interop-env` (needs Java "
    "17), then run this section again._"
)


def tree_cpu(root: int, exclude: frozenset[int] = frozenset()) -> float:
    """CPU seconds (user + system) of process ``root`` and its live descendants, with the
    reaped children each has waited for, leaving out the subtrees of ``exclude``: a Spark
    application's driver, JVM and Python workers. Linux ``/proc``; 0.0 elsewhere."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(v) for v in fields[11:15]) / tick
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in exclude:
            continue
        total += times.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


def available() -> bool:
    """Whether ``.venv-interop`` exists (``make interop-env``)."""
    return INTEROP_PYTHON.exists()


class JavaSpark:
    """The child process holding a Spark 3.5 session with Iceberg 1.10.2 (benchmark side).

    Use as a context manager; :meth:`call` sends one request and returns the child's answer.
    """

    def __init__(self, timeout: float = 3600, driver_memory: str = "1g") -> None:
        self.timeout = timeout
        self.driver_memory = driver_memory
        self.proc: subprocess.Popen[str] | None = None
        self.log = open(os.devnull, "w")  # noqa: SIM115 - closed in close()

    def __enter__(self) -> JavaSpark:
        env = {**os.environ, "PYTHONPATH": str(REPO),
               "ICEFLOE_BENCH_JAVA_MEMORY": self.driver_memory}
        env.pop("VIRTUAL_ENV", None)
        env.pop("SPARK_HOME", None)
        self.proc = subprocess.Popen(
            [str(INTEROP_PYTHON), str(Path(__file__).resolve()), "--serve"],
            cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log if os.environ.get("ICEFLOE_BENCH_JAVA_LOG") != "1" else None,
            text=True, bufsize=1,
        )
        self.call("ping")  # the session is up: JVM start-up is not in any timing
        return self

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        """Send ``op`` with ``args``; the child's JSON answer (raises on its error)."""
        assert self.proc is not None and self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(MARK):
                answer: dict[str, Any] = json.loads(line[len(MARK):])
                if "error" in answer:
                    raise RuntimeError(f"Java Spark child, {op}: {answer['error']}")
                return answer
        raise RuntimeError(f"Java Spark child exited ({self.proc.wait()}) during {op}; "
                           "rerun with ICEFLOE_BENCH_JAVA_LOG=1 to see its log")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# --------------------------------------------------------------------------- the child


def _session() -> Any:
    sys.path.insert(0, str(REPO / "interop"))
    from pyspark.sql import SparkSession
    from session import _jars  # interop/session.py

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["TZ"] = "UTC"
    time.tzset()
    home = Path(os.environ.get("ICEFLOE_BENCH_JAVA_HOME", "/tmp/icefloe-bench-java"))
    home.mkdir(parents=True, exist_ok=True)
    spark = (
        SparkSession.builder.master("local[2]").appName("iceberg-java-bench")
        .config("spark.jars", ",".join(_jars()))
        .config("spark.sql.extensions",
                "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.driver.memory", os.environ.get("ICEFLOE_BENCH_JAVA_MEMORY", "1g"))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.iceberg.vectorization.enabled", "true")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _batch(spark: Any, metadata: str) -> dict[str, Any]:
    cpu = tree_cpu(os.getpid())
    start = time.perf_counter()
    df = spark.read.format("iceberg").load(metadata)
    df.write.format("noop").mode("overwrite").save()
    return {"seconds": time.perf_counter() - start, "cpu": tree_cpu(os.getpid()) - cpu}


def _count(spark: Any, metadata: str) -> dict[str, Any]:
    df = spark.read.format("iceberg").load(metadata)
    plan = df._jdf.queryExecution().executedPlan().toString()
    return {"rows": df.count(), "columns": df.columns,
            "vectorized": "ColumnarToRow" in plan or "BatchScan" in plan, "plan": plan[:600]}


def _stream(spark: Any, metadata: str, checkpoint: str,
            options: dict[str, str]) -> dict[str, Any]:
    reader = spark.readStream.format("iceberg").options(**options)
    cpu = tree_cpu(os.getpid())
    start = time.perf_counter()
    query = (reader.load(metadata).writeStream.format("noop")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - start
    cpu = tree_cpu(os.getpid()) - cpu
    progress = query.recentProgress
    rows = sum(int(p["numInputRows"]) for p in progress)
    batches = sum(1 for p in progress if int(p["numInputRows"]) > 0)
    return {"seconds": seconds, "rows": rows, "batches": batches, "cpu": cpu}


def _build_stream(spark: Any, home: str, identifier: str, paths: list[str]) -> dict[str, Any]:
    """Create ``identifier`` in a JDBC catalog ``bench`` at ``home`` and append each file of
    ``paths`` as its own snapshot (merge appends, Iceberg's default), in transactions of
    :data:`COMMITS_PER_TRANSACTION` commits: the metadata JSON, which lists every snapshot,
    is written once per transaction instead of once per commit."""
    prefix = "spark.sql.catalog.bench"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.type", "jdbc")
    spark.conf.set(f"{prefix}.uri", f"jdbc:sqlite:{home}/catalog.db")
    spark.conf.set(f"{prefix}.jdbc.schema-version", "V1")
    spark.conf.set(f"{prefix}.warehouse", f"file://{home}/warehouse")
    spark.conf.set(f"{prefix}.cache-enabled", "false")
    namespace = identifier.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS bench.{namespace}")
    spark.sql(f"CREATE TABLE bench.{identifier} (id bigint, ts timestamp_ntz, kind string, "
              "value double, payload string) USING iceberg "
              "TBLPROPERTIES ('format-version'='2')")
    jvm = spark._jvm
    iceberg = jvm.org.apache.iceberg

    def load() -> Any:
        return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, f"bench.{identifier}")

    table = load()
    spec = table.spec()
    metrics_config = iceberg.MetricsConfig.forTable(table)
    parquet = iceberg.FileFormat.PARQUET
    start = time.perf_counter()
    for lo in range(0, len(paths), COMMITS_PER_TRANSACTION):
        # a fresh table object per transaction: a snapshot object keeps the manifest list
        # it read, so one table object would hold every snapshot's list (heap exhausted at
        # ~7,000 snapshots)
        table = load()
        txn = table.newTransaction()
        for path in paths[lo:lo + COMMITS_PER_TRANSACTION]:
            data = table.io().newInputFile(path)
            metrics = iceberg.parquet.ParquetUtil.fileMetrics(data, metrics_config)
            txn.newAppend().appendFile(
                iceberg.DataFiles.builder(spec).withInputFile(data).withMetrics(metrics)
                .withFormat(parquet).build()).commit()
        txn.commitTransaction()
    table = load()
    return {"seconds": time.perf_counter() - start,
            "metadata": table.operations().current().metadataFileLocation(),
            "snapshots": len(list(table.snapshots()))}


def serve() -> None:
    """The child's loop: one JSON request per stdin line, one ``@@`` answer line each."""
    spark = _session()
    ops = {
        "ping": lambda: {"spark": spark.version},
        "batch": lambda metadata: _batch(spark, metadata),
        "count": lambda metadata: _count(spark, metadata),
        "stream": lambda metadata, checkpoint, options: _stream(spark, metadata, checkpoint,
                                                                options),
        "build_stream": lambda home, identifier, paths: _build_stream(spark, home,
                                                                      identifier, paths),
    }
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        try:
            answer = ops[op](**request)
        except Exception as exc:  # reported to the parent, which raises
            answer = {"error": f"{type(exc).__name__}: {exc}"[-3000:]}
        print(MARK + json.dumps(answer), flush=True)
    spark.stop()


if __name__ == "__main__" and "--serve" in sys.argv:
    serve()
