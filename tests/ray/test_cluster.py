"""``icefloe read|stream --engine ray --address`` against a running ``ray start --head`` cluster.

The cluster (1 CPU, loopback, no dashboard) is started by the test in its own process
group and killed in teardown (never ``ray stop``: it would end the suite's local Ray too).
The clients run as subprocesses, apart from the suite's local Ray.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from tests.conftest import assert_same_rows
from tests.helpers.tables import make_table, rows

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # ~2.5 min: cluster start + two CLI runs

BIN = Path(sys.executable).parent
# a throwaway loopback cluster: no token auth (server and clients agree), this venv as is
CLUSTER_ENV = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "RAY_AUTH_MODE": "disabled"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def cluster() -> Iterator[str]:
    port = _free_port()
    temp_dir = tempfile.mkdtemp(prefix="icr", dir="/tmp")  # short: Ray's Unix socket paths
    env = {**os.environ, **CLUSTER_ENV}
    proc = subprocess.Popen(
        [str(BIN / "ray"), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats", "--block",
         f"--temp-dir={temp_dir}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            pytest.fail("the Ray head did not start")
        yield address
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=15)
                break
            except subprocess.TimeoutExpired:
                continue
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_cli_read_and_stream_on_a_cluster(catalog: SqlCatalog, tmp_path: Path,
                                          cluster: str) -> None:
    table = make_table(catalog)
    table.append(rows(40))
    table.append(rows(40, start=40))
    props = [f"catalog.{k}={v}" for k, v in catalog.properties.items()] + ["catalog.type=sql"]
    options = [arg for p in props for arg in ("-o", p)]
    env = {**os.environ, **CLUSTER_ENV, "PYTHONWARNINGS": "ignore"}
    out = tmp_path / "backfill"
    done = subprocess.run([str(BIN / "icefloe"), "read", "db.events", "--catalog", "test", *options,
                    "--engine", "ray", "--address", cluster, "--to", str(out)],
                   check=False, env=env, timeout=150, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_rows(pq.read_table(out), table.scan().to_arrow())

    sink = tmp_path / "sink"
    done = subprocess.run([str(BIN / "icefloe"), "stream", "db.events", "--catalog", "test",
                           *options,
                    "--engine", "ray", "--address", cluster, "--available-now",
                    "--checkpoint", str(tmp_path / "ckpt"), "--sink", f"parquet:{sink}",
                    "--max-seconds", "120"],
                   check=False, env=env, timeout=150, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    ids = sorted(pq.read_table(sink).column("id").to_pylist())
    assert ids == list(range(80))
