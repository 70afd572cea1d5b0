"""The kill scenarios, shared by the tests and the campaign (``python -m
tests.reliability.campaign``). Each builds its own table under a fresh directory,
kills stream processes as described, finishes with an available-now run and returns
the :class:`~tests.reliability.harness.Verdict` against PyIceberg's scan.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.tables import make_catalog
from tests.reliability.harness import (
    REPO,
    Runner,
    Verdict,
    build_table,
    child_env,
    judge,
    oracle_ids,
)

KILLED = -signal.SIGKILL


@dataclass(frozen=True)
class Size:
    """Table size of a scenario: ``rows`` rows in ``files`` files, read ``batch`` at a time."""

    rows: int = 50_000
    files: int = 20
    batch: int = 500

    @property
    def batches(self) -> int:
        return self.rows // self.batch


def _setup(root: Path, size: Size) -> Runner:
    catalog = make_catalog(root)
    build_table(catalog, size.rows, size.files)
    catalog.engine.dispose()  # an idle pooled SQLite connection slows the children's locks
    return Runner(root, batch_size=size.batch)


def _finish(runner: Runner, parallelism: int = 2) -> Verdict:
    assert runner.run(parallelism) == 0
    catalog = make_catalog(runner.root)
    try:
        return judge(runner.out, oracle_ids(catalog), runner.runs)
    finally:
        catalog.engine.dispose()


def crash_point(root: Path, size: Size, point: str, rng: random.Random) -> Verdict:
    """Arm ``point`` at a random pass, let it SIGKILL the reader, restart to the end.

    ``during_restore`` needs a checkpoint to restore: a first run is killed after some
    acks, then the restart is killed while restoring, then a third run finishes.
    """
    runner = _setup(root, size)
    n = rng.randint(1, max(1, size.batches - 1))
    if point == "during_restore":
        assert runner.run(crash=f"after_ack:{n}") == KILLED
        assert runner.run(crash="during_restore:1") == KILLED
    else:
        assert runner.run(crash=f"{point}:{n}") == KILLED
    return _finish(runner)


def random_kill(root: Path, size: Size, rng: random.Random, parallelism: int = 2,
                restart_parallelism: int | None = None) -> Verdict:
    """SIGKILL the reader after a random number of delivered batches; restart (possibly
    with another number of readers) and finish."""
    runner = _setup(root, size)
    proc = runner.start(parallelism, available_now=True)
    runner.kill_after(proc, rng.randint(1, max(1, size.batches - 1)))
    return _finish(runner, restart_parallelism or parallelism)


def double_failure(root: Path, size: Size, rng: random.Random) -> Verdict:
    """Kill at random, crash again while restoring, crash once more after a few emits,
    then finish."""
    runner = _setup(root, size)
    proc = runner.start(2, available_now=True)
    runner.kill_after(proc, rng.randint(1, size.batches // 2))
    assert runner.run(crash="during_restore:1") == KILLED
    runner.run(crash=f"after_emit:{rng.randint(1, max(1, size.batches // 4))}")
    return _finish(runner)


def continuous_with_writer(root: Path, size: Size, rng: random.Random,
                           kills: int = 2, writer_batches: int = 20) -> Verdict:
    """A writer process keeps appending while the continuous reader (driver and
    enumerator: one process) is SIGKILLed ``kills`` times and restarted; the last run
    (available-now) starts after the writer is done."""
    runner = _setup(root, Size(size.rows // 5, max(1, size.files // 5), size.batch))
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.writer", "--root", str(root),
         "--start", str(10**9), "--batches", str(writer_batches), "--rows", str(size.batch),
         "--interval", "0.1"], cwd=REPO, env={**os.environ, **child_env()},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(kills):
            proc = runner.start(2, available_now=False)
            if not runner.kill_after(proc, rng.randint(2, 12)):
                raise AssertionError(f"continuous child ended early ({proc.returncode})")
        _, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err.decode()[-3000:]
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.communicate()
    return _finish(runner)


Scenario = Callable[[Path, Size, random.Random], Verdict]

SCENARIOS: dict[str, Scenario] = {
    "SIGKILL at crash point after_emit (emitted, not acked)":
        lambda r, s, g: crash_point(r, s, "after_emit", g),
    "SIGKILL at crash point after_ack (acked, checkpoint not written)":
        lambda r, s, g: crash_point(r, s, "after_ack", g),
    "SIGKILL at crash point during_checkpoint_write":
        lambda r, s, g: crash_point(r, s, "during_checkpoint_write", g),
    "SIGKILL at crash point during_restore (after a kill)":
        lambda r, s, g: crash_point(r, s, "during_restore", g),
    "SIGKILL at a random point (backfill)": random_kill,
    "SIGKILL driver/enumerator while a writer appends (x2)": continuous_with_writer,
    "double failure (kill, crash in restore, crash again)": double_failure,
    "restart with fewer readers (4 -> 2)":
        lambda r, s, g: random_kill(r, s, g, 4, 2),
    "restart with more readers (2 -> 4)":
        lambda r, s, g: random_kill(r, s, g, 2, 4),
}
