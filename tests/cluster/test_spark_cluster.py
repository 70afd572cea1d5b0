"""icefloe on a Spark standalone cluster whose hosts share nothing but the network.

Hosts: ``s3`` (SeaweedFS: S3 and the Iceberg REST catalog), ``master`` (the Spark master),
``w1`` and ``w2`` (Spark workers with Spark installed and nothing of icefloe); the driver
on the client machine ships icefloe as a packed environment (``spark.archives``). Tables
are written by PyIceberg through the REST catalog; rows against PyIceberg's scans.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.table import Table

import icefloe.spark
from icefloe.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedFS
from tests.cluster.envpack import packed_env
from tests.cluster.hosts import Host, Network
from tests.cluster.spark_cluster import (
    PATH,
    SPARK_HOME,
    SparkStandalone,
    driver_conf,
    driver_log,
    driver_result,
    run_driver,
    stop_driver,
    wait_for,
)
from tests.cluster.support import files_containing, record, rest_options, rest_table
from tests.conftest import sorted_rows
from tests.helpers.changelog import check_every_snapshot
from tests.spark.connect_server import ConnectServer, connect_client
from tests.spark.support import normalized

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def cluster(network: Network, seaweed: SeaweedFS) -> Iterator[SparkStandalone]:
    spark = {"/opt/spark": str(SPARK_HOME)}
    master = network.add("master", spark)
    workers = [network.add(name, spark) for name in ("w1", "w2")]
    try:
        yield SparkStandalone(network, master, workers).start()
    finally:  # the hosts' processes; the namespaces go with the network
        for host in (master, *workers):
            host.kill()


@pytest.fixture(scope="module")
def archive() -> Path:
    return packed_env()


@pytest.fixture(scope="module")
def events(seaweed: SeaweedFS) -> Table:
    """``cluster.events``: 12 appends of 500 rows, then a delete of ids below 10."""
    return rest_table(seaweed, "cluster.events", appends=12, rows_each=500, delete_below=10)


def executor_hosts(workers: list[Host]) -> set[str]:
    """Worker hosts where an executor ran a task (its stderr in the worker's work dir)."""
    return {w.name for w in workers
            if any("Running task" in f.read_text(errors="replace")
                   for f in (w.disk / "work").rglob("stderr"))}


def test_bounded_and_changelog_reads_on_executors_that_only_have_the_archive(
        cluster: SparkStandalone, seaweed: SeaweedFS, events: Table, archive: Path,
        tmp_path: Path) -> None:
    work = tmp_path / "driver"
    (tmp_path / "events-log").mkdir()
    options = {**rest_options(seaweed), "splitSize": "1"}
    job = {"master": cluster.url, "conf": driver_conf(archive, tmp_path / "events-log"),
           "reads": [{"table": "cluster.events", "options": options,
                      "out": str(tmp_path / "rows.parquet")},
                     {"table": "cluster.events", "options": {**options, "changelog": "true"},
                      "out": str(tmp_path / "changes.parquet")}]}
    report = driver_result(run_driver(work, job), work)
    expected = normalized(events.scan().to_arrow())
    got = pq.read_table(tmp_path / "rows.parquet")
    assert report["rows"][0] == expected.num_rows == 5990  # ids 0..5999 but 0..9
    assert sorted_rows(got) == sorted_rows(expected)
    changes = pq.read_table(tmp_path / "changes.parquet")
    assert check_every_snapshot(events, changes) == len(events.snapshots()) >= 13
    assert executor_hosts(cluster.workers) == {"w1", "w2"}
    secrets = [SECRET_KEY, f"{ACCESS_KEY}:{SECRET_KEY}"]
    leaks = files_containing([w.disk for w in cluster.workers] + [tmp_path / "events-log"],
                             secrets)
    assert leaks == [], "a secret in an executor log or the Spark event log"


@pytest.fixture(scope="module")
def backfill(seaweed: SeaweedFS) -> Table:
    """``cluster.backfill``: 40 appends of 1,000 rows, read as 40 one-file tasks."""
    return rest_table(seaweed, "cluster.backfill", appends=40, rows_each=1000)


def _backfill_job(cluster: SparkStandalone, seaweed: SeaweedFS, archive: Path, tmp_path: Path,
                  **conf: str) -> dict[str, Any]:
    (tmp_path / "events-log").mkdir(exist_ok=True)
    return {"master": cluster.url,
            "conf": driver_conf(archive, tmp_path / "events-log", **conf),
            "reads": [{"table": "cluster.backfill", "out": str(tmp_path / "rows.parquet"),
                       "options": {**rest_options(seaweed), "splitSize": "1"}}]}


def _tasks_started(host: Host) -> int:
    return sum(f.read_text(errors="replace").count("Running task")
               for f in (host.disk / "work").rglob("stderr"))


def _check_exact(report: dict[str, Any], table: Table, tmp_path: Path, scenario: str,
                 **figures: object) -> None:
    """The rows read are exactly the oracle's; the scenario's figures are recorded first."""
    expected = normalized(table.scan().to_arrow())
    got = pq.read_table(tmp_path / "rows.parquet")
    want = Counter(map(repr, sorted_rows(expected)))
    have = Counter(map(repr, sorted_rows(got)))
    record(scenario, rows_checked=expected.num_rows, rows_lost=sum((want - have).values()),
           duplicates=sum((have - want).values()), **figures)
    assert report["rows"] == [got.num_rows] == [expected.num_rows], "rows lost or repeated"
    assert sorted_rows(got) == sorted_rows(expected)


def test_a_worker_host_killed_mid_backfill(
        cluster: SparkStandalone, seaweed: SeaweedFS, backfill: Table, archive: Path,
        tmp_path: Path) -> None:
    """Every process of host w2 SIGKILLed while its executor reads: the lost tasks run
    again on w1, and the result holds exactly the oracle's rows."""
    victim = cluster.workers[1]
    work = tmp_path / "driver"
    before = _tasks_started(victim)
    driver = run_driver(work, _backfill_job(cluster, seaweed, archive, tmp_path))
    try:
        wait_for(lambda: _tasks_started(victim) > before or driver.poll() is not None,
                 "a task on w2", timeout_s=300)
        assert driver.poll() is None, \
            f"the backfill ended before w2 ran a task: {driver_log(work)}"
        killed = victim.kill()
        assert killed >= 2  # the worker JVM, its executor JVM (and any Python workers)
        report = driver_result(driver, work)
    finally:
        stop_driver(driver)
        cluster.start_worker(victim)  # the host comes back for the next test
    log = driver_log(work, 100_000)
    assert "Lost executor" in log or "lost worker" in log.lower(), log[-3000:]
    _check_exact(report, backfill, tmp_path, "spark: worker host SIGKILLed mid-backfill",
                 kills=1, processes_killed=killed)


def test_a_worker_cut_off_longer_than_the_heartbeat_timeout(
        cluster: SparkStandalone, seaweed: SeaweedFS, backfill: Table, archive: Path,
        tmp_path: Path) -> None:
    """w1's link down for longer than ``spark.network.timeout`` mid-backfill, then up
    again: its tasks are rescheduled on w2 and no row is lost or repeated."""
    cut = cluster.workers[0]
    work = tmp_path / "driver"
    job = _backfill_job(cluster, seaweed, archive, tmp_path,
                        **{"spark.network.timeout": "12s",
                           "spark.network.timeoutInterval": "4s",
                           "spark.executor.heartbeatInterval": "2s"})
    before = _tasks_started(cut)
    driver = run_driver(work, job)
    try:
        wait_for(lambda: _tasks_started(cut) > before or driver.poll() is not None,
                 "a task on w1", timeout_s=300)
        assert driver.poll() is None, \
            f"the backfill ended before w1 ran a task: {driver_log(work)}"
        cut.link(up=False)
        cut_at = time.monotonic()
        try:
            wait_for(lambda: "no recent heartbeats" in
                     (work / "driver.log").read_text(errors="replace")
                     or driver.poll() is not None, "the driver declaring w1's executor lost",
                     timeout_s=180)
        finally:
            cut.link(up=True)
            down = time.monotonic() - cut_at
        report = driver_result(driver, work)
    finally:
        cut.link(up=True)
        stop_driver(driver)
    _check_exact(report, backfill, tmp_path,
                 "spark: worker link down past spark.network.timeout mid-backfill",
                 cuts=1, seconds_down=round(down, 1))
    wait_for(lambda: cut.address in cluster.alive_workers(), "w1 back in the cluster",
             timeout_s=120)


@pytest.fixture(scope="module")
def connect_server(cluster: SparkStandalone) -> Iterator[ConnectServer]:
    """A Spark Connect server on the master host (its driver there), with Spark and nothing
    of icefloe: the client ships the packed environment as a session artifact, unpacked in
    the session's directory where the Python workers start (``./environment``)."""
    host = cluster.master
    server = ConnectServer(
        host.disk / "connect", host=host.address, port=15002, master=cluster.url,
        python="./environment/bin/python", prefix=host.wrap(()), spark_home=Path("/opt/spark"),
        base_env={"PATH": PATH, "HOME": str(host.disk)},
        conf={"spark.executor.memory": "640m", "spark.executor.cores": "1",
              "spark.cores.max": "2", "spark.python.daemon.module": "pyspark.daemon"})
    with server:
        yield server


def test_reads_through_a_connect_server_on_the_cluster(
        connect_server: ConnectServer, seaweed: SeaweedFS, events: Table,
        archive: Path) -> None:
    with connect_client(connect_server.url) as spark:
        spark.addArtifacts(f"{archive}#environment", archive=True)
        options = {**rest_options(seaweed), "splitSize": "1"}
        got = icefloe.spark.read(spark, "cluster.events", options=options).toArrow()
        changes = icefloe.spark.read(spark, "cluster.events",
                                     options={**options, "changelog": "true"}).toArrow()
    assert sorted_rows(got) == sorted_rows(normalized(events.scan().to_arrow()))
    assert check_every_snapshot(events, changes) == len(events.snapshots())
