"""The Spark kill scenarios and their campaign (the "Spark" table of RELIABILITY.md).

Scenarios (each on a fresh table under its own directory, a writer process appending
while the query reads; the verdict compares the Parquet sink with PyIceberg's scan):

- :func:`driver_kills`: ``spark.readStream.format("icefloe")`` -> Parquet file sink in
  a driver process on ``local[2]``; SIGKILL of the driver's whole process group (Python,
  JVM, Python workers) while a micro-batch is open, restart on the same checkpoint,
  ``kills`` times; the writer stops; a last ``Trigger.AvailableNow`` run.
- :func:`executor_kills`: the same query on a standalone cluster (master + one 1-core
  worker on 127.0.0.1); while a task runs, SIGKILL the executor JVM (the worker starts a
  new one) or the executor's Python workers, alternately; Spark retries the tasks; the
  writer stops; the same driver catches up (``processAllAvailable``) and stops.

Usage::

    uv run python -m tests.reliability.spark_campaign --runs 2 --kills 4 --rows 100000 --seed 9
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.tables import make_catalog
from tests.reliability.harness import build_table
from tests.reliability.spark_harness import (
    Cluster,
    SparkQuery,
    SparkVerdict,
    age,
    driver_executors,
    failed_tasks,
    free_port,
    judge_sink,
    kill_group,
    standalone_cluster,
    start_process,
    stop_group,
    tail,
    wait_for,
)

DRIVER = "SIGKILL driver process group (Python + JVM) mid-batch, writer appending, restart"
EXECUTOR = "SIGKILL executor JVM / Python worker mid-task (standalone cluster), writer appending"


@dataclass(frozen=True)
class SparkSize:
    """A scenario's size: the initial table, the writer's pace, the rate limit, the kills."""

    rows: int = 10_000  # initial table: ``rows`` rows in ``files`` appends
    files: int = 5
    append_rows: int = 500  # each writer append: one file of this many rows
    append_interval: float = 1.0  # seconds between writer appends
    max_files: int = 2  # maxFilesPerTrigger
    kills: int = 1
    timeout: float = 300.0  # for each wait (a driver start takes a minute on a busy box)


@dataclass
class Writer:
    """A :mod:`tests.reliability.spark_writer` process appending until stopped."""

    root: Path
    process: subprocess.Popen[bytes] = field(init=False)

    @property
    def stop_file(self) -> Path:
        return self.root / "stop-writer"

    def start(self, first_id: int, size: SparkSize) -> Writer:
        self.process = start_process(
            [sys.executable, "-m", "tests.reliability.spark_writer", "--root", str(self.root),
             "--start", str(first_id), "--rows", str(size.append_rows),
             "--interval", str(size.append_interval), "--stop-file", str(self.stop_file)],
            self.root / "logs" / "writer.log")
        return self

    def stop(self, timeout: float) -> None:
        self.stop_file.touch()
        code = self.process.wait(timeout=timeout)
        assert code == 0, f"writer failed ({code}): {tail(self.root / 'logs' / 'writer.log')}"


def _setup(root: Path, size: SparkSize) -> Writer:
    catalog = make_catalog(root)
    build_table(catalog, size.rows, size.files)
    catalog.engine.dispose()
    return Writer(root).start(size.rows, size)


def _judge(root: Path, query: SparkQuery, verdict: SparkVerdict, started: float) -> SparkVerdict:
    catalog = make_catalog(root)
    try:
        oracle = catalog.load_table("db.events").scan().to_arrow()
    finally:
        catalog.engine.dispose()
    judged = judge_sink(query.out, oracle)
    for name in ("expected", "delivered", "lost", "extra", "duplicates", "mismatched",
                 "orphan_files"):
        setattr(verdict, name, getattr(judged, name))
    verdict.starts = query.starts
    verdict.seconds = time.monotonic() - started
    return verdict


def _progress(query: SparkQuery, proc: subprocess.Popen[bytes], ready: Callable[[], bool],
              timeout: float, what: str) -> None:
    """Wait until ``ready()`` holds while the driver runs; fail with its log otherwise."""
    ok = wait_for(lambda: proc.poll() is not None or ready(), timeout)
    if proc.poll() is not None or not ok:
        code = proc.poll()
        kill_group(proc)
        how = "made no progress" if code is None else f"exited {code}"
        raise AssertionError(f"{what}: driver {how} ({query.state()}):\n"
                             f"{tail(query.log(query.starts))}")


def driver_kills(root: Path, size: SparkSize, rng: random.Random) -> SparkVerdict:
    """Kill the driver ``size.kills`` times mid-batch; restart; finish with AvailableNow."""
    started = time.monotonic()
    writer = _setup(root, size)
    query = SparkQuery(root, max_files=size.max_files)
    verdict = SparkVerdict()
    proc: subprocess.Popen[bytes] | None = None
    try:
        for _ in range(size.kills):
            proc = query.start()
            target = query.state().committed + rng.randint(1, 3)
            _progress(query, proc, lambda t=target: (s := query.state()).committed >= t
                      and s.open, size.timeout, "before a kill")
            time.sleep(rng.uniform(0.0, 1.5))  # anywhere in the batch (or the next one)
            kill_group(proc)  # the whole group: Python, JVM, Python workers
            state = query.state()  # frozen now: where the kill landed
            verdict.kills += 1
            verdict.mid_batch_kills += state.open
            verdict.kill_phases[state.phase] += 1
        writer.stop(size.timeout)
        proc = query.start("available-now")
        query.wait(proc, size.timeout * 3)
    finally:
        stop_group(writer.process)
        if proc is not None:
            kill_group(proc)
    return _judge(root, query, verdict, started)


def _active_tasks(ui_port: int) -> int:
    return sum(int(e.get("activeTasks", 0)) for e in driver_executors(ui_port)
               if e.get("isActive"))


def executor_kills(root: Path, size: SparkSize, rng: random.Random) -> SparkVerdict:
    """Kill the executor JVM or its Python workers while a task runs, alternately, until
    ``size.kills`` kills have failed a running task (at most ``5 * size.kills`` kills).

    A kill waits for a running task (the driver's REST API has one and a Python worker
    of the executor is using CPU), freezes the victim and kills it once the driver has
    shown a running task for :data:`HOLD` seconds; it counts as a hit when the driver
    counts a failed task attempt before the open batch commits (after its retry).
    """
    started = time.monotonic()
    writer = _setup(root, size)
    verdict = SparkVerdict()
    try:
        with standalone_cluster(root / "cluster", size.timeout) as cluster:
            query = SparkQuery(root, max_files=size.max_files, master=cluster.url)
            ui_port = free_port()
            proc = query.start(ui_port=ui_port)
            try:
                _kill_executors(query, proc, cluster, ui_port, size, rng, verdict)
                verdict.task_failures = failed_tasks(ui_port)
                writer.stop(size.timeout)
                query.finish(proc, size.timeout * 3)
                verdict.executors = cluster.executors_started()
            finally:
                kill_group(proc)
    finally:
        stop_group(writer.process)
    return _judge(root, query, verdict, started)


HOLD = 2.0
"""Seconds the driver must show a running task while the victim is frozen (SIGSTOP) before
the SIGKILL: longer than its listener's lag, so the task is one the frozen process holds."""


