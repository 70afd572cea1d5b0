"""A real Spark standalone cluster (master + one worker on loopback) reads an icefloe table."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icefloe.spark.session import catalog_options
from tests.conftest import sorted_rows
from tests.helpers.tables import EVENTS_SPEC_BY_DAY, make_table, rows
from tests.spark.support import normalized

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARK_HOME = Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(ready: object, what: str, process: subprocess.Popen[bytes], log: Path,
          timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what} exited ({process.returncode}): {log.read_text()[-2000:]}")
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.5)
    pytest.fail(f"{what} not ready after {timeout}s: {log.read_text()[-2000:]}")


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as answer:
            state = json.load(answer)
    except OSError:
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=env,
                                stdout=out, stderr=subprocess.STDOUT)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    """``spark://127.0.0.1:<port>`` of a master with one 1-core, 1 GiB worker (stopped after)."""
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(tmp_path / "work"), "SPARK_LOG_DIR": str(tmp_path),
           "PYSPARK_PYTHON": sys.executable}
    port, ui_port, worker_ui = _free_port(), _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    master = _start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(ui_port)], master_log, env)
    processes = [master]
    try:
        _wait(lambda: _alive_workers(ui_port) == 0 and _port_open(port), "master", master,
              master_log)
        worker = _start(["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                         "--cores", "1", "--memory", "1g", "--webui-port", str(worker_ui)],
                        worker_log, env)
        processes.append(worker)
        _wait(lambda: _alive_workers(ui_port) == 1, "worker", worker, worker_log)
        yield url
    finally:
        for process in reversed(processes):
            _stop(process)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_standalone_cluster_backfill(standalone: str, catalog: SqlCatalog,
                                     tmp_path: Path) -> None:
    table = make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY)
    table.append(rows(60))
    table.append(rows(40, start=60))
    out = tmp_path / "out"
    args = {"master": standalone, "table": "db.events", "out": str(out),
            "options": {"splitSize": "1", "filter": "id >= 10", **catalog_options(catalog)}}
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}

    done = subprocess.run([sys.executable, str(Path(__file__).with_name("cluster_job.py")),
                           json.dumps(args)], capture_output=True, text=True, env=env,
                          timeout=300)

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    expected = normalized(table.scan(row_filter="id >= 10").to_arrow())
    assert report["rows"] == expected.num_rows == 90
    assert report["partitions"] == 6  # 2 appends x 3 day partitions, one task each
    assert report["block_managers"] == 2  # the driver and the worker's executor
    assert sorted_rows(pq.read_table(out)) == sorted_rows(expected)
