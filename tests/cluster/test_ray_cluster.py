"""icefloe on a Ray cluster whose hosts share nothing but the network.

Hosts: ``s3`` (SeaweedFS), ``rhead`` (``ray start --head``), ``r1`` and ``r2``
(``ray start --address``). Each Ray host has a pre-installed environment with Ray and
icefloe's dependencies but not icefloe; the driver runs on the head host with icefloe's
source copied there (a user's checkout) and ships it to the other nodes with
``runtime_env={"py_modules": [icefloe]}``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.table import Table

from icefloe.seaweed import SeaweedFS
from tests.cluster import support
from tests.cluster.envpack import packed_env
from tests.cluster.hosts import CLIENT_ADDRESS, Host, Network
from tests.cluster.spark_cluster import PATH, wait_for
from tests.conftest import sorted_rows
from tests.helpers.changelog import check_every_snapshot
from tests.helpers.tables import rows

pytestmark = pytest.mark.timeout(900)

GCS_PORT = 6379
ROOT = Path(__file__).resolve().parents[2]


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
        _ray_start(head, "--head", f"--port={GCS_PORT}", "--include-dashboard=false")
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
    return support.rest_table(seaweed, "raycluster.events", appends=8, rows_each=500,
                              delete_below=10)


def ship_code(head: Host) -> Path:
    """icefloe's source and ``ray_job.py`` copied to the head host's disk (a user's
    checkout there); returns the directory."""
    code = head.disk / "code"
    if not code.exists():
        shutil.copytree(ROOT / "icefloe", code / "icefloe",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(Path(__file__).with_name("ray_job.py"), code / "ray_job.py")
    return code


def run_ray_driver(head: Host, job: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Run ``ray_job.py`` on the head host with icefloe's source copied to its disk."""
    code = ship_code(head)
    python = str(head.disk / "environment" / "bin" / "python")
    return head.run([python, str(code / "ray_job.py"), json.dumps(job)],
                    env={**_ray_env(head), "PYTHONPATH": str(code)}, timeout_s=600)


def test_bounded_and_changelog_reads_on_ray_nodes_without_icefloe(
        ray_cluster: RayCluster, seaweed: SeaweedFS, ray_events: Table) -> None:
    options = {**support.rest_options(seaweed), "splitSize": "1", **dict([support.CANARY])}
    job = {"address": f"{ray_cluster.head.address}:{GCS_PORT}",
           "reads": [{"table": "raycluster.events", "options": options,
                      "out": str(ray_cluster.head.disk / "rows.parquet")},
                     {"table": "raycluster.events", "options": {**options, "changelog": "true"},
                      "out": str(ray_cluster.head.disk / "changes.parquet")}]}
    done = run_ray_driver(ray_cluster.head, job)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    expected = ray_events.scan().to_arrow()
    got = pq.read_table(ray_cluster.head.disk / "rows.parquet")
    assert report["rows"][0] == expected.num_rows == 3990
    assert sorted_rows(got) == sorted_rows(expected)
    changes = pq.read_table(ray_cluster.head.disk / "changes.parquet")
    assert check_every_snapshot(ray_events, changes) == len(ray_events.snapshots())
    hosts = [ray_cluster.head, *ray_cluster.workers]
    assert set(report["nodes"]) >= {h.address for h in hosts}
    assert CLIENT_ADDRESS not in report["nodes"], "the client machine is no Ray node"
    for worker in ray_cluster.workers:  # icefloe reached them by runtime_env only
        python = str(worker.disk / "environment" / "bin" / "python")
        assert worker.run([python, "-c", "import icefloe"]).returncode != 0
    logs = [d for h in hosts for d in h.disk.glob("r/session_*/logs")]
    assert len(logs) >= len(hosts)
    # the Ray logs of every node (not the shipped source: icefloe/seaweed.py holds the
    # test server's demo key as a constant)
    leaks = support.files_containing(logs, support.SECRETS)
    assert leaks == [], "a secret in a Ray log"


