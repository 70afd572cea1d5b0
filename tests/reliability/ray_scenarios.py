"""Ray kill scenarios: reader actors killed every few seconds, the driver SIGKILLed.

Shared by the tests (``tests/ray/test_ray_kill.py``) and the campaign (``python -m
tests.reliability.ray_campaign``). The Ray cluster is the caller's (the test suite's
local Ray, or the one the campaign starts): :func:`ray_address` names it, and each
driver process (:mod:`tests.reliability.ray_child`) connects to it as a job of its own.
A SIGKILLed driver takes its job's enumerator and reader actors with it (Ray ends a
dead driver's actors); the harness waits until their processes are gone before it
restarts the driver from the checkpoint, as an operator restarting a crashed job would.

Each scenario builds its own table under a fresh directory, runs a writer process
(:mod:`tests.reliability.writer`) that keeps appending, kills, finishes with an
available-now run (reader kills go on during it) and judges the sink with
:func:`tests.reliability.harness.judge` against PyIceberg's scan.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.tables import make_catalog
from tests.reliability.harness import REPO, Runner, Verdict, child_env, judge, oracle_ids
from tests.reliability.scenarios import Size, _setup


def ray_address() -> str:
    """The GCS address of the Ray this process is connected to (initialized by the caller)."""
    import ray

    if not ray.is_initialized():
        raise RuntimeError("connect to (or start) Ray first: ray.init(...)")
    return str(ray.get_runtime_context().gcs_address)


@dataclass
class RayRunner(Runner):
    """Starts :mod:`tests.reliability.ray_child` driver processes on one table and sink."""

    address: str = ""
    mode: str = "sink"
    readers: int = 2
    kill_every: float = 0.0
    sink_delay: float = 0.0
    kills: Path = field(init=False)
    status: Path = field(init=False)
    driver_kills: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.kills = self.root / "kills.jsonl"
        self.status = self.root / "status.json"

    def command(self, parallelism: int, available_now: bool,
                options: tuple[str, ...] = ()) -> list[str]:
        cmd = [sys.executable, "-m", "tests.reliability.ray_child", "--address", self.address,
               "--root", str(self.root), "--checkpoint", str(self.checkpoint),
               "--out", str(self.out), "--kills", str(self.kills), "--status", str(self.status),
               "--run", str(self.runs), "--mode", self.mode, "--readers", str(parallelism),
               "--batch-size", str(self.batch_size), "--kill-every", str(self.kill_every),
               "--sink-delay", str(self.sink_delay), "--seed", str(self.runs)]
        if available_now:
            cmd.append("--available-now")
        return cmd

    def reader_kills(self) -> int:
        """Reader actors killed so far (lines of the kills log)."""
        try:
            with open(self.kills, "rb") as fh:
                return sum(1 for _ in fh)
        except FileNotFoundError:
            return 0

    def kill_driver_when(self, proc: subprocess.Popen[bytes], reader_kills: int,
                         batches: int, timeout: float = 600) -> None:
        """SIGKILL the driver once ``reader_kills`` more reader actors were killed and then
        ``batches`` more batches reached the sink (or 20 s passed: the table may be read
        up to its head), plus a random delay of up to 20 ms; then wait until its actors'
        processes are gone (Ray ends them with the job)."""
        deadline = time.monotonic() + timeout
        base_kills = self.reader_kills()
        while proc.poll() is None and self.reader_kills() - base_kills < reader_kills:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {reader_kills} reader kills in {timeout} s")
            time.sleep(0.05)
        base, until = self.delivered_lines(), time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < until \
                and self.delivered_lines() - base < batches:
            time.sleep(0.005)
        time.sleep(random.uniform(0, 0.02))
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"the continuous driver ended early ({proc.returncode}):\n"
                                 f"{err.decode()[-3000:]}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        self.driver_kills += 1
        self._wait_actors_gone()

    def _wait_actors_gone(self, timeout: float = 120) -> None:
        try:
            pids = json.loads(self.status.read_text())["pids"]
        except (FileNotFoundError, ValueError):
            return  # killed before its actors were up
        self.status.unlink()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive = [p for p in pids if _alive(p)]
            if not alive:
                return
            time.sleep(0.1)
        raise AssertionError(f"actors of the killed driver still alive after {timeout} s: {alive}")

    def finish(self, timeout: float = 300) -> Verdict:
        """Run an available-now driver to its end (reader kills go on), then judge."""
        assert self.run(self.readers, timeout=timeout) == 0
        catalog = make_catalog(self.root)
        try:
            return judge(self.out, oracle_ids(catalog), self.runs)
        finally:
            catalog.engine.dispose()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is gone for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@dataclass
class RayVerdict:
    """A scenario's verdict plus what was killed."""

    verdict: Verdict
    reader_kills: int
    driver_kills: int
    seconds: float

    @property
    def kills(self) -> int:
        return self.reader_kills + self.driver_kills


def _writer(root: Path, commits: int, rows: int, interval: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.writer", "--root", str(root),
         "--start", str(10**9), "--batches", str(commits), "--rows", str(rows),
         "--interval", str(interval)], cwd=REPO, env={**os.environ, **child_env()},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@dataclass(frozen=True)
class Plan:
    """How hard a scenario kills.

    Attributes:
        kill_every: seconds between reader kills (jittered +-50%; only readers that are up).
        driver_kills: SIGKILLs of the driver, each once ``reader_kills_before`` reader
            kills happened in that run and then a random 1..``size.batches // 4`` batches.
        commits: the writer's appends (``size.batch`` rows each), ``commit_interval`` s apart.
        sink_delay: seconds the sink takes per batch.
    """

    kill_every: float = 3.0
    driver_kills: int = 1
    reader_kills_before: int = 2
    commits: int = 15
    commit_interval: float = 1.0
    sink_delay: float = 0.1


def kills_with_writer(root: Path, size: Size, rng: random.Random, address: str,
                      mode: str = "sink", plan: Plan = Plan()) -> RayVerdict:
    """A writer appends while a continuous Ray stream (``mode``: the sink in the reader
    actors, or the driver iterating) ingests the table; a random reader actor is killed
    every ~``plan.kill_every`` s and the driver is SIGKILLed ``plan.driver_kills`` times,
    each restart resuming from the checkpoint. The last run (available-now, reader kills
    going on) starts once the writer is done."""
    started = time.monotonic()
    runner = RayRunner(_setup(root, size).root, batch_size=size.batch, address=address,
                       mode=mode, kill_every=plan.kill_every, sink_delay=plan.sink_delay)
    writer = _writer(root, plan.commits, size.batch, plan.commit_interval)
    try:
        for _ in range(plan.driver_kills):
            proc = runner.start(runner.readers, available_now=False)
            runner.kill_driver_when(proc, plan.reader_kills_before,
                                    rng.randint(1, max(1, size.batches // 4)))
        _, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err.decode()[-3000:]
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.communicate()
    verdict = runner.finish()
    return RayVerdict(verdict, runner.reader_kills(), runner.driver_kills,
                      time.monotonic() - started)


RayScenario = Callable[[Path, Size, random.Random, str, Plan], RayVerdict]

RAY_SCENARIOS: dict[str, RayScenario] = {
    "reader actors killed every ~3 s + driver SIGKILL, writer appending (sink in readers)":
        lambda r, s, g, a, p: kills_with_writer(r, s, g, a, "sink", p),
    "reader actors killed every ~3 s + driver SIGKILL, writer appending (driver iterates)":
        lambda r, s, g, a, p: kills_with_writer(r, s, g, a, "driver", p),
}
