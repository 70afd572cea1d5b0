"""Harness of the Spark kill tests: driver and writer processes, a standalone cluster,
SIGKILL of whole process groups, and the judge of a Spark file sink.

Process groups: every process the tests start (driver, writer, master, worker) is the
leader of its own session (``start_new_session=True``). The driver's JVM (started by
PySpark's ``launch_gateway``) and its streaming source runner inherit the group; PySpark's
Python worker daemons move to groups of their own (``os.setpgid(0, 0)`` in
``pyspark.daemon``). :func:`kill_group` SIGKILLs all these groups at once and checks
that no process of the driver's tree survives (no orphan JVM or Python worker).

The judge reads the sink as Spark's file sink reader does: only the files listed in
``<out>/_spark_metadata`` (the latest ``N.compact`` and the batches after it). Files of
a batch killed before its metadata commit are orphans and are ignored (and counted).
The oracle is PyIceberg's ``table.scan().to_arrow()``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from tests.reliability.harness import REPO, child_env

JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""Cheaper JVM start on a busy 2-core machine (C1 only, serial GC)."""


# --------------------------------------------------------------------------- processes


def process_env() -> dict[str, str]:
    """Environment of every process the tests start: the repo importable, bytecode cached
    (PYTHONDONTWRITEBYTECODE would make each Spark Python worker compile PyIceberg again),
    and this interpreter for PySpark's workers."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "ICEFLOE_CRASH_POINT")}
    env.update(child_env())
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1"})
    return env


def start_process(args: list[str], log: Path,
                  extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``args`` as the leader of a new process group, output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(args, cwd=REPO, env={**process_env(), **(extra_env or {})},
                                stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, pgrp, state) of ``pid``, None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[2]), fields[0]


def _pids() -> Iterator[int]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            yield int(entry.name)


def cpu_ticks(pid: int) -> int:
    """User + system CPU time of ``pid`` in clock ticks (0 if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = raw[raw.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def age(pid: int) -> float:
    """Seconds since ``pid`` started (-1.0 if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except OSError:
        return -1.0
    started = int(raw[raw.rindex(")") + 2:].split()[19])
    return uptime - started / os.sysconf("SC_CLK_TCK")


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``."""
    out = []
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None and stat[1] == pgid and stat[2] != "Z":
            out.append(pid)
    return out


def children(ppid: int, marker: str = "") -> list[int]:
    """Live children of ``ppid`` whose command line contains ``marker``."""
    out = []
    for pid in _pids():
        stat = _stat(pid)
        if stat is None or stat[0] != ppid or stat[2] == "Z":
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline:
            out.append(pid)
    return out


def kill_group(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """SIGKILL the driver process ``proc`` leads: its process group, and the groups of its
    descendants that left it (PySpark's worker daemons ``setpgid`` into groups of their
    own); then wait until none of them is left.

    Raises:
        AssertionError: a process of the driver (an orphan JVM or Python worker) outlived
            the kill.
    """
    tree = descendants(proc.pid)  # the JVM, its Python daemons and their workers
    groups = {proc.pid} | {g for g in (_group(p) for p in tree) if g is not None}
    for group in sorted(groups):
        with suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    proc.wait(timeout=timeout)

    def survivors() -> list[int]:
        return sorted({p for g in groups for p in group_members(g)}
                      | {p for p in tree if _alive(p)})

    assert wait_for(lambda: not survivors(), timeout), (
        f"processes of driver {proc.pid} survived SIGKILL of its groups: {survivors()}")


def _group(pid: int) -> int | None:
    stat = _stat(pid)
    return None if stat is None else stat[1]


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[2] != "Z"


def descendants(pid: int) -> list[int]:
    """Live descendants of ``pid`` (children, grandchildren, ...)."""
    by_parent: dict[int, list[int]] = {}
    for p in _pids():
        stat = _stat(p)
        if stat is not None and stat[2] != "Z":
            by_parent.setdefault(stat[0], []).append(p)
    out, todo = [], [pid]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def stop_group(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """SIGTERM the group led by ``proc``, SIGKILL whatever is left after ``timeout``."""
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    kill_group(proc, timeout)


def wait_for(condition: Callable[[], bool], timeout: float, every: float = 0.05) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(every)


def tail(log: Path, chars: int = 4000) -> str:
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- checkpoint


def log_ids(directory: Path) -> set[int]:
    """Batch ids of a Spark metadata log directory (``offsets``, ``commits``, sink log)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return set()
    return {int(n.split(".")[0]) for n in names if n.split(".")[0].isdigit()}


@dataclass(frozen=True)
class BatchState:
    """Where a streaming query is, read from its checkpoint and sink directories."""

    planned: int  # highest batch id in offsets/ (-1: none)
    committed: int  # highest batch id in commits/ (-1: none)
    sink_committed: int  # highest batch id in the sink's _spark_metadata (-1: none)

    @property
    def open(self) -> bool:
        """A micro-batch is planned (offsets written) and not yet committed."""
        return self.planned > self.committed

    @property
    def phase(self) -> str:
        if not self.open:
            return "between batches"
        if self.sink_committed >= self.planned:
            return "sink committed, commit log not written"
        return "batch planned, sink not committed"


def batch_state(checkpoint: Path, out: Path) -> BatchState:
    return BatchState(max(log_ids(checkpoint / "offsets"), default=-1),
                      max(log_ids(checkpoint / "commits"), default=-1),
                      max(log_ids(out / "_spark_metadata"), default=-1))


# --------------------------------------------------------------------------- the sink


def sink_files(out: Path) -> list[Path]:
    """Data files of a Spark file sink, as its reader lists them (``FileStreamSinkLog``):
    the entries of the newest ``N.compact`` file plus those of the batches after ``N``,
    minus ``delete`` actions. Each log file is ``v1`` then one JSON entry per line."""
    log = out / "_spark_metadata"
    names = [n for n in os.listdir(log) if n.split(".")[0].isdigit()] if log.exists() else []
    compacts = [int(n.split(".")[0]) for n in names if n.endswith(".compact")]
    first = max(compacts, default=-1)
    files: dict[str, bool] = {}
    for name in sorted(names, key=lambda n: int(n.split(".")[0])):
        batch = int(name.split(".")[0])
        if batch < first or (batch == first and not name.endswith(".compact")):
            continue
        lines = (log / name).read_text().splitlines()
        assert lines and lines[0] == "v1", f"unknown sink log version in {name}: {lines[:1]}"
        for line in lines[1:]:
            entry = json.loads(line)
            files[entry["path"]] = entry["action"] != "delete"
    return sorted(Path(unquote(urlparse(p).path)) for p, live in files.items() if live)


def read_sink(out: Path) -> tuple[pa.Table, int]:
    """The sink's rows (committed files only) and the number of orphan data files."""
    files = sink_files(out)
    listed = set(files)
    orphans = sum(1 for p in out.glob("*.parquet") if p not in listed)
    tables = [pq.read_table(p) for p in files]
    return (pa.concat_tables(tables) if tables else pa.table({"id": pa.array([], pa.int64())}),
            orphans)


@dataclass
class SparkVerdict:
    """A Spark file sink compared with the oracle (counts by row; ids are unique)."""

    expected: int = 0  # rows of the table (oracle)
    delivered: int = 0  # rows in the sink's committed files
    lost: int = 0  # oracle rows missing from the sink
    extra: int = 0  # sink rows whose id the oracle does not hold
    duplicates: int = 0  # sink rows beyond the first of their id
    mismatched: bool = False  # row multisets differ (values, not only ids)
    orphan_files: int = 0  # data files of batches killed before their sink commit
    starts: int = 0  # driver processes started (killed ones included)
    kills: int = 0
    mid_batch_kills: int = 0  # kills that landed while a micro-batch was open
    kill_phases: Counter[str] = field(default_factory=Counter)
    task_failures: int = 0  # failed Spark tasks (executor kills)
    executors: int = 0  # executors the cluster started (executor kills)
    seconds: float = 0.0
    kill_notes: list[str] = field(default_factory=list)  # one line per kill: what it hit

    @property
    def ok(self) -> bool:
        return not (self.lost or self.extra or self.duplicates or self.mismatched)


def _canonical(table: pa.Table, names: list[str]) -> pa.Table:
    columns = []
    for name in names:
        column = table.column(name)
        if pa.types.is_large_string(column.type):
            column = column.cast(pa.string())
        columns.append(column)
    result = pa.table(dict(zip(names, columns, strict=True)))
    return result.sort_by([(n, "ascending") for n in names])


def judge_sink(out: Path, oracle: pa.Table) -> SparkVerdict:
    """Compare the committed rows of the sink ``out`` with ``oracle`` (all columns)."""
    sink, orphans = read_sink(out)
    want = Counter(oracle.column("id").to_pylist())
    got = Counter(sink.column("id").to_pylist()) if sink.num_rows else Counter()
    verdict = SparkVerdict(
        expected=oracle.num_rows, delivered=sink.num_rows,
        lost=sum((want - got).values()), extra=sum(n for i, n in got.items() if i not in want),
        duplicates=sum(n - 1 for i, n in got.items() if i in want and n > 1),
        orphan_files=orphans)
    names = oracle.schema.names
    verdict.mismatched = (sink.schema.names != names or not _canonical(sink, names).equals(
        _canonical(oracle, names)))
    return verdict


# --------------------------------------------------------------------------- a query


@dataclass
class SparkQuery:
    """One streaming query (checkpoint + sink) over the table under ``root``, run by
    successive driver processes (:mod:`tests.reliability.spark_child`)."""

    root: Path
    max_files: int = 1
    master: str = "local[2]"
    starts: int = 0

    @property
    def out(self) -> Path:
        return self.root / "sink"

    @property
    def checkpoint(self) -> Path:
        return self.root / "ckpt"

    @property
    def stop_file(self) -> Path:
        return self.root / "stop-query"

    def log(self, run: int) -> Path:
        return self.root / "logs" / f"driver-{run}.log"

    def start(self, trigger: str = "continuous", ui_port: int | None = None,
              max_files: int | None = None) -> subprocess.Popen[bytes]:
        """Start a driver process (its own process group) on the same checkpoint."""
        self.stop_file.unlink(missing_ok=True)
        local_dir = self.root / "spark-local"
        local_dir.mkdir(exist_ok=True)
        cmd = [sys.executable, "-m", "tests.reliability.spark_child", "--root", str(self.root),
               "--out", str(self.out), "--checkpoint", str(self.checkpoint),
               "--master", self.master, "--trigger", trigger, "--stop-file",
               str(self.stop_file), "--max-files", str(max_files or self.max_files),
               "--local-dir", str(local_dir), "--java-options", JAVA_OPTS,
               "--log-level", "WARN"]
        if ui_port:
            cmd += ["--ui-port", str(ui_port)]
        self.starts += 1
        return start_process(cmd, self.log(self.starts))

    def state(self) -> BatchState:
        return batch_state(self.checkpoint, self.out)

    def finish(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        """Ask the driver to catch up and stop (stop file), and wait for a clean exit.

        Raises:
            AssertionError: the driver failed or did not stop within ``timeout``.
        """
        self.stop_file.touch()
        self.wait(proc, timeout)

    def wait(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise AssertionError(f"driver did not finish in {timeout}s:\n"
                                 f"{tail(self.log(self.starts))}") from None
        kill_group(proc)  # nothing of a finished driver may linger either
        assert code == 0, f"driver failed ({code}):\n{tail(self.log(self.starts))}"


# --------------------------------------------------------------------------- the cluster


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Cluster:
    """A Spark standalone master and one 1-core worker on 127.0.0.1 (own process groups)."""

    url: str
    ui_port: int
    master: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    work_dir: Path

    def executors(self) -> list[int]:
        """PIDs of the executor JVMs the worker runs now."""
        return children(self.worker.pid, "CoarseGrainedExecutorBackend")

    def python_workers(self) -> list[int]:
        """PIDs of the executors' forked Python workers (children of the worker daemon)."""
        return [w for e in self.executors() for d in children(e, "daemon")
                for w in children(d)]

    def busy_python_workers(self, window: float = 0.05) -> list[int]:
        """Python workers that used CPU during ``window`` seconds (running a task)."""
        before = {pid: cpu_ticks(pid) for pid in self.python_workers()}
        time.sleep(window)
        return [pid for pid, ticks in before.items() if cpu_ticks(pid) > ticks]

    def executors_started(self) -> int:
        """Executors the worker launched so far (one work directory each)."""
        return sum(1 for app in self.work_dir.glob("app-*") for d in app.iterdir()
                   if d.name.isdigit())


@contextmanager
def standalone_cluster(root: Path, timeout: float = 180.0) -> Iterator[Cluster]:
    """Start a master and one worker (1 core, 1 GiB) with Spark's ``spark-class``."""
    home = spark_home()
    work_dir = root / "worker"
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    daemon_env = {"SPARK_HOME": str(home), "SPARK_WORKER_DIR": str(work_dir),
                  "SPARK_LOG_DIR": str(root / "logs"), "SPARK_DAEMON_MEMORY": "256m",
                  "SPARK_DAEMON_JAVA_OPTS": JAVA_OPTS}
    processes: list[subprocess.Popen[bytes]] = []
    try:
        master = start_process([spark_class, "org.apache.spark.deploy.master.Master",
                                "--host", "127.0.0.1", "--port", str(port),
                                "--webui-port", str(ui_port)], root / "logs" / "master.log",
                               daemon_env)
        processes.append(master)
        if not wait_for(lambda: _master_state(ui_port) is not None, timeout, 0.5):
            raise RuntimeError(f"master not up: {tail(root / 'logs' / 'master.log')}")
        worker = start_process([spark_class, "org.apache.spark.deploy.worker.Worker", url,
                                "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                "--webui-port", str(worker_ui)], root / "logs" / "worker.log",
                               daemon_env)
        processes.append(worker)
        if not wait_for(lambda: _alive_workers(ui_port) == 1, timeout, 0.5):
            raise RuntimeError(f"worker not up: {tail(root / 'logs' / 'worker.log')}")
        yield Cluster(url, ui_port, master, worker, work_dir)
    finally:
        for process in reversed(processes):
            stop_group(process)


def _master_state(ui_port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as answer:
            return dict(json.load(answer))
    except (OSError, ValueError):
        return None


def _alive_workers(ui_port: int) -> int:
    state = _master_state(ui_port) or {}
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


def _driver_api(ui_port: int, resource: str, timeout: float = 2.0) -> list[dict[str, Any]]:
    """``resource`` (``allexecutors``, ``stages``) of the driver's application from its
    REST API; empty while the driver has no application or does not answer."""
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    try:
        with urllib.request.urlopen(base, timeout=2) as answer:
            apps = json.load(answer)
        if not apps:
            return []
        with urllib.request.urlopen(f"{base}/{apps[0]['id']}/{resource}",
                                    timeout=timeout) as answer:
            return list(json.load(answer))
    except (OSError, ValueError):
        return []


def failed_tasks(ui_port: int) -> int:
    """Task attempts that failed in any stage, from the driver's REST API (``stages``).

    Not the driver log: a task lost with its executor is logged as a WARN ("Lost task")
    only when Spark blames the task for the exit, at INFO otherwise. Not the executors'
    ``failedTasks`` either: an executor removed before its task's end event keeps 0."""
    return sum(int(stage.get("numFailedTasks", 0))
               for stage in _driver_api(ui_port, "stages", timeout=5.0))


def driver_executors(ui_port: int) -> list[dict[str, Any]]:
    """Every executor of the driver's application (dead ones too), from its REST API."""
    return [e for e in _driver_api(ui_port, "allexecutors") if e.get("id") != "driver"]
