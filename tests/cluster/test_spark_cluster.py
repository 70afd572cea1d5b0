"""icefloe on a Spark standalone cluster whose hosts share nothing but the network.

Hosts: ``s3`` (SeaweedFS: S3 and the Iceberg REST catalog), ``master`` (the Spark master),
``w1`` and ``w2`` (Spark workers with Spark installed and nothing of icefloe); the driver
on the client machine ships icefloe as a packed environment (``spark.archives``). Tables
are written by PyIceberg through the REST catalog; rows against PyIceberg's scans.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.table import Table

import icefloe.spark
from icefloe.cli.failures import EXIT_CHECKPOINT, EXIT_OUTPUT
from icefloe.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedFS, weed_binary
from tests.cluster import support
from tests.cluster.envpack import packed_env
from tests.cluster.hosts import CLIENT_ADDRESS, Host, Network, fuse_mounts
from tests.cluster.spark_cluster import (
    PATH,
    SPARK_HOME,
    SparkStandalone,
    driver_conf,
    driver_log,
    driver_result,
    host_env,
    kill_driver,
    run_driver,
    stop_driver,
    wait_for,
)
from tests.conftest import sorted_rows
from tests.helpers.changelog import check_every_snapshot
from tests.helpers.tables import rows
from tests.reliability.spark_harness import sink_files
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
    return support.rest_table(seaweed, "cluster.events", appends=12, rows_each=500,
                              delete_below=10)


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
    options = {**support.rest_options(seaweed), "splitSize": "1", **dict([support.CANARY])}
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
    leaks = support.files_containing([w.disk for w in cluster.workers] + [tmp_path / "events-log"],
                                     support.SECRETS)
    assert leaks == [], "a secret in an executor log or the Spark event log"


@pytest.fixture(scope="module")
def backfill(seaweed: SeaweedFS) -> Table:
    """``cluster.backfill``: 40 appends of 1,000 rows, read as 40 one-file tasks."""
    return support.rest_table(seaweed, "cluster.backfill", appends=40, rows_each=1000)


def _backfill_job(cluster: SparkStandalone, seaweed: SeaweedFS, archive: Path, tmp_path: Path,
                  **conf: str) -> dict[str, Any]:
    (tmp_path / "events-log").mkdir(exist_ok=True)
    return {"master": cluster.url,
            "conf": driver_conf(archive, tmp_path / "events-log", **conf),
            "reads": [{"table": "cluster.backfill", "out": str(tmp_path / "rows.parquet"),
                       "options": {**support.rest_options(seaweed), "splitSize": "1"}}]}


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
    support.record(scenario, rows_checked=expected.num_rows, rows_lost=sum((want - have).values()),
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


def _stream_job(seaweed: SeaweedFS, name: str, checkpoint: str, stop: Path,
                **extra: Any) -> dict[str, Any]:
    """A stream of ``cluster.<name>`` into the S3 sink. Through Connect (``remote``) the
    catalog "lake" and the sink's keys are the server's (README: no credential in a
    Connect plan); a classic driver passes them as options and in the sink's closure."""
    connect = "remote" in extra
    catalog = {"catalog": "lake"} if connect else support.rest_options(seaweed)
    return {"table": f"cluster.{name}", "checkpoint": checkpoint, "stop_file": str(stop),
            "options": {**catalog, "maxFilesPerTrigger": "1", "startingVersion": "earliest"},
            "sink": support.sink_spec(seaweed, f"sink/{name}", keys=not connect), **extra}