def test_stream_with_its_checkpoint_in_s3_resumes_in_a_new_driver(
        ray_cluster: RayCluster, seaweed: SeaweedFS) -> None:
    """An available-now stream on the cluster, checkpoint in S3; rows appended; a second
    driver process resumes from the S3 checkpoint: every row exactly once in all."""
    table = support.rest_table(seaweed, "raycluster.stream", appends=6, rows_each=300)
    spec = {"table": "raycluster.stream", "checkpoint": f"s3://{seaweed.bucket}/ckpt/stream",
            "options": {**support.rest_options(seaweed), "catalog.s3.region": "us-east-1"}}
    address = f"{ray_cluster.head.address}:{GCS_PORT}"
    first = run_ray_driver(ray_cluster.head, {"address": address, "stream": spec})
    assert first.returncode == 0, first.stderr[-4000:]
    before = json.loads(first.stdout.strip().splitlines()[-1])["ids"]
    assert sorted(before) == list(range(1800))
    for i in range(6, 9):
        table.append(rows(300, start=i * 300))
    second = run_ray_driver(ray_cluster.head, {"address": address, "stream": spec})
    assert second.returncode == 0, second.stderr[-4000:]
    after = json.loads(second.stdout.strip().splitlines()[-1])["ids"]
    oracle = sorted(table.refresh().scan().to_arrow().column("id").to_pylist())
    support.record("ray: available-now stream, checkpoint in S3, resumed by a new driver",
                   rows_checked=len(oracle), rows_lost=len(set(oracle) - set(before + after)),
                   duplicates=len(before) + len(after) - len(set(before + after)), restarts=1)
    assert sorted(before + after) == oracle, "rows lost or repeated across the restart"


