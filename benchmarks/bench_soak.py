"""The soak: streams on the local engine, Ray and Spark follow one table under a fast
writer, compaction and expiry.

``make soak`` (``SOAK_MINUTES``, default 30; ``SOAK_ENGINES``, default ``local,ray,spark``;
``SOAK_WRITER``, default ``java``) or
``uv run python -m benchmarks.bench_soak --minutes N --engines local,ray,spark``.
Not part of ``make bench``; it does not take the bench lock (it measures flatness within
itself, and records the machine's load average per window).

A SQLite catalog in a temp dir. **The writer** (``--writer java``): Java Iceberg 1.10.2's
API in a plain JVM (``benchmarks/java/SoakWriter.java``, compiled once and cached under
``benchmarks/data/``, the interop environment's jars plus Debian's sqlite-jdbc), creating
the table through Iceberg's ``JdbcCatalog`` on the catalog PyIceberg's ``SqlCatalog`` reads;
it commits ``HISTORY`` appends back to back (the history a table under a retention policy
has), then ``ROWS``-row appends at ``RATE`` commits a second while running. Every
``COMPACT_EVERY`` appends it rewrites the files of the last appends into one (a ``replace``
snapshot, skipped by the streams as compactions are) and every ``EXPIRE_EVERY`` appends it
expires the snapshots older than ``RETAIN_S`` seconds (deleting the files no snapshot
keeps). ``--writer pyiceberg`` is a slower writer in the parent process (PyIceberg appends;
its commit cost grows with the metadata), used by the harness's smoke test where no
interop environment exists.

**The streams**, one child process per engine, each measuring its own CPU and RSS over its
process tree (Spark's JVM and Python workers; Ray's GCS, raylet and workers; for Ray's CPU
only the driver and Ray's workers, icefloe's actors, count: the daemons' idle CPU would
drown the figures), reading the table from ``startingVersion=earliest`` and checking every
id it receives:

- ``local``: ``IcebergSource.stream`` (``pollIntervalMs=200``, checkpoint on disk every 1 s);
- ``ray``: ``icefloe.ray.RayStream`` in driver mode (one enumerator actor, one reader actor,
  same poll interval and checkpoint), on a local Ray started by the child;
- ``spark``: Structured Streaming with icefloe's data source (``local[2]``, a 1 s
  processing-time trigger) into an idempotent ``foreachBatch`` sink: one Parquet file per
  micro-batch id, replaced when a batch is replayed; the ids are read back from it.

**A window**: the writer commits for ``WINDOW_S`` seconds (the streams' lag sampled every
``SAMPLE_S``), pauses; each stream catches up (has every id written); then ``IDLE_S``
seconds with nothing committed. Per window and engine: CPU per new snapshot (the CPU from
the window's start until the stream caught up, less the idle rate of the window's idle
phase times that time, per append), CPU per idle poll (the idle phase's CPU per poll the
stream made: ``metrics().polls`` for local and Ray, triggers for Spark), RSS, lag (records
and seconds; the largest and median samples), checkpoint size, the 1-minute load average.

**Per poll** (local and Ray): a :class:`PollLog` in the enumerating process (the local
stream's; Ray's enumerator actor, swapped in by the Ray child) records each poll's CPU in
``refresh`` and ``enumerate``, the process's CPU, the new snapshots it processed and the
snapshots in the metadata; :func:`poll_fits` regresses the CPU on the new snapshots and the
history (``soak-polls.png``), which separates a cost that grows with the history from the
load and from how many snapshots a poll batches. ``--retain`` sets the expiry's retention
(a long one: a history that grows through the run); ``--spark-heap fixed`` (the default)
starts Spark's driver JVM with its whole heap committed and touched, so its RSS cannot
follow the heap's sizing; ``--spark-jvm recommended`` (the default) gives the driver what
README.md's "Months-long Spark streams" recommends (:data:`SPARK_JVM_OPTIONS`,
:data:`SPARK_ENV`), ``plain`` the JVM's defaults; ``--spark-nmt`` runs it under Native
Memory Tracking, its categories read at each window's end. Spark's windows record the RSS
by process role, and the end what a ``malloc_trim`` of the driver JVM returns.

At the end: every row exactly once: each stream's ids (the Spark sink's files) against the
writer's report (ids ``0 .. rows-1``), and PyIceberg's scan of the head. Targets (issue 26):
CPU per new snapshot in the last window within 1.5x of the first, RSS growth under 50 MB
(the last window against the first), lag without an upward trend (a least-squares slope of
the largest lag per window over time), every row exactly once. The RSS verdict also
prints the growth over the run's second half: a JVM's JIT warm-up (the Spark driver's code
cache and metaspace, about 36 MB in its first 10 minutes) falls in the first.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, md_table, tree_processes, tree_usage, verdict

ENGINES = ("local", "ray", "spark")
POLL_MS = 200
SPARK_TRIGGER_S = 1.0
RATE = 10.0
ROWS = 5
COMPACT_EVERY = 100
EXPIRE_EVERY = 50
RETAIN_S = 90.0
HISTORY = 500
WINDOW_S = 60.0
IDLE_S = 6.0
SAMPLE_S = 5.0
CATCH_UP_S = 300.0
SQLITE_JDBC = "/usr/share/java/sqlite-jdbc.jar"
NAME = "soak"
TABLE = "soak.t"


# --------------------------------------------------------------------------- the streams


def catalog_options(root: str) -> dict[str, str]:
    """icefloe options naming the soak's SQLite catalog (``catalog.<prop>``: PyIceberg's)."""
    return {"catalog": NAME, "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{root}/catalog.db",
            "catalog.warehouse": f"file://{root}/warehouse"}



def _ask(proc: subprocess.Popen[str], request: str, who: str, log: str) -> dict[str, Any]:
    """Send a child one line of its protocol; its one-line JSON answer."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(request + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"{who} exited ({proc.wait()}); see {log}")
    return dict(json.loads(line))