def _run_killed_stream(seaweed: SeaweedFS, name: str, start: Any, kill: Any,
                       scenario: str, logs: Any, figures: dict[str, Any] | None = None) -> None:
    """A continuous stream of ``cluster.<name>`` (6 snapshots, one file per micro-batch)
    into the S3 sink; the driver killed once two batches are in S3; 2 snapshots appended
    while it is down; restarted (``start``), it resumes from the checkpoint on its host's
    disk; one more snapshot appended while it runs. Every id exactly once. ``figures``
    (filled by ``kill`` if it likes) are recorded with the scenario's."""
    table = support.rest_table(seaweed, f"cluster.{name}", appends=6, rows_each=400)
    first = start()
    wait_for(lambda: support.sink_objects(seaweed, f"sink/{name}") >= 2 or first.poll() is not None,
             f"two micro-batches of {name} in S3", timeout_s=300)
    assert first.poll() is None, f"the first driver ended before it was killed: {logs()}"
    in_s3 = len(set(support.sink_ids(seaweed, f"sink/{name}")))
    killed = kill(first)
    assert in_s3 < 2400, "the stream had finished before the kill: nothing left to resume"
    for i in range(6, 8):
        table.append(rows(400, start=i * 400))
    second = start()
    wait_for(lambda: set(support.sink_ids(seaweed, f"sink/{name}")) >= set(range(3200))
             or second.poll() is not None, f"{name}: the 8 snapshots after the restart",
             timeout_s=300)
    assert second.poll() is None, f"the restarted driver ended early: {logs()}"
    table.append(rows(400, start=3200))
    wait_for(lambda: set(support.sink_ids(seaweed, f"sink/{name}")) >= set(range(3600))
             or second.poll() is not None, f"{name}: a snapshot committed while it runs",
             timeout_s=180)
    got = support.sink_ids(seaweed, f"sink/{name}")
    oracle = sorted(table.refresh().scan().to_arrow().column("id").to_pylist())
    support.record(scenario, rows_checked=len(oracle), rows_lost=len(set(oracle) - set(got)),
                   duplicates=len(got) - len(set(got)), kills=1, processes_killed=killed,
                   rows_in_s3_at_kill=in_s3, **(figures or {}))
    assert second.poll() is None
    assert sorted(got) == oracle, "rows lost or repeated across the driver's restart"


def test_classic_stream_driver_killed_mid_stream_resumes_exactly_once(
        cluster: SparkStandalone, seaweed: SeaweedFS, archive: Path, tmp_path: Path) -> None:
    """The classic driver (Python + JVM, this machine) SIGKILLed mid-stream and restarted:
    it resumes from the checkpoint on its own disk; the S3 sink holds every id once."""
    work = tmp_path / "driver"
    (tmp_path / "events-log").mkdir()
    job = _stream_job(seaweed, "stream_classic", str(work / "ckpt"), tmp_path / "stop",
                      master=cluster.url, conf=driver_conf(archive, tmp_path / "events-log"))
    drivers: list[Any] = []

    def start() -> Any:
        drivers.append(run_driver(work, job, "spark_stream_job.py"))
        return drivers[-1]

    try:
        _run_killed_stream(seaweed, "stream_classic", start, kill_driver,
                           "spark classic: driver SIGKILLed mid-stream, restarted from the "
                           "checkpoint on its disk, S3 sink", lambda: driver_log(work))
        (tmp_path / "stop").touch()
        assert "stopped" in driver_result(drivers[-1], work)
    finally:
        for driver in drivers:
            stop_driver(driver)
    assert (work / "ckpt" / "commits").is_dir()
    leaks = support.files_containing([w.disk for w in cluster.workers] + [tmp_path / "events-log"],
                                     support.SECRETS)
    assert leaks == [], "a secret in an executor log or the Spark event log"



def _start_driver_host(host: Host, seaweed: SeaweedFS, filer_path: str, job: dict[str, Any]
                       ) -> subprocess.Popen[bytes]:
    """On ``host``, in one new mount namespace: SeaweedFS's FUSE client (``weed mount``,
    the README's command) mounts ``filer_path`` of the filer over the network at
    :data:`MOUNT`, then the classic driver (``spark_stream_job.py``, icefloe's packed
    environment installed at ``/opt/icefloe/env``) runs with its checkpoint there. Both
    are processes of the host: killing the host kills the mount too. Output to
    ``driver.log`` on the host's disk."""
    filer = f"{seaweed.host}:{seaweed.ports['filer.port']}.{seaweed.ports['filer.port.grpc']}"
    mount = support.readme_block("weed mount", {
        "weed mount": "/opt/icefloe/weed mount", "s3:8888.18888": filer,
        "/buckets/warehouse/spark-checkpoints/events": filer_path, "/mnt/spark-ckpt": MOUNT})
    script = "\n".join([
        "set -e", f"mkdir -p {MOUNT}",
        f"{mount.strip()} > /srv/host/weed-mount.log 2>&1 &",
        "i=0",  # wait for the mount (a condition, bounded: 60 s)
        f"until grep -q ' {MOUNT} fuse' /proc/self/mounts; do",
        "  i=$((i+1)); [ $i -le 600 ] || { echo 'weed mount did not mount' >&2; exit 97; }",
        "  sleep 0.1", "done",
        "ln -sfn /opt/icefloe/env environment", "mkdir -p events-log",
        'exec /opt/icefloe/env/bin/python /opt/icefloe/job/spark_stream_job.py "$1"'])
    env = host_env(host, PYTHONPATH="/opt/pylib", PYSPARK_PYTHON="./environment/bin/python")
    return host.popen(["sh", "-c", script, "sh", json.dumps(job)], "driver.log", env)