def test_readme_ray_cluster_recipe_on_the_head_host(
        ray_cluster: RayCluster, seaweed: SeaweedFS, ray_events: Table) -> None:
    """The README's Ray cluster block as written, run on the head host (icefloe's source
    there, shipped to the other nodes by ``runtime_env``), the catalog ``lake`` in the
    driver's environment only: the count equals PyIceberg's."""
    head = ray_cluster.head
    code = support.readme_block("ray.init", {"head:6379": f"{head.address}:{GCS_PORT}",
                                             "db.events": "raycluster.events"})
    shipped = ship_code(head)
    (shipped / "readme_ray.py").write_text(code)
    python = str(head.disk / "environment" / "bin" / "python")
    done = head.run([python, str(shipped / "readme_ray.py")],
                    env={**_ray_env(head), "PYTHONPATH": str(shipped),
                         **support.catalog_env("lake", seaweed.rest_properties())}, timeout_s=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.split()[-1] == str(ray_events.scan().to_arrow().num_rows) == "3990"


def _ray_workers_started(host: Host) -> int:
    """Ray worker processes the host has started (one log file each)."""
    return sum(1 for _ in host.disk.glob("r/session_*/logs/worker-*.err"))


def _backfill_running_on(ray_cluster: RayCluster, seaweed: SeaweedFS, name: str,
                         node: Host) -> tuple[Table, subprocess.Popen[bytes], Path]:
    """A 40-task backfill of the new table ``raycluster.<name>`` started by a driver on the
    head host (log ``<name>.log``), returned once ``node`` has started a Ray worker for
    it: (the table, the driver, the Parquet file it writes)."""
    table = support.rest_table(seaweed, f"raycluster.{name}", appends=40, rows_each=1000)
    head = ray_cluster.head
    out = head.disk / f"{name}.parquet"
    job = {"address": f"{head.address}:{GCS_PORT}",
           "reads": [{"table": f"raycluster.{name}", "out": str(out),
                      "options": {**support.rest_options(seaweed), "splitSize": "1"}}]}
    code = ship_code(head)
    before = _ray_workers_started(node)
    python = str(head.disk / "environment" / "bin" / "python")
    driver = head.popen([python, str(code / "ray_job.py"), json.dumps(job)], f"{name}.log",
                        {**_ray_env(head), "PYTHONPATH": str(code)})
    wait_for(lambda: _ray_workers_started(node) > before or driver.poll() is not None,
             f"a Ray worker on {node.name}", timeout_s=300)
    assert driver.poll() is None, f"the backfill ended first: {head.log(f'{name}.log')}"
    return table, driver, out


def test_a_ray_worker_host_killed_mid_backfill(
        ray_cluster: RayCluster, seaweed: SeaweedFS) -> None:
    """Every process of host r2 (its raylet, object store, workers) SIGKILLed while the
    backfill's read tasks run there: Ray runs the lost tasks again on the other nodes,
    and the rows are exactly the oracle's."""
    head, victim = ray_cluster.head, ray_cluster.workers[1]
    table, driver, out = _backfill_running_on(ray_cluster, seaweed, "backfill", victim)
    try:
        killed = victim.kill()
        assert killed >= 2, "the raylet and its workers"
        assert driver.wait(timeout=600) == 0, head.log("backfill.log")[-4000:]
    finally:
        if driver.poll() is None:
            driver.kill()
        ray_cluster.start_worker(victim)  # the host comes back
    report = next(json.loads(line) for line in reversed(head.log("backfill.log").splitlines())
                  if line.startswith('{"rows"'))
    got = pq.read_table(out).column("id").to_pylist()
    oracle = table.scan().to_arrow().column("id").to_pylist()
    support.record("ray: worker host r2 SIGKILLed mid-backfill", kills=1, processes_killed=killed,
                   rows_checked=len(oracle), rows_lost=len(set(oracle) - set(got)),
                   duplicates=len(got) - len(set(got)))
    assert report["rows"] == [len(oracle)] == [40_000]
    assert sorted(got) == sorted(oracle), "rows lost or repeated"


def test_ray_driver_killed_mid_stream_resumes_from_the_s3_checkpoint(
        ray_cluster: RayCluster, seaweed: SeaweedFS) -> None:
    """A continuous stream on the cluster (enumerator and 2 reader actors), its checkpoint
    in S3, every item written to an idempotent S3 sink before it is acked; the driver
    process on the head host SIGKILLed once 2 items are in S3 (its actors die with it),
    2 snapshots appended, a new driver resumes from the S3 checkpoint, one more snapshot
    appended while it runs: every id in the sink exactly once."""
    table = support.rest_table(seaweed, "raycluster.killed", appends=6, rows_each=300)
    head = ray_cluster.head
    stop = head.disk / "stop-killed"
    spec = {"table": "raycluster.killed", "checkpoint": f"s3://{seaweed.bucket}/ckpt/killed",
            "stop_file": str(stop), "delay_s": 1.0,
            "options": {**support.rest_options(seaweed), "catalog.s3.region": "us-east-1",
                        "startingVersion": "earliest", "maxFilesPerTrigger": "1"},
            "sink": support.sink_spec(seaweed, "sink/ray-killed")}
    job = json.dumps({"address": f"{head.address}:{GCS_PORT}", "stream": spec})
    code = ship_code(head)
    python = str(head.disk / "environment" / "bin" / "python")
    env = {**_ray_env(head), "PYTHONPATH": str(code)}
    drivers: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        drivers.append(head.popen([python, str(code / "ray_job.py"), job], "killed.log", env))
        return drivers[-1]

    def ids() -> list[int]:
        return support.sink_ids(seaweed, "sink/ray-killed")

    try:
        first = start()
        wait_for(lambda: support.sink_objects(seaweed, "sink/ray-killed") >= 2
                 or first.poll() is not None, "two items in the S3 sink", timeout_s=300,
                 logs=lambda: head.log("killed.log")[-3000:])
        assert first.poll() is None, head.log("killed.log")[-3000:]
        in_s3 = len(set(ids()))
        found = subprocess.run(["pgrep", "-g", str(first.pid)], capture_output=True,
                               text=True).stdout.split()
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        assert in_s3 < 1800, "the stream had finished before the kill"
        for i in range(6, 8):
            table.append(rows(300, start=i * 300))
        second = start()
        wait_for(lambda: set(ids()) >= set(range(2400)) or second.poll() is not None,
                 "the 8 snapshots after the restart", timeout_s=300,
                 logs=lambda: head.log("killed.log")[-3000:])
        table.append(rows(300, start=2400))
        wait_for(lambda: set(ids()) >= set(range(2700)) or second.poll() is not None,
                 "a snapshot committed while it runs", timeout_s=180,
                 logs=lambda: head.log("killed.log")[-3000:])
        assert second.poll() is None, head.log("killed.log")[-3000:]
        stop.touch()
        assert second.wait(timeout=120) == 0, head.log("killed.log")[-3000:]
    finally:
        for driver in drivers:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait(timeout=30)
    got = ids()
    oracle = sorted(table.refresh().scan().to_arrow().column("id").to_pylist())
    support.record("ray: driver SIGKILLed mid-stream, resumed from the S3 checkpoint, S3 sink",
                   kills=1, processes_killed=len(found), rows_checked=len(oracle),
                   rows_lost=len(set(oracle) - set(got)), duplicates=len(got) - len(set(got)),
                   rows_in_s3_at_kill=in_s3)
    assert sorted(got) == oracle, "rows lost or repeated across the driver's kill"


def _declared_dead(head: Host, node: Host) -> bool:
    """The head's GCS has marked ``node`` dead (its health checks failed)."""
    return any(f"node name: {node.address} has been marked dead" in path.read_text(
        errors="replace") for path in head.disk.glob("r/session_*/logs/gcs_server.out"))


def test_a_ray_worker_cut_off_longer_than_the_health_check(
        ray_cluster: RayCluster, seaweed: SeaweedFS) -> None:
    """r1's link down while the backfill's read tasks run there, until the head's GCS
    declares the node dead (its health checks: about 50 s here), then up again (the
    raylet, told it is dead, exits with its workers; the driver runs their tasks again
    elsewhere); the node is restarted afterwards: exactly the oracle's rows."""
    head, cut = ray_cluster.head, ray_cluster.workers[0]
    table, driver, out = _backfill_running_on(ray_cluster, seaweed, "cut", cut)
    down_s = 0.0
    try:
        cut.link(up=False)
        cut_at = time.monotonic()
        try:
            wait_for(lambda: _declared_dead(head, cut) or driver.poll() is not None,
                     "the GCS declaring r1 dead", timeout_s=300)
        finally:
            cut.link(up=True)
            down_s = time.monotonic() - cut_at
        assert driver.wait(timeout=600) == 0, head.log("cut.log")[-4000:]
    finally:
        if driver.poll() is None:
            driver.kill()
        cut.kill()  # a raylet the cluster declared dead does not rejoin: restart the node
        ray_cluster.start_worker(cut)
    report = next(json.loads(line) for line in reversed(head.log("cut.log").splitlines())
                  if line.startswith('{"rows"'))
    got = pq.read_table(out).column("id").to_pylist()
    oracle = table.scan().to_arrow().column("id").to_pylist()
    support.record("ray: worker r1 link down mid-backfill past the GCS health check, then up",
                   cuts=1,
                   seconds_down=round(down_s, 1), rows_checked=len(oracle),
                   rows_lost=len(set(oracle) - set(got)), duplicates=len(got) - len(set(got)))
    assert _declared_dead(head, cut), "the backfill ended before r1 was declared dead"
    assert cut.address not in report["nodes"]
    assert report["rows"] == [len(oracle)] == [40_000]
    assert sorted(got) == sorted(oracle), "rows lost or repeated"