def _task_held(ui_port: int, timeout: float) -> float:
    """With the victim frozen, wait until the driver has shown a running task for
    :data:`HOLD` seconds on end; the seconds waited (``timeout`` if it never did).

    A frozen process cannot finish its task; a frozen idle Python worker stays in the
    executor's idle queue and is handed the next task, which then waits on it too."""
    started = time.monotonic()
    since: float | None = None
    while (now := time.monotonic()) - started < timeout:
        if _active_tasks(ui_port) == 0:
            since = None
        elif since is None:
            since = now
        elif now - since >= HOLD:
            return now - started
        time.sleep(0.05)
    return timeout


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _kill_executors(query: SparkQuery, proc: subprocess.Popen[bytes], cluster: Cluster,
                    ui_port: int, size: SparkSize, rng: random.Random,
                    verdict: SparkVerdict) -> None:
    """Kill the executor JVM or all its Python workers, alternately, mid-task.

    A task's Python work is short (~0.15 s on 2 x 5,000 rows) and the driver's REST API
    reports tasks late, so a kill timed on "a task runs and a worker uses CPU" mostly hit
    a worker already back in the idle queue (CI: 9 of 9 missed). So the victim is frozen
    first and killed only once the driver shows a task that cannot finish without it."""
    hits = 0
    while hits < size.kills and verdict.kills < 5 * size.kills:
        victim = "executor JVM" if hits % 2 == 0 else "Python worker"

        def running() -> bool:
            return _active_tasks(ui_port) > 0 and bool(cluster.busy_python_workers())

        _progress(query, proc, running, size.timeout, "waiting for a running task")
        time.sleep(rng.uniform(0.0, 0.05))
        pids = cluster.executors() if victim == "executor JVM" else cluster.python_workers()
        ages = ", ".join(f"{pid} aged {age(pid):.1f} s" for pid in pids)
        _signal(pids, signal.SIGSTOP)
        held = _task_held(ui_port, size.timeout)
        failed_before, state = failed_tasks(ui_port), query.state()
        _signal(pids, signal.SIGKILL)
        verdict.kills += 1
        verdict.mid_batch_kills += state.open
        # Spark retries the lost task (on a new executor): the batch commits
        _progress(query, proc, lambda p=state.planned: query.state().committed >= p,
                  size.timeout, f"batch {state.planned} after killing the {victim}")
        hit = failed_tasks(ui_port) > failed_before
        hits += hit
        verdict.kill_phases[f"{victim}, {'task failed' if hit else 'no task hit'}"] += 1
        verdict.kill_notes.append(f"{victim} ({ages}) frozen {held:.1f} s, in batch "
                                  f"{state.planned} (open: {state.open}): "
                                  f"{'hit' if hit else 'no task hit'}")