def _commits(objects: list[str], prefix: str) -> list[str]:
    """The commit files of a checkpoint among its objects (not Hadoop's ``.crc`` or
    temporary files)."""
    return [p for p in objects if p.startswith(f"{prefix}/commits/")
            and p.rsplit("/", 1)[1].isdigit()]


MOUNT = "/tmp/icf27-ckpt"
"""Where the driver host mounts its checkpoint (a tmpfs of its own mount namespace)."""


def test_classic_stream_checkpoint_in_s3_through_a_fuse_mount_driver_host_killed(
        cluster: SparkStandalone, seaweed: SeaweedFS, archive: Path, tmp_path: Path) -> None:
    """A classic driver on a host of its own whose checkpoint is in S3: the bucket's
    ``spark-checkpoints/fuse`` mounted with ``weed mount`` over the network on that host.
    The host killed whole mid-stream (driver JVM and Python, the FUSE client), brought
    back with an empty disk and a new mount namespace: the new driver resumes the same
    query (its id is the checkpoint's) and the S3 sink holds every id once; the
    checkpoint's files are objects of the bucket, read through the S3 API."""
    software = tmp_path / "software"  # installed on the host, as Spark is: not its disk
    (software / "env").mkdir(parents=True)
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(software / "env")], check=True)
    weed = weed_binary()
    assert weed is not None
    shutil.copy2(weed, software / "weed")
    (software / "job").mkdir()
    shutil.copy2(Path(__file__).with_name("spark_stream_job.py"), software / "job")
    host = cluster.net.add("sdrv", {"/opt/spark": str(SPARK_HOME), "/opt/icefloe": str(software),
                                    "/opt/pylib/pyspark": str(SPARK_HOME),
                                    "/opt/archives": str(archive.parent)})
    prefix = "spark-checkpoints/fuse"
    conf = driver_conf(Path("/opt/archives") / archive.name, host.disk / "events-log",
                       **{"spark.driver.host": host.address,
                          "spark.driver.bindAddress": host.address})
    job = _stream_job(seaweed, "stream_fuse", MOUNT, host.disk / "stop", master=cluster.url,
                      conf=conf)
    filer_path = f"/buckets/{seaweed.bucket}/{prefix}"
    logs: list[str] = []
    figures: dict[str, Any] = {}

    def log() -> str:
        return ("\n".join([*logs, host.log("driver.log")])[-6000:]
                + host.log("weed-mount.log")[-2000:])

    def kill(first: Any) -> int:
        count = host.kill()
        assert first.poll() is not None
        # what the killed FUSE client had flushed: a batch's sink object is written before
        # its commit file, so batches 0..n-1 in the sink mean commits 0..n-2 were closed
        objects = support.object_paths(seaweed, prefix)
        figures.update(
            sink_batches_at_kill=support.sink_objects(seaweed, "sink/stream_fuse"),
            checkpoint_commits_in_s3_at_kill=len(_commits(objects, prefix)),
            checkpoint_temp_objects_at_kill=sum(1 for p in objects if p.endswith(".tmp")))
        assert figures["checkpoint_commits_in_s3_at_kill"] >= figures["sink_batches_at_kill"] - 1
        logs.append(host.log("driver.log"))
        shutil.rmtree(host.disk)  # the host comes back with an empty disk
        host.disk.mkdir()
        return count

    try:
        _run_killed_stream(seaweed, "stream_fuse",
                           lambda: _start_driver_host(host, seaweed, filer_path, job), kill,
                           "spark classic: driver host (driver, weed mount) SIGKILLed "
                           "mid-stream; new host process set, empty disk, new mount of the "
                           "S3 checkpoint", log, figures)
        assert not list(host.disk.rglob("commits")), "a checkpoint on the host's disk"
        (host.disk / "stop").touch()
        second = host.processes[-1]
        wait_for(lambda: second.poll() is not None, "the restarted driver to stop",
                 timeout_s=120, logs=log)
        assert second.returncode == 0, log()
    finally:
        host.kill()
    started = [line for text in (logs[0], host.log("driver.log"))
               for line in text.splitlines() if line.startswith('{"started"')]
    assert len(started) == 2 and started[0] == started[1], f"not resumed: {started}"
    objects = support.object_paths(seaweed, prefix)
    assert f"{prefix}/metadata" in objects
    assert len(_commits(objects, prefix)) >= support.sink_objects(seaweed, "sink/stream_fuse")
    assert any(p.startswith(f"{prefix}/offsets/") for p in objects)
    assert host.pids() == [], "a process of the driver host (weed mount) survived"
    assert fuse_mounts() == [], "a FUSE mount of the tier in this machine's namespace"


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def readme_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's recipe run as written (uv, venv-pack), in a directory of its own, with
    icefloe from this checkout in place of the package index's; returns the directory."""
    here = tmp_path_factory.mktemp("readme-env")
    code = support.readme_block("venv-pack", {"'icefloe'": f"'{ROOT}'"})
    base = Path(getattr(sys, "_base_executable", sys.executable)).parent
    uv = shutil.which("uv") or str(base / "uv")
    path = os.pathsep.join([str(base), str(Path(uv).parent), PATH])
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + code], cwd=here,
                          env={**env, "PATH": path},
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (here / "icefloe-env.tar.gz").stat().st_size > 10_000_000
    return here


