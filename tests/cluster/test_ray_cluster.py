"""icefloe on a Ray cluster whose hosts share nothing but the network.

Hosts: ``s3`` (SeaweedFS), ``rhead`` (``ray start --head``), ``r1`` and ``r2``
(``ray start --address``). Each Ray host has a pre-installed environment with Ray and
icefloe's dependencies but not icefloe; the driver on the client machine connects with
Ray Client and ships icefloe with ``runtime_env={"py_modules": [icefloe]}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table

from icefloe.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedFS
from tests.cluster.envpack import packed_env
from tests.cluster.hosts import CLIENT_ADDRESS, Host, Network
from tests.cluster.spark_cluster import PATH, wait_for
from tests.cluster.support import files_containing, rest_options
from tests.conftest import sorted_rows
from tests.helpers.changelog import check_every_snapshot
from tests.helpers.tables import make_table, rows

pytestmark = pytest.mark.timeout(900)

GCS_PORT, CLIENT_PORT = 6379, 10001


def _ray_env(host: Host) -> dict[str, str]:
    return {"PATH": f"{host.disk / 'environment' / 'bin'}:{PATH}", "HOME": str(host.disk),
            "RAY_USAGE_STATS_ENABLED": "0"}


def _ray_start(host: Host, *args: str) -> None:
    python = str(host.disk / "environment" / "bin" / "python")
    host.popen([python, "-m", "ray.scripts.scripts", "start", "--block",
                f"--node-ip-address={host.address}", "--num-cpus=1",
                "--object-store-memory=100000000", "--temp-dir=/srv/host/r",
                "--disable-usage-stats", *args], "ray.log", _ray_env(host))


class RayCluster:
    def __init__(self, head: Host, workers: list[Host]) -> None:
        self.head, self.workers = head, workers

    @property
    def address(self) -> str:
        return f"ray://{self.head.address}:{CLIENT_PORT}"

    def start_worker(self, host: Host) -> None:
        _ray_start(host, f"--address={self.head.address}:{GCS_PORT}")

    @staticmethod
    def started(host: Host) -> bool:
        """``ray start`` on ``host`` says the node runs (and, on a worker, has joined)."""
        return "Ray runtime started" in host.log("ray.log")


@pytest.fixture(scope="module")
def ray_cluster(network: Network, seaweed: SeaweedFS) -> Iterator[RayCluster]:
    archive = packed_env("ray", project=False)
    hosts = [network.add(name) for name in ("rhead", "r1", "r2")]
    for host in hosts:  # Ray and icefloe's dependencies installed on every node
        (host.disk / "environment").mkdir()
        subprocess.run(["tar", "-xzf", str(archive), "-C", str(host.disk / "environment")],
                       check=True)
    head, workers = hosts[0], hosts[1:]
    cluster = RayCluster(head, workers)
    try:
        _ray_start(head, "--head", f"--port={GCS_PORT}", f"--ray-client-server-port={CLIENT_PORT}",
                   "--include-dashboard=false")
        for worker in workers:
            cluster.start_worker(worker)
        for host in hosts:
            wait_for(lambda host=host: cluster.started(host), f"Ray on {host.name}",
                     timeout_s=240, poll_s=1, logs=lambda host=host: host.log("ray.log")[-2000:])
        yield cluster
    finally:
        for host in hosts:
            host.kill()


@pytest.fixture(scope="module")
def ray_events(seaweed: SeaweedFS) -> Table:
    catalog = load_catalog("lake", **seaweed.rest_properties())
    catalog.create_namespace_if_not_exists("raycluster")
    table = make_table(catalog, "raycluster.events")
    for i in range(8):
        table.append(rows(500, start=i * 500))
    table.delete("id < 10")
    return catalog.load_table("raycluster.events")


def run_ray_driver(workdir: Path, job: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    workdir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYICEBERG_", "AWS_", "RAY_ADDRESS"))}
    env.update({"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    return subprocess.run([sys.executable, str(Path(__file__).with_name("ray_job.py")),
                           json.dumps(job)], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=600)


def test_bounded_and_changelog_reads_on_ray_nodes_without_icefloe(
        ray_cluster: RayCluster, seaweed: SeaweedFS, ray_events: Table, tmp_path: Path) -> None:
    options = {**rest_options(seaweed), "splitSize": "1"}
    job = {"address": ray_cluster.address,
           "reads": [{"table": "raycluster.events", "options": options,
                      "out": str(tmp_path / "rows.parquet")},
                     {"table": "raycluster.events", "options": {**options, "changelog": "true"},
                      "out": str(tmp_path / "changes.parquet")}]}
    done = run_ray_driver(tmp_path / "driver", job)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    expected = ray_events.scan().to_arrow()
    got = pq.read_table(tmp_path / "rows.parquet")
    assert report["rows"][0] == expected.num_rows == 3990
    assert sorted_rows(got) == sorted_rows(expected)
    changes = pq.read_table(tmp_path / "changes.parquet")
    assert check_every_snapshot(ray_events, changes) == len(ray_events.snapshots())
    hosts = [ray_cluster.head, *ray_cluster.workers]
    assert set(report["nodes"]) >= {h.address for h in hosts}
    assert CLIENT_ADDRESS not in report["nodes"], "the client machine is no Ray node"
    leaks = files_containing([h.disk for h in hosts], [SECRET_KEY, f"{ACCESS_KEY}:{SECRET_KEY}"])
    assert leaks == [], "a secret in a Ray log"
