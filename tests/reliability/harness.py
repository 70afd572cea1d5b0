"""Kill-test harness: build a table, run stream processes, kill them, judge the sink.

The judge compares the union of everything the child processes delivered (their
line sinks) with an oracle icefloe did not write: PyIceberg's scan of the table
(``table.scan().to_arrow()``) or the ids the writer processes reported appending.

Pass criteria (``Verdict.ok``):

- ``lost == 0``: every oracle row was delivered at least once;
- ``extra == 0``: nothing was delivered that the oracle does not hold;
- ``bad_duplicates == 0``: a row delivered in a batch whose ack line was written (so
  its checkpoint was durable) is never delivered again by a later run; the only
  duplicates are rows of batches that were not acknowledged before the kill.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from tests.helpers.tables import make_table, rows

REPO = Path(__file__).resolve().parents[2]
CRASH_POINTS = ("after_emit", "after_ack", "during_checkpoint_write", "during_restore")


def build_table(catalog: SqlCatalog, total_rows: int, files: int,
                identifier: str = "db.events") -> Table:
    """A table of ``total_rows`` rows (ids 0..total_rows-1) in ``files`` appends."""
    table = make_table(catalog, identifier)
    per = total_rows // files
    for i in range(files):
        n = per if i < files - 1 else total_rows - per * (files - 1)
        table.append(rows(n, start=i * per))
    return table


def oracle_ids(catalog: SqlCatalog, identifier: str = "db.events") -> list[int]:
    """Row ids of the table's current snapshot, read by PyIceberg (not icefloe)."""
    table = catalog.load_table(identifier)
    return table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist()


def child_env() -> dict[str, str]:
    """Environment for child processes: the repo importable, and bytecode cached outside
    the repo (compiling PyIceberg + PyArrow on every start would dominate a kill test)."""
    env = {"PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PYTHONPYCACHEPREFIX": os.path.join(tempfile.gettempdir(), "icefloe-test-pycache")}
    return env


@dataclass
class Runner:
    """Starts child stream processes over one table, checkpoint and sink file."""

    root: Path
    checkpoint: Path = field(init=False)
    out: Path = field(init=False)
    runs: int = 0
    catalog_uri: str | None = None
    batch_size: int = 500

    def __post_init__(self) -> None:
        self.checkpoint = self.root / "ckpt"
        self.out = self.root / "sink.jsonl"

    def command(self, parallelism: int, available_now: bool,
                options: tuple[str, ...] = ()) -> list[str]:
        cmd = [sys.executable, "-m", "tests.reliability.child", "--root", str(self.root),
               "--checkpoint", str(self.checkpoint), "--out", str(self.out),
               "--run", str(self.runs), "--parallelism", str(parallelism),
               "--batch-size", str(self.batch_size)]
        if self.catalog_uri:
            cmd += ["--catalog-uri", self.catalog_uri]
        if available_now:
            cmd.append("--available-now")
        for option in options:
            cmd += ["--option", option]
        return cmd

    def start(self, parallelism: int = 2, available_now: bool = True,
              crash: str | None = None, options: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
        """Start one child run (``crash``: ``ICEFLOE_CRASH_POINT`` value, e.g. ``after_ack:7``)."""
        env = dict(os.environ)
        env.pop("ICEFLOE_CRASH_POINT", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if crash:
            env["ICEFLOE_CRASH_POINT"] = crash
        env.update(child_env())
        self.runs += 1
        return subprocess.Popen(self.command(parallelism, available_now, options), cwd=REPO,
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def run(self, parallelism: int = 2, crash: str | None = None, timeout: float = 180,
            options: tuple[str, ...] = ()) -> int:
        """Run an available-now child to its end (or its armed crash); returns the exit code."""
        proc = self.start(parallelism, True, crash, options)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        if proc.returncode not in (0, -signal.SIGKILL):
            raise AssertionError(f"child failed ({proc.returncode}):\n{err.decode()[-3000:]}")
        return proc.returncode

    def delivered_lines(self) -> int:
        """Batch lines in the sink so far (cheap poll for kill timing)."""
        try:
            with open(self.out, "rb") as fh:
                return sum(1 for line in fh if line.startswith(b'{"run"') and b'"split"' in line)
        except FileNotFoundError:
            return 0

    def kill_after(self, proc: subprocess.Popen[bytes], batches: int,
                   timeout: float = 120) -> bool:
        """SIGKILL ``proc`` once the sink holds ``batches`` more batch lines (random
        extra delay of up to 20 ms, so the kill lands anywhere); False if it ended first."""
        base = self.delivered_lines()
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if self.delivered_lines() - base >= batches:
                time.sleep(random.uniform(0, 0.02))
                break
            time.sleep(0.005)
        if proc.poll() is not None:
            proc.communicate()  # drain and close the pipe
            return False
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        return True


@dataclass
class Verdict:
    """What the sink holds compared with the oracle."""

    expected: int
    delivered: int
    lost: int
    extra: int
    duplicates: int
    bad_duplicates: int
    runs: int

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.extra == 0 and self.bad_duplicates == 0


def judge(out: Path, expected: list[int], runs: int) -> Verdict:
    """Judge the sink file ``out`` against the oracle ids (see the module docstring)."""
    batches: list[tuple[int, str, int, list[int]]] = []
    acked: set[tuple[int, str, int]] = set()
    with open(out) as fh:
        for raw in fh:
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a line torn by SIGKILL: its batch was not acked
            if "ack" in line:
                acked.add((line["run"], line["ack"], line["consumed"]))
            else:
                batches.append((line["run"], line["split"], line["consumed"], line["ids"]))
    counts: Counter[int] = Counter()
    durable_in_run: dict[int, int] = {}  # id -> run whose acked batch delivered it
    bad = 0
    for run, split, consumed, ids in batches:
        is_acked = (run, split, consumed) in acked
        for i in ids:
            counts[i] += 1
            earlier = durable_in_run.get(i)
            if earlier is not None and earlier <= run:
                bad += 1  # re-delivered although acknowledged (and checkpointed) before
            if is_acked:
                durable_in_run[i] = run
    want = Counter(expected)
    lost = len(set(want) - set(counts))
    extra = len(set(counts) - set(want))
    delivered = sum(counts.values())
    return Verdict(expected=len(want), delivered=delivered, lost=lost, extra=extra,
                   duplicates=delivered - len(counts), bad_duplicates=bad, runs=runs)