class Ids:
    """The ids a stream received: rows, distinct, duplicates (an id seen twice), range.

    Thread-safe (Spark's ``foreachBatch`` and a reporting thread). ``key`` groups a delivery
    (a Spark micro-batch id, a non-negative integer): an id delivered again under the same
    key is a replay of the same batch into an idempotent sink, not a duplicate. Ids are
    the writer's, ``0 .. rows-1``: each id's first key is kept in an array indexed by the
    id (8 bytes an id), so the ledger adds little to the RSS the soak measures in the same
    process (a dict of them held 7.2 MB at the 83,000 ids of a 30-minute soak).
    """

    def __init__(self) -> None:
        from array import array

        self.lock = threading.Lock()
        self.owner = array("q")  # id -> the key of its first delivery; -1: not seen
        self.distinct = 0
        self.rows_by_key: dict[int, int] = {}
        self.duplicates = 0
        self.anonymous = self.anonymous_rows = 0
        self.min_id: int | None = None
        self.max_id: int | None = None

    def add(self, ids: Sequence[int], key: int | None = None) -> None:
        """Record one delivery; ids must be non-negative (ValueError otherwise)."""
        with self.lock:
            if key is None:  # a delivery of its own: never replayed, only counted
                key = self.anonymous = self.anonymous + 1
                self.anonymous_rows += len(ids)
            else:
                self.rows_by_key[key] = len(ids)
            owner = self.owner
            for value in ids:
                if value < 0:
                    raise ValueError(f"id {value} is negative; the writer's ids start at 0")
                if value >= len(owner):
                    owner.extend([-1] * max(value + 1 - len(owner), len(owner)))
                prev = owner[value]
                if prev == -1:
                    owner[value] = key
                    self.distinct += 1
                    self.min_id = value if self.min_id is None else min(self.min_id, value)
                    self.max_id = value if self.max_id is None else max(self.max_id, value)
                elif prev != key:
                    self.duplicates += 1

    def report(self) -> dict[str, Any]:
        with self.lock:
            return {"rows": sum(self.rows_by_key.values()) + self.anonymous_rows,
                    "distinct": self.distinct,
                    "duplicates": self.duplicates, "min_id": self.min_id,
                    "max_id": self.max_id}


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def _serve(report: Callable[[str], dict[str, Any]]) -> None:
    """Answer every stdin line with ``report(line)`` (one JSON line) until ``stop``: the
    line is ``report``, or ``report nmt`` at a window's end (the costlier figures: Spark's
    RSS by process role and its driver JVM's native memory)."""
    for line in sys.stdin:
        request = line.strip()
        if request == "stop":
            return
        print(json.dumps(report(request)), flush=True)


def _base_report(ids: Ids, ckpt: Path) -> dict[str, Any]:
    cpu, rss = tree_usage(os.getpid())
    return {"cpu": cpu, "rss_mb": rss, "checkpoint_bytes": _dir_bytes(ckpt), **ids.report()}