def _readme_env(seaweed: SeaweedFS) -> dict[str, str]:
    """A user's driver environment: PyIceberg's catalog "lake" and the sink's S3 keys."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPARK_", "PYSPARK_", "PYICEBERG_", "AWS_"))}
    return {**env, **support.catalog_env("lake", seaweed.rest_properties()),
            "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "SPARK_LOCAL_IP": CLIENT_ADDRESS}


def test_readme_cluster_recipe_on_a_classic_driver(
        cluster: SparkStandalone, seaweed: SeaweedFS, events: Table, readme_archive: Path,
        tmp_path: Path) -> None:
    """The README's cluster recipe as a user runs it: the archive its ``sh`` block built,
    the session block against the standalone master, the catalog in the driver's
    environment, then the streaming block (checkpoint on the driver's disk, S3 sink by
    batch id). Rows against PyIceberg's scan."""
    shutil.copy2(readme_archive / "icefloe-env.tar.gz", tmp_path)
    (tmp_path / "environment").symlink_to(sys.prefix)  # the driver's own environment
    host = seaweed.s3_endpoint
    script = "\n".join([
        support.readme_block("spark://master:7077", {"spark://master:7077": cluster.url,
                                                     "db.events": "cluster.events"}),
        support.readme_block("foreachBatch", {"http://s3:8333": host,
                                              "db.events": "cluster.events"}),
    ])
    (tmp_path / "recipe.py").write_text(script)
    conf = f"spark.driver.host={CLIENT_ADDRESS}"
    done = subprocess.run([sys.executable, "recipe.py"], cwd=tmp_path,
                          env={**_readme_env(seaweed), "PYSPARK_SUBMIT_ARGS":
                               f"--conf {conf} pyspark-shell"},
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    oracle = sorted(events.scan().to_arrow().column("id").to_pylist())
    assert done.stdout.split()[0] == str(len(oracle)) == "5990"
    assert sorted(support.sink_ids(seaweed, "events-out")) == oracle
    assert (tmp_path / "events-ckpt" / "commits").is_dir()


# Spark Connect: from here on the Connect server's application holds the cluster's cores


@pytest.fixture(scope="module")
def connect_server(cluster: SparkStandalone, seaweed: SeaweedFS) -> Iterator[ConnectServer]:
    """A Spark Connect server on the master host (its driver there), with Spark and nothing
    of icefloe: the client ships the packed environment as a session artifact, unpacked in
    the session's directory where the Python workers start (``./environment``). The
    catalog ``lake`` (PyIceberg's environment variables) and the S3 keys of a
    ``foreachBatch`` sink are configured in the server's environment, as the README says."""
    host = cluster.master
    server = _connect_on(host, cluster, seaweed, "connect", 15002, "./environment/bin/python")
    with server:
        yield server


def _connect_on(host: Host, cluster: SparkStandalone, seaweed: SeaweedFS, name: str,
                port: int, python: str, **conf: str) -> ConnectServer:
    """A Connect server on ``host`` (not started) whose Python workers run ``python``."""
    return ConnectServer(
        host.disk / name, host=host.address, port=port, master=cluster.url,
        python=python, prefix=host.wrap(()), spark_home=Path("/opt/spark"),
        base_env={"PATH": PATH, "HOME": str(host.disk)},
        env={**support.catalog_env("lake", seaweed.rest_properties()),
             "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY},
        conf={"spark.executor.memory": "640m", "spark.executor.cores": "1",
              "spark.cores.max": "2", "spark.python.daemon.module": "pyspark.daemon", **conf})


def test_reads_through_a_connect_server_on_the_cluster(
        connect_server: ConnectServer, events: Table, archive: Path) -> None:
    """Bounded and changelog reads through Connect, the catalog "lake" configured on the
    server's host only (README: no credential in a Connect plan, which the server may log
    whole): the rows against PyIceberg's scans."""
    with connect_client(connect_server.url) as spark:
        spark.addArtifacts(f"{archive}#environment", archive=True)
        options = {"catalog": "lake", "splitSize": "1"}
        got = icefloe.spark.read(spark, "cluster.events", options=options).toArrow()
        changes = icefloe.spark.read(spark, "cluster.events",
                                     options={**options, "changelog": "true"}).toArrow()
    assert sorted_rows(got) == sorted_rows(normalized(events.scan().to_arrow()))
    assert check_every_snapshot(events, changes) == len(events.snapshots())


def test_readme_cluster_recipe_through_connect(
        connect_server: ConnectServer, seaweed: SeaweedFS, events: Table,
        readme_archive: Path, tmp_path: Path) -> None:
    """The README's Connect block: the archive the README's recipe built as a session
    artifact, the catalog configured on the server's host only."""
    shutil.copy2(readme_archive / "icefloe-env.tar.gz", tmp_path)
    script = "\n".join([
        "import icefloe.spark",
        support.readme_block("sc://spark-connect:15002", {"sc://spark-connect:15002":
                                                          connect_server.url,
                                                          "db.events": "cluster.events"}),
    ])
    (tmp_path / "recipe.py").write_text(script)
    env = {k: v for k, v in _readme_env(seaweed).items() if not k.startswith("PYICEBERG_")}
    done = subprocess.run([sys.executable, "recipe.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    oracle = sorted(events.scan().to_arrow().column("id").to_pylist())
    assert done.stdout.split()[0] == str(len(oracle))


@pytest.fixture(scope="module")
def installed_connect(cluster: SparkStandalone, connect_server: ConnectServer,
                      seaweed: SeaweedFS, archive: Path) -> Iterator[ConnectServer]:
    """A Connect server on ``master`` whose Python workers run icefloe's environment
    installed on every host at one path (``/srv/host/icefloe-env``), as the README says
    for streams, listening on every address of its host (``foreachBatch``). The artifact
    server stops first: its application holds the cores."""
    connect_server.stop()
    for host in (cluster.master, *cluster.workers):
        (host.disk / "icefloe-env").mkdir(exist_ok=True)
        subprocess.run(["tar", "-xzf", str(archive), "-C", str(host.disk / "icefloe-env")],
                       check=True)
    # a foreachBatch function's Python connects back to sc://localhost:<port>: the server
    # listens on every address of its host, not only the one clients use
    with _connect_on(cluster.master, cluster, seaweed, "connect-installed", 15003,
                     "/srv/host/icefloe-env/bin/python",
                     **{"spark.connect.grpc.binding.address": "0.0.0.0"}) as server:
        yield server


def test_connect_stream_server_killed_mid_stream_resumes_exactly_once(
        cluster: SparkStandalone, installed_connect: ConnectServer, seaweed: SeaweedFS,
        tmp_path: Path) -> None:
    """A continuous stream through a Connect server on host ``master``, its checkpoint on
    that host's disk; the server (the driver: its JVM and Python workers) SIGKILLed
    mid-stream and started again on the same host; a new client starts the query again
    with the same checkpoint: the S3 sink holds every id once.

    A streaming query runs in a clone of the client's session, whose directory lacks the
    session's artifacts (Spark 4.3: its Python workers fail to start
    ``./environment/bin/python``), so this server has icefloe's environment installed on
    every host (:func:`installed_connect`)."""
    server = installed_connect
    work = tmp_path / "client"
    checkpoint = cluster.master.disk / "stream-ckpt"
    job = _stream_job(seaweed, "stream_connect", str(checkpoint), tmp_path / "stop",
                      remote=server.url)
    clients: list[Any] = []

    def start() -> Any:
        clients.append(run_driver(work, job, "spark_stream_job.py"))
        return clients[-1]

    def kill(client: Any) -> int:
        count = server.kill()
        stop_driver(client)  # its server is gone
        server.start()
        return count

    try:
        _run_killed_stream(seaweed, "stream_connect", start, kill,
                           "spark connect: server (driver) SIGKILLed mid-stream, restarted "
                           "from the checkpoint on its host's disk, S3 sink",
                           lambda: driver_log(work) + server.tail())
        (tmp_path / "stop").touch()
        assert "stopped" in driver_result(clients[-1], work)
    finally:
        for client in clients:
            stop_driver(client)
    assert (checkpoint / "commits").is_dir()


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "icefloe.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_cli_remote_refuses_paths_the_server_does_not_share_with_this_machine(
        installed_connect: ConnectServer, events: Table, tmp_path: Path) -> None:
    """``icefloe read|stream --remote`` against the Connect server on host ``master``,
    from this machine: a ``--to`` directory that exists only here is written by the
    server's executors on their own disks, so the command fails with an OutputError
    naming it and the fix (nothing created here); a checkpoint the server's host cannot
    create fails with a CheckpointError."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPARK_", "PYSPARK_", "PYICEBERG_", "AWS_"))}
    base = ["--catalog", "lake", "--engine", "spark", "--remote", installed_connect.url]
    done = _cli(["read", "cluster.events", *base, "--to", str(tmp_path / "out")], tmp_path, env)
    assert done.returncode == EXIT_OUTPUT, done.stderr[-3000:]
    assert done.stderr.startswith(f"error: OutputError: --to {tmp_path}: the Spark Connect "
                                  f"server {installed_connect.url} wrote there on its own hosts' "
                                  "disks, which this machine does not see"), done.stderr
    assert "mounted at the same path" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing left here"

    blocker = installed_connect.root / "a-file"  # on the master host's disk
    blocker.write_text("not a directory")
    done = _cli(["stream", "cluster.events", *base, "--available-now",
                 "--checkpoint", str(blocker / "ckpt")], tmp_path, env)
    assert done.returncode == EXIT_CHECKPOINT, done.stderr[-3000:]
    assert done.stderr.startswith(f"error: CheckpointError: --checkpoint {blocker / 'ckpt'}: "
                                  "the Spark Connect server"), done.stderr


def test_cli_remote_writes_to_a_filesystem_the_cluster_shares(
        installed_connect: ConnectServer, seaweed: SeaweedFS) -> None:
    """``icefloe read|stream --remote`` succeeding as the README's ``--remote`` section
    says it can: ``--to``, ``--checkpoint`` and the sink on a filesystem mounted at the
    same path on this machine and every host of the cluster (here ``/var/tmp``, which no
    host hides: a stand-in for NFS), the catalog configured on the server only. The rows
    this machine finds there equal PyIceberg's scan."""
    table = support.rest_table(seaweed, "cluster.shared", appends=3, rows_each=200)
    oracle = sorted(table.scan().to_arrow().column("id").to_pylist())
    shared = Path(tempfile.mkdtemp(prefix="icf27-shared-", dir="/var/tmp"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPARK_", "PYSPARK_", "PYICEBERG_", "AWS_"))}
    base = ["--catalog", "lake", "--engine", "spark", "--remote", installed_connect.url]
    try:
        done = _cli(["read", "cluster.shared", *base, "--to", str(shared / "out")], shared, env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "wrote 600 rows" in done.stdout, done.stdout
        assert sorted(pq.read_table(shared / "out").column("id").to_pylist()) == oracle
        done = _cli(["stream", "cluster.shared", *base, "--available-now",
                     "--checkpoint", str(shared / "ckpt"), "--sink", f"parquet:{shared / 's'}"],
                    shared, env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert sorted(i for f in sink_files(shared / "s")
                      for i in pq.read_table(f).column("id").to_pylist()) == oracle
        assert (shared / "ckpt" / "commits").is_dir()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_no_secret_in_any_spark_hosts_logs(cluster: SparkStandalone,
                                           installed_connect: ConnectServer) -> None:
    """After every Spark test of the module (classic drivers, both Connect servers, whose
    environment holds the catalog's credential and the S3 keys): no secret in the
    executors' logs (the workers' work directories), the workers' and the master's logs,
    or the Connect servers' logs."""
    roots = [w.disk / "work" for w in cluster.workers]
    logs = [*(w.disk / "worker.log" for w in cluster.workers), cluster.master.disk / "master.log",
            *cluster.master.disk.glob("connect*/*.log"), installed_connect.log]
    found = support.files_containing(roots, support.SECRETS)
    found += [line for p in logs for line in support.lines_containing(p, support.SECRETS)]
    assert len(logs) >= 5 and all(p.exists() for p in logs)
    assert found == [], "a secret in a Spark host's log"