SCENARIOS = {DRIVER: driver_kills, EXECUTOR: executor_kills}


@dataclass
class Row:
    """One line of the table: totals over ``runs`` repetitions of ``scenario``."""

    scenario: str
    runs: int = 0
    starts: int = 0
    kills: int = 0
    mid_batch_kills: int = 0
    rows: int = 0
    lost: int = 0
    duplicates: int = 0
    extra: int = 0
    mismatched: int = 0
    orphan_files: int = 0
    task_failures: int = 0
    executors: int = 0
    seconds: float = 0.0
    phases: dict[str, int] = field(default_factory=dict)

    def add(self, v: SparkVerdict) -> None:
        self.runs += 1
        self.starts += v.starts
        self.kills += v.kills
        self.mid_batch_kills += v.mid_batch_kills
        self.rows += v.expected
        self.lost += v.lost
        self.duplicates += v.duplicates
        self.extra += v.extra
        self.mismatched += v.mismatched
        self.orphan_files += v.orphan_files
        self.task_failures += v.task_failures
        self.executors += v.executors
        self.seconds += v.seconds
        for phase, n in v.kill_phases.items():
            self.phases[phase] = self.phases.get(phase, 0) + n


def run_campaign(root: Path, sizes: dict[str, SparkSize], runs: int, seed: int = 0,
                 log: bool = False) -> list[Row]:
    """Run each scenario ``runs`` times; the totals per scenario."""
    rng = random.Random(seed)
    out = []
    for name, scenario in SCENARIOS.items():
        row = Row(name)
        for i in range(runs):
            work = root / f"{len(out)}-{i}"
            work.mkdir(parents=True)
            verdict = scenario(work, sizes[name], rng)
            row.add(verdict)
            if log:
                print(f"  {name} #{i + 1}: {verdict}", flush=True)
            if verdict.ok:
                shutil.rmtree(work, ignore_errors=True)
            elif log:
                print(f"  kept {work} for inspection", flush=True)
        out.append(row)
    return out


def table(rows: list[Row]) -> str:
    """The markdown table of RELIABILITY.md's Spark section."""
    lines = ["| scenario | runs | driver starts | kills (mid-batch) | tasks failed and retried "
             "| rows checked | rows lost | duplicates | orphan files ignored | seconds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.scenario} | {r.runs} | {r.starts} | {r.kills} "
                     f"({r.mid_batch_kills}) | {r.task_failures} | {r.rows:,} | {r.lost} | "
                     f"{r.duplicates} | {r.orphan_files} | {r.seconds:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args()
    sizes = campaign_sizes(args.rows, args.files, args.kills)
    with tempfile.TemporaryDirectory(prefix="icefloe-spark-campaign-") as tmp:
        started = time.monotonic()
        rows = run_campaign(Path(tmp), sizes, args.runs, args.seed, log=True)
    print(table(rows))
    for r in rows:
        print(f"{r.scenario}: kill phases {r.phases}; extra {r.extra}; mismatched runs "
              f"{r.mismatched}; task failures {r.task_failures}; executors {r.executors}")
    print(f"\n{args.rows:,} initial rows per table in {args.files} files; "
          f"{time.monotonic() - started:.0f} s")


def campaign_sizes(rows: int, files: int, kills: int) -> dict[str, SparkSize]:
    """The campaign's sizes: a bigger table and more kills than the quick tests; the
    executor scenario appends bigger files (longer tasks to kill) less often."""
    driver = SparkSize(rows=rows, files=files, append_rows=2_000, append_interval=1.0,
                       max_files=2, kills=kills, timeout=600.0)
    executor = SparkSize(rows=rows, files=files, append_rows=5_000, append_interval=2.0,
                         max_files=2, kills=kills, timeout=600.0)
    return {DRIVER: driver, EXECUTOR: executor}


if __name__ == "__main__":
    main()
