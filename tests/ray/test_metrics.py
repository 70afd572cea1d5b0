"""A Ray stream's metrics: ``RayStream.metrics()`` and Ray's own metrics endpoint.

On a real local Ray (its metrics agent, the ``ray-metrics`` extra): the enumerator actor
exports through ``ray.util.metrics``; a test holds a known lag and reads it back from
the actor and from a scrape of Ray's endpoint (``ray_`` prefix), then checks the
counters the reader actors reported against the items received.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyiceberg.catalog.sql import SqlCatalog

import icefloe.ray
from tests.helpers.flaky_io import data_faults_catalog, faults_left
from tests.helpers.tables import make_table, rows
from tests.helpers.waiting import wait_for

from .conftest import RAY_WARNINGS

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300), *RAY_WARNINGS]
APPENDS = (4, 6)


TABLE = "db.ray_metrics"
"""A table name no other test's stream uses: Ray's counters live as long as the test
session's Ray, and sum every actor's reports with the same labels."""


def ray_metric(port: int, name: str) -> float | None:
    """``name``'s value for table :data:`TABLE` on the endpoint at ``port`` (None: not
    there yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return None  # the agent is still starting
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("table") == TABLE:
                return sample.value
    return None


def test_a_known_lag_reaches_ray_metrics(catalog: SqlCatalog, tmp_path: Path,
                                         ray_local: None) -> None:
    import ray

    port = ray._private.worker.global_worker.node.metrics_export_port
    assert port and port > 0, "Ray runs without a metrics export port"
    table = make_table(catalog, TABLE)
    table.append(rows(10))
    stream = icefloe.ray.RayStream(TABLE, catalog=catalog,
                                   options={"pollIntervalMs": "50"},
                                   checkpoint=str(tmp_path / "ckpt"), num_readers=1,
                                   reader_num_cpus=0.25, metrics_interval_s=0.5,
                                   metrics_port=0)
    with stream:
        items = iter(stream)
        first = next(items)
        assert first.batch.num_rows == 10
        first.ack(wait=True)
        wait_for(lambda: stream.metrics().lag_snapshots == 0, "the scan committed")
        start = 0
        for n in APPENDS:
            table.append(rows(n, start=100 + start))
            start += n
        table.refresh()
        head = table.current_snapshot()
        assert head is not None
        held = wait_for(lambda: (m := stream.metrics()).head_snapshot_id
                        == head.snapshot_id and m, "the actor to see the head")
        assert (held.lag_snapshots, held.lag_records) == (len(APPENDS), sum(APPENDS))
        assert held.healthy and held.enumeration_alive
        # each gauge reaches Ray's endpoint on its own export (a scrape may show one
        # gauge's new value beside another's old one): wait for both
        wait_for(lambda: (ray_metric(port, "ray_icefloe_lag_records"),
                          ray_metric(port, "ray_icefloe_lag_snapshots"))
                 == (sum(APPENDS), len(APPENDS)), "Ray's endpoint to show the held lag")
        # the driver's own Prometheus endpoint serves the actor's metrics too
        assert stream.metrics_address is not None
        driver_port = stream.metrics_address[1]
        assert ray_metric(driver_port, "icefloe_lag_records") == sum(APPENDS)
        assert ray_metric(driver_port, "icefloe_healthy") == 1

        got, batches = 10, 1
        while got < 10 + sum(APPENDS):
            item = next(items)
            got += item.batch.num_rows
            batches += 1
            item.ack(wait=True)
        done = wait_for(lambda: (m := stream.metrics()).lag_snapshots == 0
                        and m.rows == got and m, "the lag to drain, the rows reported")
        assert done.batches == batches and done.reader_busy_seconds > 0
        wait_for(lambda: ray_metric(port, "ray_icefloe_rows_total") == got,
                 "Ray's rows counter")
        wait_for(lambda: ray_metric(port, "ray_icefloe_lag_records") == 0,
                 "Ray's lag gauge to drain")
    assert stream.metrics().rows == got  # the last metrics, after stop


def test_a_reader_actors_retried_read_is_counted(tmp_path: Path, ray_local: None) -> None:
    """A data file read fails twice in the reader actor (a transient fault injected by
    the table's FileIO, a budget shared across processes): the actor re-reads the split,
    every row arrives once, and the enumerator counts two retries of operation ``read``
    (``RayStream.metrics()`` and the Prometheus endpoint)."""
    faults = tmp_path / "faults"
    catalog = data_faults_catalog(tmp_path, faults)
    table = make_table(catalog, "db.ray_read_faults")
    table.append(rows(12))
    expected = sorted(table.scan().to_arrow().column("id").to_pylist())
    faults.write_text("2")
    stream = icefloe.ray.RayStream(
        "db.ray_read_faults", catalog=catalog,
        options={"pollIntervalMs": "50", "maxAttempts": "3", "retryBackoffMs": "10"},
        num_readers=1, reader_num_cpus=0.25, available_now=True, metrics_port=0)
    ids = []
    with stream:
        for item in stream:
            ids.extend(item.batch.column("id").to_pylist())
            item.ack(wait=True)
        counted = wait_for(lambda: sum(v for k, v in stream.metrics().retries.items()
                                       if k[0] == "read") == 2 and stream.metrics(),
                           "the reader's retries to reach the enumerator")
        host, port = stream.metrics_address
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    assert faults_left(str(faults)) == 0, "the faults were not hit"
    assert sorted(ids) == expected, "each row once"
    assert not any(k[0] == "read" for k in counted.errors)
    scraped = {tuple(sorted(s.labels.items())): s.value
               for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "icefloe_retries_total" and s.labels.get("operation") == "read"}
    assert sum(scraped.values()) == 2.0, scraped