class PollLog:
    """Per-poll records of one stream's enumerator, in the process that enumerates (the
    local stream's process, Ray's enumerator actor): the soak's per-poll regression.

    Wraps the :class:`~icefloe.enumerator.continuous.ContinuousEnumerator` instance's
    ``refresh`` and ``enumerate`` (the enumeration loop calls both through the instance).
    A record per poll (a refresh and the enumeration after it): ``t`` (Unix seconds),
    ``refresh_ms`` and ``enumerate_ms`` (the enumeration thread's CPU, ``time.thread_time``),
    ``process_cpu`` (this process's CPU seconds after the poll, all threads: Ray's actor
    calls included), ``units`` (snapshots the poll processed: each ends a unit, a
    skipped ``replace`` too), ``splits`` and ``history`` (snapshots in the table metadata
    the poll saw), ``load1``. :meth:`take` hands out the records made since its last call.
    """

    def __init__(self, enumerator: Any) -> None:
        from icefloe.enumerator.continuous import UnitEnd

        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        refresh, enumerate_ = enumerator.refresh, enumerator.enumerate
        refresh_cpu = [0.0]

        def timed_refresh() -> None:
            start = time.thread_time()
            try:
                refresh()
            finally:
                refresh_cpu[0] = time.thread_time() - start

        def timed_enumerate(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            result = enumerate_(*args, **kwargs)
            spent = time.thread_time() - start
            record = {"t": time.time(), "refresh_ms": refresh_cpu[0] * 1000,
                      "enumerate_ms": spent * 1000, "process_cpu": time.process_time(),
                      "units": sum(isinstance(i, UnitEnd) for i in result.items),
                      "splits": len(result.splits),
                      "history": len(enumerator.handle.metadata.snapshots),
                      "load1": os.getloadavg()[0]}
            refresh_cpu[0] = 0.0
            with self._lock:
                self._records.append(record)
            return result

        enumerator.refresh = timed_refresh
        enumerator.enumerate = timed_enumerate

    def take(self) -> list[dict[str, Any]]:
        with self._lock:
            out, self._records = self._records, []
        return out


def _soak_enumerator_actor() -> Any:
    """Ray's enumerator actor with a :class:`PollLog` (``poll_records()``)."""
    from icefloe.ray.actors import EnumeratorActor

    class SoakEnumeratorActor(EnumeratorActor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.poll_log = PollLog(self.coordinator.enumerator)

        def poll_records(self) -> list[dict[str, Any]]:
            return self.poll_log.take()

    return SoakEnumeratorActor


def _by_process(procs: list[tuple[int, str, float, float]]) -> dict[str, list[float]]:
    """CPU seconds and RSS (MiB) of a process tree summed by process name."""
    out: dict[str, list[float]] = {}
    for _, name, cpu, rss in procs:
        total = out.setdefault(name, [0.0, 0.0])
        total[0] += cpu
        total[1] += rss
    return out


def child_icefloe_stream(engine: str, root: str) -> None:
    """The local or Ray stream (driver mode): consume on a thread, answer reports."""
    ids = Ids()
    ckpt = Path(root) / f"ckpt-{engine}"
    options = {**catalog_options(root), "pollIntervalMs": str(POLL_MS),
               "startingVersion": "earliest"}
    if engine == "local":
        from icefloe import IcebergSource

        stream: Any = IcebergSource(TABLE, options=options).stream(
            checkpoint=str(ckpt), checkpoint_interval_s=1)
        poll_log = PollLog(stream.coordinator.enumerator)
        take_polls: Callable[[], list[dict[str, Any]]] = poll_log.take
    else:
        import logging

        import ray

        import icefloe.ray

        # the enumerator actor with a poll log (the soak's per-poll regression); the
        # module, not the package's ``stream`` function of the same name
        ray_stream: Any = importlib.import_module("icefloe.ray.stream")
        ray_stream._EnumeratorRemote = ray.remote(_soak_enumerator_actor())
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 object_store_memory=200 * 1024 * 1024, logging_level=logging.WARNING,
                 _temp_dir=str(Path(root) / "ray"))  # its own session dir: no other Ray's
        stream = icefloe.ray.RayStream(TABLE, options=options, checkpoint=str(ckpt),
                                       num_readers=1, reader_num_cpus=0.5,
                                       checkpoint_interval_s=1, metrics_interval_s=0)

        def take_polls() -> list[dict[str, Any]]:
            return list(ray.get(stream.enumerator.poll_records.remote()))

    def consume() -> None:
        for item in stream:
            ids.add(item.batch.column("id").to_pylist())
            item.ack()

    def report(request: str = "report") -> dict[str, Any]:
        m = stream.metrics()
        procs = tree_processes(os.getpid())
        extra: dict[str, Any] = {"procs": _by_process(procs)}
        if engine == "ray":  # the driver and Ray's workers (icefloe's actors) apart from
            # Ray's own daemons (GCS, raylet, agents), whose idle CPU dominates the tree's
            mine = [p for p in procs if p[0] == os.getpid() or p[1].startswith("ray::")]
            extra.update(cpu_total=sum(p[2] for p in procs), cpu=sum(p[2] for p in mine))
        return {**_base_report(ids, ckpt), **extra, "lag_records": m.lag_records,
                "lag_seconds": m.lag_seconds, "lag_snapshots": m.lag_snapshots,
                "polls": m.polls, "poll_records": take_polls()}

    with stream:
        threading.Thread(target=consume, daemon=True).start()
        _serve(report)


SPARK_FIXED_HEAP = "-Xms1g -XX:+AlwaysPreTouch"
"""The driver JVM's heap at its full size (the session's 1 GiB) from the start, every page
touched: its RSS then cannot grow with the heap's sizing, only with memory kept elsewhere."""

SPARK_JVM_OPTIONS: dict[str, str] = {
    "recommended": "-XX:TrimNativeHeapInterval=60000", "plain": ""}
"""The driver JVM's options beyond the heap's, by ``--spark-jvm``: ``recommended`` (what
README.md's "Months-long Spark streams" tells a user to set) or ``plain`` (none)."""

SPARK_ENV: dict[str, dict[str, str]] = {"recommended": {"MALLOC_ARENA_MAX": "2"},
                                        "plain": {}}
"""The Spark child's environment additions (inherited by its driver JVM and Python
workers), by ``--spark-jvm``."""

SPARK_CONF: dict[str, dict[str, str]] = {"recommended": {}, "plain": {}}
"""Spark settings beyond :func:`icefloe.spark.session`'s, by ``--spark-jvm``."""


def spark_java_options(heap: str, jvm: str, extra: str = "", nmt: bool = False) -> str:
    """The driver JVM's ``extraJavaOptions``: the heap's (``fixed``: :data:`SPARK_FIXED_HEAP`),
    ``jvm``'s (:data:`SPARK_JVM_OPTIONS`), ``extra`` and, with ``nmt``, Native Memory
    Tracking (summary level, read by ``jcmd <pid> VM.native_memory summary``)."""
    parts = [SPARK_FIXED_HEAP if heap == "fixed" else "", SPARK_JVM_OPTIONS[jvm], extra,
             "-XX:NativeMemoryTracking=summary" if nmt else ""]
    return " ".join(p for p in parts if p)


def nmt_summary(pid: int) -> dict[str, float]:
    """The committed MiB per Native Memory Tracking category of JVM ``pid`` (``jcmd``; the
    JVM started with ``-XX:NativeMemoryTracking``): ``{"Total": ..., "Java Heap": ...,
    "Class": ..., "Thread": ..., "Code": ..., "GC": ..., "Compiler": ..., "Internal": ...,
    "Other": ..., "Symbol": ..., "Native Memory Tracking": ..., "Arena Chunk": ...,
    "Metaspace": ...}`` plus the counts ``classes`` and ``threads``; empty when jcmd
    fails."""
    import re

    try:
        out = subprocess.run(["jcmd", str(pid), "VM.native_memory", "summary", "scale=KB"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found = re.findall(r"^(?:Total:|-\s*([A-Z][A-Za-z ]+?) \()\s*reserved=\d+KB, "
                       r"committed=(\d+)KB", out, flags=re.MULTILINE)
    out_mb = {name.strip() or "Total": int(kb) / 1024 for name, kb in found}
    for key, pattern in (("classes", r"\(classes #(\d+)\)"), ("threads", r"\(thread #(\d+)\)")):
        match = re.search(pattern, out)
        if match:  # counts, not MiB
            out_mb[key] = float(match.group(1))
    return out_mb


def _rss_mb(pid: int) -> float:
    """Process ``pid``'s resident set (MiB, /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def trim_native_heap(pid: int) -> tuple[float, float]:
    """JVM ``pid``'s RSS (MiB) before and after ``jcmd <pid> System.trim_native_heap``
    (glibc's ``malloc_trim``: the memory the JVM freed that glibc kept, handed back to the
    system); the same figure twice when jcmd fails."""
    before = _rss_mb(pid)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["jcmd", str(pid), "System.trim_native_heap"], capture_output=True,
                       timeout=60, check=True)
    return before, _rss_mb(pid)


def _proc_roles(me: int) -> dict[str, float]:
    """RSS (MiB) of this process's tree by role: ``driver python`` (this process),
    ``driver jvm``, and each other process by its ``-m`` module (``worker of M``: forked by
    a daemon running ``M``), pid appended where a role has several."""
    procs = tree_processes(me)
    modules: dict[int, str] = {}
    parents: dict[int, int] = {}
    for pid, name, _, _ in procs:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            parents[pid] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]
                               .split()[1])
        except (OSError, ValueError):
            continue
        args = [a.decode(errors="replace") for a in argv]
        modules[pid] = args[args.index("-m") + 1] if "-m" in args[:-1] else name
    out: dict[str, float] = {}
    for pid, name, _, rss in procs:
        if pid == me:
            role = "driver python"
        elif name == "java":
            role = "driver jvm"
        else:
            module = modules.get(pid, name)
            parent = parents.get(pid)
            role = module if parent is None or modules.get(parent) != module \
                else f"worker of {module}"
        key = role if role not in out else f"{role} {pid}"
        out[key] = rss
    return out


def child_spark(root: str, heap: str = "fixed", jvm: str = "recommended",
                java_options: str = "", nmt: bool = False) -> None:
    """Structured Streaming into an idempotent sink (a Parquet file per micro-batch id).

    ``heap``: ``fixed`` (:data:`SPARK_FIXED_HEAP`) or ``grow`` (the JVM's default sizing).
    ``jvm``: the driver's settings (:data:`SPARK_JVM_OPTIONS`, :data:`SPARK_CONF`; the
    environment of :data:`SPARK_ENV` is set by the parent when it starts this child).
    ``java_options``: more driver JVM options (an experiment's). ``nmt``: the driver JVM
    under Native Memory Tracking; a ``report nmt`` request adds its pid (``jvm_pid``), whose
    summary the lead reads (``jcmd`` run from this process would count in its CPU).
    """
    import pyarrow.parquet as pq

    import icefloe.spark

    ids = Ids()
    ckpt = Path(root) / "ckpt-spark"
    sink = Path(root) / "spark-sink"
    sink.mkdir(parents=True, exist_ok=True)
    options = {**catalog_options(root), "startingVersion": "earliest"}
    config = dict(SPARK_CONF[jvm])
    java = spark_java_options(heap, jvm, java_options, nmt)
    if java:
        config["spark.driver.extraJavaOptions"] = java
    spark = icefloe.spark.session("local[2]", app_name="icefloe-soak", config=config)
    spark.sparkContext.setLogLevel("ERROR")
    gateway: Any = spark.sparkContext._jvm
    jvm_pid = int(gateway.java.lang.ProcessHandle.current().pid())

    def write(df: Any, batch_id: int) -> None:
        table = df.select("id").toArrow()
        tmp = sink / f".batch-{batch_id:09d}.parquet.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, sink / f"batch-{batch_id:09d}.parquet")
        ids.add(table.column("id").to_pylist(), key=batch_id)

    query = (spark.readStream.format("icefloe").options(**options).load(TABLE)
             .writeStream.foreachBatch(write).option("checkpointLocation", str(ckpt))
             .trigger(processingTime=f"{SPARK_TRIGGER_S:g} seconds").start())
    started = time.monotonic()

    def report(request: str = "report") -> dict[str, Any]:
        if query.exception() is not None:
            raise RuntimeError(f"the Spark query failed: {query.exception()}")
        lag = icefloe.spark.progress_lag(query.lastProgress, TABLE, options) \
            if query.lastProgress else None
        # a poll is a trigger: Spark calls latestOffset once per processing-time trigger
        triggers = int((time.monotonic() - started) / SPARK_TRIGGER_S)
        # the driver JVM's heap in use after the last collection of each heap pool (old
        # generation included): what a leak grows, where its RSS follows the heap's sizing
        jvm: Any = spark.sparkContext._jvm
        live = sum(pool.getCollectionUsage().getUsed()
                   for pool in jvm.java.lang.management.ManagementFactory
                   .getMemoryPoolMXBeans()
                   if str(pool.getType()) == "Heap memory" and pool.getCollectionUsage())
        extra: dict[str, Any] = {}
        if request == "report nmt":  # at a window's end: the costlier figures
            extra["roles"] = _proc_roles(os.getpid())
            if nmt:  # read by the lead (jcmd is a JVM: in this tree its CPU would count)
                extra["jvm_pid"] = jvm_pid
        elif request == "report trim":  # at the end: what glibc kept of the JVM's frees
            extra["trim_mb"] = trim_native_heap(jvm_pid)
        return {**_base_report(ids, ckpt), "polls": triggers, **extra,
                "procs": _by_process(tree_processes(os.getpid())),
                "jvm_live_heap_mb": live / 2**20,
                "lag_records": lag.records if lag else 0,
                "lag_seconds": lag.seconds if lag else 0.0,
                "lag_snapshots": lag.snapshots if lag else 0}

    try:
        _serve(report)
    finally:
        query.stop()
        spark.stop()


def sink_ids(root: Path) -> list[int]:
    """Every id in the Spark sink's files (the idempotent sink's content)."""
    import pyarrow.parquet as pq

    out: list[int] = []
    for f in sorted((root / "spark-sink").glob("batch-*.parquet")):
        out.extend(pq.read_table(f).column("id").to_pylist())
    return out


def _close(proc: subprocess.Popen[str], log: Any) -> None:
    for f in (proc.stdin, proc.stdout, log):
        if f is not None:
            f.close()


@dataclasses.dataclass(frozen=True)
class SparkSetup:
    """How the soak's Spark child runs its driver (see :func:`child_spark`): ``heap``
    (``fixed`` or ``grow``), ``jvm`` (``recommended`` or ``plain``), more JVM options
    (``java_options``), Native Memory Tracking (``nmt``)."""

    heap: str = "fixed"
    jvm: str = "recommended"
    java_options: str = ""
    nmt: bool = False


class Child:
    """A stream child process answering ``report`` lines (``--child ENGINE ROOT``)."""

    def __init__(self, engine: str, root: Path, spark: SparkSetup | None = None) -> None:
        self.engine = engine
        self.poll_records: list[dict[str, Any]] = []  # every report's, in order
        spark = spark or SparkSetup()
        env = {**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
               **(SPARK_ENV[spark.jvm] if engine == "spark" else {})}
        self.log = open(root / f"{engine}.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_soak", "--child", engine, str(root),
             "--spark-heap", spark.heap, "--spark-jvm", spark.jvm,
             f"--spark-java-options={spark.java_options}",
             *(["--spark-nmt"] if spark.nmt else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            cwd=ROOT.parent, env=env)

    def report(self, request: str = "report") -> dict[str, Any]:
        report = _ask(self.proc, request, f"the {self.engine} stream", self.log.name)
        self.poll_records.extend(report.pop("poll_records", []))
        return report

    def stop(self, timeout_s: float = 180) -> None:
        try:
            if self.proc.poll() is None:
                assert self.proc.stdin is not None
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            _close(self.proc, self.log)


# --------------------------------------------------------------------------- the writers


class JavaWriter:
    """``benchmarks/java/SoakWriter.java`` in its own JVM; answers status / pause / resume."""

    def __init__(self, root: Path, rate: float, history: int,
                 retain_s: float = RETAIN_S) -> None:
        from benchmarks.java_planning import classpath, compiled_class

        cp, why = classpath()
        if cp is None:
            raise RuntimeError(f"the Java writer needs the interop environment: {why}")
        if not Path(SQLITE_JDBC).exists():
            raise RuntimeError(f"the Java writer needs {SQLITE_JDBC} (see interop/setup.sh)")
        args = compiled_class(os.pathsep.join([cp, SQLITE_JDBC]), "SoakWriter")
        self.log = open(root / "writer.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["java", "-Xmx512m", *args, str(root / "catalog.db"), f"file://{root}/warehouse",
             NAME, "soak", "t", str(rate), str(ROWS), str(COMPACT_EVERY), str(EXPIRE_EVERY),
             str(retain_s), str(history)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)

    def command(self, what: str) -> dict[str, Any]:
        status = _ask(self.proc, what, "the Java writer", self.log.name)
        if status.get("error"):
            raise RuntimeError(f"the Java writer failed: {status['error']}")
        return status

    def stop(self) -> dict[str, Any]:
        try:
            return self.command("stop")
        finally:
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            _close(self.proc, self.log)


class PyIcebergWriter(threading.Thread):
    """The same protocol in this process: PyIceberg appends, replace and expiry."""

    def __init__(self, root: Path, rate: float, history: int,
                 retain_s: float = RETAIN_S) -> None:
        super().__init__(daemon=True)
        self.retain_s = retain_s
        from tests.helpers.tables import make_catalog, make_table

        self.catalog = make_catalog(root, NAME)
        self.table = make_table(self.catalog, TABLE)
        self.rate = rate
        self.commits = self.rows = self.replaces = self.expiries = 0
        self.commit_s = 0.0
        self.lock = threading.Lock()
        self.paused = True
        self.stopped = False
        self.error: BaseException | None = None
        for _ in range(history):  # no expiry: the Java writer's history is written well
            self._commit(expire=False)  # within RETAIN_S, this one not (150 s for 500)
        self.start()

    def _commit(self, expire: bool = True) -> None:
        """One append (and the compaction and, where ``expire``, the expiry due after it).
        The history is committed without expiring: its oldest appends, older than
        ``retain_s`` by the end of a slow PyIceberg history, would be gone before the
        streams start at ``startingVersion=earliest``, which then rightly starts after
        them, and the streams could never reach every row written."""
        from tests.helpers.tables import commit_replace, expire_snapshots, rows

        t0 = time.perf_counter()
        self.table.append(rows(ROWS, start=self.rows))
        self.commit_s += time.perf_counter() - t0
        self.rows += ROWS
        self.commits += 1
        if self.commits % COMPACT_EVERY == 0:
            commit_replace(self.table)
            self.table = self.table.refresh()
            self.replaces += 1
        if expire and self.commits % EXPIRE_EVERY == 0:
            cutoff = (time.time() - self.retain_s) * 1000
            heads = {ref.snapshot_id for ref in self.table.metadata.refs.values()}
            old = [s.snapshot_id for s in self.table.metadata.snapshots
                   if s.timestamp_ms < cutoff and s.snapshot_id not in heads]
            if old:
                expire_snapshots(self.table, old)
                self.table = self.table.refresh()
            self.expiries += 1

    def run(self) -> None:
        due = time.monotonic()
        while not self.stopped:
            if self.paused:
                time.sleep(0.005)
                due = time.monotonic()
                continue
            time.sleep(max(0.0, due - time.monotonic()))
            due = max(due + 1 / self.rate, time.monotonic() - 1)
            with self.lock:
                if self.paused or self.stopped:
                    continue
                try:
                    self._commit()
                except BaseException as exc:  # reported by command()
                    self.error = exc
                    return

    def command(self, what: str) -> dict[str, Any]:
        if what in ("pause", "stop"):
            self.paused = True
        elif what == "resume":
            self.paused = False
        with self.lock:
            if what == "stop":
                self.stopped = True
            if self.error is not None:
                raise RuntimeError(f"the PyIceberg writer failed: {self.error!r}")
            return {"commits": self.commits, "rows": self.rows, "replaces": self.replaces,
                    "expiries": self.expiries, "snapshots": len(self.table.metadata.snapshots),
                    "commit_ms": self.commit_s * 1000, "paused": self.paused, "error": None}

    def stop(self) -> dict[str, Any]:
        status = self.command("stop")
        self.join()
        return status


# --------------------------------------------------------------------------- the soak


def _wait_caught_up(children: dict[str, Child], rows: int, timeout_s: float
                    ) -> dict[str, tuple[float, dict[str, Any]]]:
    """Poll every child until it has ``rows`` distinct ids; the time and report of each."""
    start = time.monotonic()
    done: dict[str, tuple[float, dict[str, Any]]] = {}
    while len(done) < len(children):
        for engine, child in children.items():
            if engine in done:
                continue
            r = child.report()
            if r["distinct"] >= rows:
                done[engine] = (time.monotonic(), r)
        if len(done) < len(children):
            if time.monotonic() - start > timeout_s:
                missing = sorted(set(children) - set(done))
                raise RuntimeError(f"{missing} did not catch up with {rows} rows in "
                                   f"{timeout_s:.0f} s")
            time.sleep(0.2)
    return done


def soak(minutes: float, engines: Sequence[str] = ENGINES, writer: str = "java",
         rate: float = RATE, history: int = HISTORY, window_s: float = WINDOW_S,
         idle_s: float = IDLE_S, progress: Callable[[str], None] | None = None,
         retain_s: float = RETAIN_S, spark: SparkSetup | None = None) -> dict[str, Any]:
    """Run the soak; the per-window figures of every engine and the exactly-once checks.

    ``minutes`` counts the windows' writing time (windows of ``window_s`` seconds, at least
    one). ``retain_s``: the expiry's retention (a long one lets the history grow through
    the run). ``spark``: how the Spark child runs (:class:`SparkSetup`). Raises RuntimeError
    when the writer or a stream fails or a stream does not catch up within ``CATCH_UP_S``.
    """
    say = progress or (lambda s: None)
    root = Path(tempfile.mkdtemp(prefix="icefloe-soak-"))
    (root / "warehouse").mkdir()
    children: dict[str, Child] = {}
    w: Any = None
    try:
        t0 = time.monotonic()
        w = JavaWriter(root, rate, history, retain_s) if writer == "java" else \
            PyIcebergWriter(root, rate, history, retain_s)
        status = w.command("pause")  # answered once the history is committed
        say(f"history: {status['commits']} appends in {time.monotonic() - t0:.0f} s")
        spark = spark or SparkSetup()
        children = {e: Child(e, root, spark) for e in engines}
        _wait_caught_up(children, status["rows"], CATCH_UP_S)
        say("the streams caught up with the history")
        windows: list[dict[str, Any]] = []
        n_windows = max(1, round(minutes * 60 / window_s))
        start = time.monotonic()
        for i in range(n_windows):
            before = {e: c.report() for e, c in children.items()}
            w0 = time.monotonic()
            status0 = w.command("resume")
            samples: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
            while time.monotonic() - w0 < window_s:
                time.sleep(min(SAMPLE_S, max(0.0, window_s - (time.monotonic() - w0))))
                for e, c in children.items():
                    samples[e].append(c.report())
            status1 = w.command("pause")
            write_s = time.monotonic() - w0
            commits = status1["commits"] - status0["commits"]
            caught = _wait_caught_up(children, status1["rows"], CATCH_UP_S)
            idle0 = {e: c.report() for e, c in children.items()}
            i0 = time.monotonic()
            time.sleep(idle_s)
            idle1 = {e: c.report("report nmt") for e, c in children.items()}
            for r in idle1.values():  # after the idle phase's CPU readings
                if "jvm_pid" in r:
                    r["nmt_mb"] = nmt_summary(int(r.pop("jvm_pid")))
            i1 = time.monotonic()
            window: dict[str, Any] = {
                "t_min": (i1 - start) / 60, "commits": commits, "write_s": write_s,
                "rate": commits / write_s, "snapshots": status1["snapshots"],
                "load1": os.getloadavg()[0], "engines": {}}
            for e in engines:
                idle_cpu = idle1[e]["cpu"] - idle0[e]["cpu"]
                idle_rate = idle_cpu / (i1 - i0)
                polls = max(1, idle1[e]["polls"] - idle0[e]["polls"])
                t_caught, r_caught = caught[e]
                busy = r_caught["cpu"] - before[e]["cpu"] - idle_rate * (t_caught - w0)
                lag_s = [s["lag_seconds"] for s in samples[e]]
                lag_r = [s["lag_records"] for s in samples[e]]
                window["engines"][e] = {
                    "cpu_per_snapshot_ms": busy / max(1, commits) * 1000,
                    "cpu_per_idle_poll_ms": idle_cpu / polls * 1000,
                    "idle_cpu_per_s_ms": idle_rate * 1000,
                    "catch_up_s": t_caught - (w0 + write_s),
                    "rss_mb": idle1[e]["rss_mb"],
                    "lag_seconds_max": max(lag_s), "lag_seconds_median": statistics.median(lag_s),
                    "lag_records_max": max(lag_r),
                    "lag_records_median": statistics.median(lag_r),
                    "checkpoint_kb": idle1[e]["checkpoint_bytes"] / 1e3}
                # per process name: RSS at rest, CPU per new snapshot (idle rate not taken)
                window["engines"][e]["procs"] = {
                    name: {"rss_mb": usage[1], "cpu_per_snapshot_ms": (
                        usage[0] - before[e]["procs"].get(name, [0.0])[0])
                        / max(1, commits) * 1000}
                    for name, usage in idle1[e]["procs"].items()}
                for key in ("jvm_live_heap_mb", "roles", "nmt_mb"):  # Spark's: the driver
                    # JVM's live heap, RSS by process role, the JVM's native memory
                    if key in idle1[e]:
                        window["engines"][e][key] = idle1[e][key]
                if "cpu_total" in idle1[e]:  # Ray: the whole tree's idle CPU, daemons included
                    window["engines"][e]["tree_idle_cpu_per_s_ms"] = \
                        (idle1[e]["cpu_total"] - idle0[e]["cpu_total"]) / (i1 - i0) * 1000
            windows.append(window)
            say(f"window {i + 1}/{n_windows}: {json.dumps(window)}")
        final_status = w.stop()
        w = None
        written = final_status["rows"]
        final = {e: r for e, (_, r) in _wait_caught_up(children, written, CATCH_UP_S).items()}
        trim = children["spark"].report("report trim")["trim_mb"] if "spark" in children \
            else None
        polls_of = dict(children)
        for c in children.values():
            c.stop()
        children = {}
        from tests.helpers.tables import make_catalog

        head = make_catalog(root, NAME).load_table(TABLE)
        head_ids = head.scan().to_arrow().column("id").to_pylist()
        checks = {}
        for e in engines:
            f = final[e]
            ok = (f["distinct"] == written and f["rows"] == written and f["duplicates"] == 0
                  and f["min_id"] == 0 and f["max_id"] == written - 1)
            checks[e] = {**{k: f[k] for k in ("rows", "distinct", "duplicates")},
                         "lost": written - f["distinct"], "exactly_once": ok}
        if "spark" in engines:  # the sink's files, read back
            got = sink_ids(root)
            checks["spark"]["sink_rows"] = len(got)
            checks["spark"]["sink_same"] = sorted(got) == list(range(written))
            checks["spark"]["exactly_once"] &= checks["spark"]["sink_same"]
        return {"windows": windows, "written": written, "commits": final_status["commits"],
                "retain_s": retain_s, "spark_heap": spark.heap, "spark_jvm": spark.jvm,
                "spark_java_options": spark_java_options(spark.heap, spark.jvm,
                                                         spark.java_options, spark.nmt),
                "spark_env": SPARK_ENV[spark.jvm], "spark_trim_mb": trim,
                "poll_records": {e: c.poll_records for e, c in polls_of.items()},
                "replaces": final_status["replaces"], "expiries": final_status["expiries"],
                "history": history, "writer": writer, "window_s": window_s,
                "engines": list(engines),
                "write_minutes": sum(x["write_s"] for x in windows) / 60,
                "wall_minutes": (time.monotonic() - start) / 60,
                "checks": checks, "oracle_rows": len(head_ids),
                "oracle_same": sorted(head_ids) == list(range(written))}
    finally:
        for c in children.values():
            with contextlib.suppress(Exception):  # the first error is the one raised
                c.stop()
        if w is not None:
            with contextlib.suppress(Exception):  # the first error is the one raised
                w.stop()
        if os.environ.get("SOAK_KEEP") != "1":
            shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- report


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ``ys`` over ``xs`` (0 for fewer than two points)."""
    if len(xs) < 2:
        return 0.0
    return statistics.linear_regression(xs, ys).slope


def verdicts(result: dict[str, Any], engine: str) -> dict[str, Any]:
    """The targets of issue 26 for one engine: each a (passed, figures) pair."""
    w = [x["engines"][engine] for x in result["windows"]]
    t = [x["t_min"] for x in result["windows"]]
    first, last = w[0]["cpu_per_snapshot_ms"], w[-1]["cpu_per_snapshot_ms"]
    rss = w[-1]["rss_mb"] - w[0]["rss_mb"]
    late = w[-1]["rss_mb"] - w[len(w) // 2]["rss_mb"]  # after a warm-up, what still grows
    lag = [x["lag_seconds_max"] for x in w]
    lag_slope = slope(t, lag)  # seconds of lag per minute of soak
    # no upward trend: the fitted rise over the run is under one sampling interval (or 1 s)
    rise = lag_slope * (t[-1] - t[0]) if len(t) > 1 else 0.0
    check = result["checks"][engine]
    return {"cpu": (last <= 1.5 * first, f"{first:.1f} -> {last:.1f} ms"),
            "rss": (rss < 50, f"{rss:+.0f} MB; second half {late:+.0f} MB"),
            "lag": (rise < max(1.0, SAMPLE_S),
                    f"slope {lag_slope:+.3f} s/min (fitted rise {rise:+.1f} s over the run)"),
            "once": (check["exactly_once"] and result["oracle_same"],
                     f"{check['rows']} rows, {check['lost']} lost, {check['duplicates']} "
                     "duplicates")}


def summarize(result: dict[str, Any]) -> str:
    """The RESULTS.md section's body: the run's conditions, a table per engine, verdicts."""
    windows = result["windows"]
    loads = [x["load1"] for x in windows]
    rates = [x["rate"] for x in windows]
    lines = [
        f"Writer: {result['writer']}, {result['commits']} appends of {ROWS} rows "
        f"({result['written']} rows), {result['history']} of them before the first window, "
        f"{result['replaces']} `replace` compactions, {result['expiries']} expiries (snapshots "
        f"older than {result.get('retain_s', RETAIN_S):.0f} s). {len(windows)} windows of "
        f"{result['window_s']:.0f} s of commits "
        f"({result['write_minutes']:.1f} minutes of writing, {result['wall_minutes']:.1f} with "
        f"catch-up and idle phases): the writer reached {min(rates):.1f}-{max(rates):.1f} "
        f"appends/s while writing (median {statistics.median(rates):.1f}); "
        f"{min(x['snapshots'] for x in windows)}-{max(x['snapshots'] for x in windows)} "
        f"snapshots in the metadata. The machine was shared (2 cores): 1-minute load average "
        f"{min(loads):.1f}-{max(loads):.1f} over the windows (median "
        f"{statistics.median(loads):.1f}); the streams ran at once, behind one writer. "
        f"The Spark driver's heap: {result.get('spark_heap', 'grow')}; its JVM: "
        f"{result.get('spark_jvm', 'plain')} (options `{result.get('spark_java_options', '')}`"
        + "".join(f", `{k}={v}`" for k, v in result.get("spark_env", {}).items()) + ").",
    ]
    for e in result["engines"]:
        rows = []
        for x in windows:
            m = x["engines"][e]
            rows.append([f"{x['t_min']:.1f}", x["commits"], f"{x['snapshots']:,}",
                         f"{x['load1']:.1f}",
                         f"{m['cpu_per_snapshot_ms']:.1f}", f"{m['cpu_per_idle_poll_ms']:.1f}",
                         f"{m['rss_mb']:.0f}",
                         f"{m['lag_records_median']:.0f} / {m['lag_records_max']:.0f}",
                         f"{m['lag_seconds_median']:.1f} / {m['lag_seconds_max']:.1f}",
                         f"{m['catch_up_s']:.1f}", f"{m['checkpoint_kb']:.1f}"])
        v = verdicts(result, e)
        lines += [
            "", f"**{e}**", "",
            md_table(["minute", "appends", "snapshots", "load", "CPU per snapshot (ms)",
                      "CPU per idle poll (ms)", "RSS (MB)", "lag records (median / max)",
                      "lag s (median / max)", "catch-up (s)", "checkpoint (kB)"], rows),
            "",
            f"- CPU per new snapshot, last window within 1.5x of the first: "
            f"{verdict(v['cpu'][0])} ({v['cpu'][1]})",
            f"- RSS growth under 50 MB: {verdict(v['rss'][0])} ({v['rss'][1]})",
            f"- lag bounded (largest lag per window over time): {verdict(v['lag'][0])} "
            f"({v['lag'][1]})",
            f"- every row exactly once: {verdict(v['once'][0])} ({v['once'][1]}"
            + (f"; the sink's files: {result['checks'][e]['sink_rows']} rows, the writer's "
               f"ids: {result['checks'][e]['sink_same']}" if e == "spark" else "") + ")",
        ]
        first, last = windows[0]["engines"][e], windows[-1]["engines"][e]
        if "procs" in first and "procs" in last:  # RSS per process name, first -> last
            names = sorted(set(first["procs"]) & set(last["procs"]))
            lines.append("- RSS by process, first -> last window: " + "; ".join(
                f"`{n}` {first['procs'][n]['rss_mb']:.0f} -> {last['procs'][n]['rss_mb']:.0f} MB"
                for n in names if last["procs"][n]["rss_mb"] >= 1)
                + (f"; the driver JVM's live heap {first['jvm_live_heap_mb']:.0f} -> "
                   f"{last['jvm_live_heap_mb']:.0f} MB" if "jvm_live_heap_mb" in last else ""))
        lines += _memory_tables(windows, e)
        if e == "spark" and result.get("spark_trim_mb"):
            before, after = result["spark_trim_mb"]
            lines += ["", f"At the end, `jcmd <pid> System.trim_native_heap` (glibc's "
                      f"`malloc_trim`) took the driver JVM's RSS from {before:.0f} to "
                      f"{after:.0f} MB: {before - after:.0f} MB freed by the JVM and kept "
                      "by glibc."]
    lines += ["", f"Oracle: the writer reported ids 0-{result['written'] - 1}; PyIceberg's scan "
              f"of the head: {result['oracle_rows']} rows, the same ids: "
              f"{result['oracle_same']}."]
    return "\n".join(lines)


def _memory_tables(windows: Sequence[dict[str, Any]], engine: str) -> list[str]:
    """Spark's RSS by process role and its driver JVM's Native Memory Tracking categories
    (committed MB) at the first, middle and last windows, with the growth first -> last;
    no lines when the windows do not have them."""
    picks = [windows[0], windows[len(windows) // 2], windows[-1]]
    head = ["", *(f"minute {x['t_min']:.1f}" for x in picks), "growth"]
    out: list[str] = []
    for key, title, floor in (("roles", "RSS by process role (MB)", 1.0),
                              ("nmt_mb", "the driver JVM's native memory by Native Memory "
                               "Tracking's categories, committed (MB; `classes` and "
                               "`threads`: counts)", 0.5)):
        per = [x["engines"][engine].get(key) for x in picks]
        if not all(per):
            continue
        names = [n for n in per[-1] if n in per[0] and max(per[0][n], per[-1][n]) >= floor]
        rows = [[n, *(f"{m.get(n, 0):.1f}" for m in per), f"{per[-1][n] - per[0][n]:+.1f}"]
                for n in sorted(names, key=lambda n: -abs(per[-1][n] - per[0][n]))]
        out += ["", f"{title}:", "", md_table(head, rows)]
    return out


def ols(rows: Sequence[dict[str, float]], y: str, xs: Sequence[str]
        ) -> dict[str, tuple[float, float]]:
    """Least squares of ``y`` on an intercept and ``xs``: ``{term: (coefficient, standard
    error)}`` (``"1"`` the intercept); empty with fewer rows than terms + 2."""
    import numpy as np

    if len(rows) < len(xs) + 3:
        return {}
    x = np.array([[1.0, *(r[k] for k in xs)] for r in rows])
    v = np.array([r[y] for r in rows])
    coef, *_ = np.linalg.lstsq(x, v, rcond=None)
    resid = v - x @ coef
    sigma2 = float(resid @ resid) / (len(rows) - x.shape[1])
    cov = sigma2 * np.linalg.pinv(x.T @ x)
    return {k: (float(c), float(np.sqrt(max(0.0, cov[i, i]))))
            for i, (k, c) in enumerate(zip(["1", *xs], coef, strict=True))}


def poll_rows(records: Sequence[dict[str, Any]], bin_s: float = 10.0
              ) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """``(polls, bins)`` for the regressions: each poll's enumeration CPU (``cpu_ms``:
    refresh + enumerate) with its new snapshots (``units``) and history (``h``, thousands
    of snapshots); and ``bin_s`` bins of the enumerating process's whole CPU
    (``process_ms``, Ray's actor calls included) with their polls' new snapshots and
    history. The first record (the start, before any refresh) is left out."""
    polls = [{"t": r["t"], "cpu_ms": r["refresh_ms"] + r["enumerate_ms"],
              "units": float(r["units"]), "h": r["history"] / 1000, "load1": r["load1"],
              "process_cpu": r["process_cpu"]} for r in records[1:]]
    bins: list[dict[str, float]] = []
    if len(polls) < 2:
        return polls, bins
    start = polls[0]
    group: list[dict[str, float]] = []
    for r in polls[1:]:
        group.append(r)
        if r["t"] - start["t"] >= bin_s:
            units = sum(g["units"] for g in group)
            bins.append({"process_ms": (r["process_cpu"] - start["process_cpu"]) * 1000,
                         "seconds": r["t"] - start["t"], "units": units,
                         "polls": float(len(group)),
                         "h": statistics.fmean(g["h"] for g in group),
                         "load1": statistics.fmean(g["load1"] for g in group)})
            start, group = r, []
    return polls, bins


def poll_fits(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, tuple[float, float]]]:
    """The per-poll regressions of one engine (:func:`poll_rows`):

    - ``idle``: polls that found nothing: ``cpu_ms ~ 1 + h`` (``h``: ms per poll per 1,000
      snapshots of history: the idle cost's dependence on history);
    - ``new``: polls that found snapshots: ``cpu_ms ~ 1 + units + h + units_h`` (``units``: ms
      per new snapshot; ``units_h``: how that grows per 1,000 snapshots of history);
    - ``process``: the enumerating process's CPU per 10 s bin: ``process_ms ~ 1 + units +
      units_h + load1`` (its whole cost per new snapshot, Ray's actor calls included,
      against the history and the machine's load).
    """
    polls, bins = poll_rows(records)
    idle = [r for r in polls if r["units"] == 0]
    new = [{**r, "units_h": r["units"] * r["h"]} for r in polls if r["units"] > 0]
    for b in bins:
        b["units_h"] = b["units"] * b["h"]
    return {"idle": ols(idle, "cpu_ms", ["h"]),
            "new": ols(new, "cpu_ms", ["units", "h", "units_h"]),
            "process": ols(bins, "process_ms", ["units", "units_h", "load1"])}


def _pm(fit: dict[str, tuple[float, float]], term: str, digits: int = 3) -> str:
    if term not in fit:
        return "n/a"
    c, se = fit[term]
    return f"{c:+.{digits}f} ± {se:.{digits}f}"


def summarize_polls(result: dict[str, Any]) -> str:
    """The per-poll regressions of every engine with poll records, as a table."""
    rows = []
    for e, records in result.get("poll_records", {}).items():
        if len(records) < 10:
            continue
        polls, _ = poll_rows(records)
        f = poll_fits(records)
        hs = [r["h"] * 1000 for r in polls]
        idle = [r for r in polls if r["units"] == 0]
        new = [r for r in polls if r["units"] > 0]
        rows.append([
            e, f"{len(polls)} ({len(idle)} idle)", f"{min(hs):,.0f}-{max(hs):,.0f}",
            f"{statistics.median(r['cpu_ms'] for r in idle):.3f}" if idle else "n/a",
            _pm(f["idle"], "h", 4),
            f"{statistics.median(r['units'] for r in new):.0f}" if new else "n/a",
            _pm(f["new"], "units"), _pm(f["new"], "units_h"),
            _pm(f["process"], "units"), _pm(f["process"], "units_h"),
            _pm(f["process"], "load1", 1)])
    if not rows:
        return ""
    return md_table(
        ["engine", "polls", "history (snapshots)", "idle poll CPU, median (ms)",
         "idle poll: ms per 1,000 snapshots of history", "new snapshots per busy poll (median)",
         "poll: ms per new snapshot", "poll: ms per new snapshot per 1,000 snapshots",
         "process: ms per new snapshot", "process: ms per new snapshot per 1,000 snapshots",
         "process: ms per 10 s per unit of load"], rows)


def plot_polls(result: dict[str, Any], path: Path) -> None:
    """Per engine with poll records: idle polls' CPU, and busy polls' CPU per new
    snapshot, against the history; the enumerating process's CPU per new snapshot per
    10 s bin against the history (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = [e for e, r in result.get("poll_records", {}).items() if len(r) >= 10]
    if not engines:
        return
    fig, axes = plt.subplots(len(engines), 3, figsize=(15, 3.6 * len(engines)), squeeze=False)
    for row, e in zip(axes, engines, strict=True):
        polls, bins = poll_rows(result["poll_records"][e])
        idle = [r for r in polls if r["units"] == 0]
        new = [r for r in polls if r["units"] > 0]
        row[0].scatter([r["h"] * 1000 for r in idle], [r["cpu_ms"] for r in idle], s=3,
                       alpha=0.3)
        row[0].set_title(f"{e}: idle poll, enumeration thread CPU (ms)")
        sc = row[1].scatter([r["h"] * 1000 for r in new],
                            [r["cpu_ms"] / r["units"] for r in new], s=4, alpha=0.4,
                            c=[r["units"] for r in new], cmap="viridis")
        fig.colorbar(sc, ax=row[1], label="new snapshots in the poll")
        row[1].set_title(f"{e}: poll with new snapshots, CPU per new snapshot (ms)")
        busy = [b for b in bins if b["units"] > 0]
        sc2 = row[2].scatter([b["h"] * 1000 for b in busy],
                             [b["process_ms"] / b["units"] for b in busy], s=6, alpha=0.6,
                             c=[b["load1"] for b in busy], cmap="magma_r")
        fig.colorbar(sc2, ax=row[2], label="1-min load average")
        row[2].set_title(f"{e}: process CPU per new snapshot, 10 s bins (ms)")
        for ax in row:
            ax.set_xlabel("snapshots in the table metadata")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=80)
    tmp.replace(path)


def plot(result: dict[str, Any], path: Path) -> None:
    """Six panels over time (matplotlib), one line per engine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    windows = result["windows"]
    t = [x["t_min"] for x in windows]
    fig, axes = plt.subplots(2, 3, figsize=(14, 7), sharex=True)
    panels = (("cpu_per_snapshot_ms", "CPU per new snapshot (ms)"),
              ("cpu_per_idle_poll_ms", "CPU per idle poll (ms)"),
              ("rss_mb", "RSS of the process tree (MB)"),
              ("lag_seconds_max", "lag, largest sample (s)"),
              ("lag_records_max", "lag, largest sample (records)"),
              ("checkpoint_kb", "checkpoint size (kB)"))
    for ax, (key, label) in zip(axes.flat, panels, strict=True):
        for e in result["engines"]:
            ax.plot(t, [x["engines"][e][key] for x in windows], marker="o", markersize=3,
                    label=e)
        ax.set_title(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend()
    load = axes.flat[0].twinx()
    load.plot(t, [x["load1"] for x in windows], color="grey", linestyle=":", label="load")
    load.set_ylabel("1-min load average (dotted)")
    for ax in axes[1]:
        ax.set_xlabel("minutes")
    fig.suptitle(f"icefloe soak: {result['commits']} appends at "
                 f"{statistics.median(x['rate'] for x in windows):.1f}/s, compaction and expiry")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=80)
    tmp.replace(path)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_soak")
    ap.add_argument("--child", nargs=2, metavar=("ENGINE", "ROOT"))
    ap.add_argument("--minutes", type=float,
                    default=float(os.environ.get("SOAK_MINUTES", "30")))
    ap.add_argument("--engines", default=os.environ.get("SOAK_ENGINES", ",".join(ENGINES)))
    ap.add_argument("--writer", choices=("java", "pyiceberg"),
                    default=os.environ.get("SOAK_WRITER", "java"))
    ap.add_argument("--rate", type=float, default=RATE, help="appends a second while writing")
    ap.add_argument("--history", type=int, default=HISTORY)
    ap.add_argument("--window", type=float, default=WINDOW_S, help="seconds of writing")
    ap.add_argument("--retain", type=float, default=RETAIN_S,
                    help="the expiry's retention in seconds (long: the history grows)")
    ap.add_argument("--spark-heap", choices=("fixed", "grow"), default="fixed",
                    help="the Spark driver JVM's heap: fixed at its size and pre-touched, "
                    "or the JVM's default sizing")
    ap.add_argument("--spark-jvm", choices=tuple(SPARK_JVM_OPTIONS), default="recommended",
                    help="the Spark driver's native-memory settings: README.md's "
                    "recommendation for months-long streams, or none (the plain JVM)")
    ap.add_argument("--spark-java-options", default="",
                    help="more options for the Spark driver JVM (an experiment's)")
    ap.add_argument("--spark-nmt", action="store_true",
                    help="the Spark driver JVM under Native Memory Tracking: its categories "
                    "per window (jcmd)")
    ap.add_argument("--polls-plot",
                    default=str(Path(__file__).resolve().parent / "soak-polls.png"))
    ap.add_argument("--plot", default=str(Path(__file__).resolve().parent / "soak.png"))
    ap.add_argument("--json", help="also write the raw result here")
    ap.add_argument("--report", metavar="JSON",
                    help="only summarize and plot a result written by --json before")
    a = ap.parse_args()
    if a.child:
        engine, root = a.child
        if engine == "spark":
            child_spark(root, a.spark_heap, a.spark_jvm, a.spark_java_options, a.spark_nmt)
        else:
            child_icefloe_stream(engine, root)
        return
    engines = [e.strip() for e in a.engines.split(",") if e.strip()]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        ap.error(f"unknown engines {unknown}; choose from {','.join(ENGINES)}")
    if a.report:
        result = json.loads(Path(a.report).read_text())
    else:
        result = soak(a.minutes, engines, a.writer, a.rate, a.history, a.window,
                      progress=lambda s: print(s, file=sys.stderr, flush=True),
                      retain_s=a.retain,
                      spark=SparkSetup(a.spark_heap, a.spark_jvm, a.spark_java_options,
                                       a.spark_nmt))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    print(summarize(result))
    polls = summarize_polls(result)
    if polls:
        print("\nPer-poll regressions (each engine's enumerator; coefficient ± standard "
              "error):\n\n" + polls)
        try:
            plot_polls(result, Path(a.polls_plot))
            print(f"\n![per-poll costs]({Path(a.polls_plot).name})")
        except ImportError:
            pass
    try:
        plot(result, Path(a.plot))
        print(f"\n![soak]({Path(a.plot).name})")
    except ImportError:
        print("\n(no plot: matplotlib is not installed)", file=sys.stderr)


if __name__ == "__main__":
    main()
