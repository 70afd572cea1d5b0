"""A Spark standalone cluster on namespace hosts: a master host and worker hosts, each
worker with Spark installed (``/opt/spark``) and nothing of icefloe: executors get it from
the packed environment the driver ships (``spark.archives``).

The driver runs on the client machine (the test process's namespace, ``10.227.0.1``), in
a directory of its own where ``./environment`` is the driver's own Python environment, so
``spark.pyspark.python=./environment/bin/python`` names the right interpreter on the
driver (its planner workers) and on executors (the unpacked archive).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyspark

from tests.cluster.hosts import CLIENT_ADDRESS, Host, Network

SPARK_HOME = Path(pyspark.__file__).parent
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MASTER_PORT, MASTER_UI = 7077, 8080


def host_env(host: Host, **extra: str) -> dict[str, str]:
    """The whole environment of a Spark daemon on ``host`` (nothing inherited)."""
    return {"PATH": PATH, "HOME": str(host.disk), "SPARK_HOME": "/opt/spark",
            "SPARK_LOCAL_IP": host.address, "SPARK_LOG_DIR": str(host.disk),
            "SPARK_LOCAL_DIRS": str(host.disk / "local"), "SPARK_NO_DAEMONIZE": "1",
            **extra}


def wait_for(condition: Any, what: str, timeout_s: float = 180, poll_s: float = 0.5,
             logs: Any = None) -> None:
    """Wait until ``condition()`` is true; fail naming ``what`` (and ``logs()``) if not."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout_s:.0f} s"
                                 + (f": {logs()}" if logs else ""))
        time.sleep(poll_s)


class SparkStandalone:
    """Master on ``master``, one worker per host of ``workers`` (1 core, 1 GiB each)."""

    def __init__(self, net: Network, master: Host, workers: list[Host]) -> None:
        self.net, self.master, self.workers = net, master, workers

    @property
    def url(self) -> str:
        return f"spark://{self.master.address}:{MASTER_PORT}"

    def state(self) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(f"http://{self.master.address}:{MASTER_UI}/json/",
                                        timeout=2) as answer:
                return dict(json.load(answer))
        except OSError:
            return {}

    def alive_workers(self) -> set[str]:
        return {w["host"] for w in self.state().get("workers", []) if w.get("state") == "ALIVE"}

    def start(self) -> SparkStandalone:
        self.master.popen(["/opt/spark/bin/spark-class", "org.apache.spark.deploy.master.Master",
                           "--host", self.master.address, "--port", str(MASTER_PORT),
                           "--webui-port", str(MASTER_UI)], "master.log",
                          host_env(self.master))
        wait_for(lambda: "workers" in self.state(), "the Spark master",
                 logs=lambda: self.master.log("master.log")[-2000:])
        for worker in self.workers:
            self.start_worker(worker)
        return self

    def start_worker(self, worker: Host) -> None:
        worker.popen(["/opt/spark/bin/spark-class", "org.apache.spark.deploy.worker.Worker",
                      self.url, "--host", worker.address, "--cores", "1", "--memory", "1g",
                      "--work-dir", str(worker.disk / "work")], "worker.log",
                     host_env(worker))
        wait_for(lambda: worker.address in self.alive_workers(), f"worker {worker.name}",
                 logs=lambda: worker.log("worker.log")[-2000:])


def driver_conf(archive: Path, event_dir: Path, **extra: str) -> dict[str, str]:
    """Settings of a classic driver on the client machine shipping icefloe as an archive."""
    return {
        "spark.driver.host": CLIENT_ADDRESS,
        "spark.driver.bindAddress": CLIENT_ADDRESS,
        "spark.driver.memory": "1g",
        "spark.executor.memory": "640m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.archives": f"{archive}#environment",
        "spark.pyspark.python": "./environment/bin/python",
        "spark.python.worker.reuse": "true",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": event_dir.as_uri(),
        **extra,
    }


def run_driver(workdir: Path, job: Mapping[str, Any], script: str = "spark_job.py"
               ) -> subprocess.Popen[str]:
    """Start ``tests/cluster/<script>`` with ``job`` (JSON) in ``workdir`` on the client
    machine (its own process group); ``./environment`` there is this interpreter's
    environment. The driver's log (stderr) is appended to ``workdir/driver.log``."""
    workdir.mkdir(parents=True, exist_ok=True)
    link = workdir / "environment"
    if not link.exists():
        link.symlink_to(sys.prefix)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPARK_", "PYSPARK_", "PYICEBERG_", "AWS_"))}
    env.update({"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": CLIENT_ADDRESS,
                "PYSPARK_PYTHON": "./environment/bin/python",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    with (workdir / "driver.log").open("a") as log:
        return subprocess.Popen([sys.executable, str(Path(__file__).with_name(script)),
                                 json.dumps(dict(job))], cwd=workdir, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=log, start_new_session=True)


def driver_result(process: subprocess.Popen[str], workdir: Path, timeout_s: float = 600
                  ) -> dict[str, Any]:
    """The job's JSON report (its last stdout line); fails with the driver log's tail."""
    try:
        out, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_driver(process)
        raise
    assert process.returncode == 0, f"driver exited {process.returncode}: {driver_log(workdir)}"
    return dict(json.loads(out.strip().splitlines()[-1]))


def driver_log(workdir: Path, chars: int = 4000) -> str:
    """The tail of the driver's log (its stderr)."""
    path = workdir / "driver.log"
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


def kill_driver(process: subprocess.Popen[str]) -> int:
    """SIGKILL the driver's whole process group at once (its Python, its JVM and the
    Python workers the JVM forked), as a crash of the driver host would; returns how many
    processes that was."""
    found = subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True,
                           text=True).stdout.split()
    stop_driver(process)
    return len(found)


def stop_driver(process: subprocess.Popen[str]) -> None:
    """SIGKILL the driver's process group (Python and its JVM) if it still runs; reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=30)
