"""A stream's metrics, read for their values: ``stream.metrics()`` and the Prometheus
endpoint (a real HTTP scrape) on real tables in a real SQLite catalog.

Oracles the stream did not compute: the record counts the test appended, PyIceberg's
own scan plans (files and bytes of the snapshots behind), the snapshot timestamps
PyIceberg committed, the checkpoint file on disk, the items the test received.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from icefloe import DataFileError, IcebergSource
from icefloe.coordinator import SplitAssigner
from icefloe.coordinator.metrics import METRICS, StreamMetrics
from icefloe.coordinator.recorder import MetricsRecorder, retry_budget_s
from icefloe.metrics.prometheus import render
from icefloe.retry import RetryPolicy
from icefloe.state.store import CURRENT_NAME
from tests.helpers.flaky_io import data_faults_catalog, faults_left
from tests.helpers.tables import make_table, rows
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

APPENDS = (5, 7, 11)  # records of the K = 3 snapshots held behind the committed position


def scrape(address: tuple[str, int], path: str = "/metrics") -> tuple[int, str]:
    host, port = address
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``(sample name, sorted labels) -> value`` of a Prometheus text exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def files_between(table: Table, older: int, newer: int) -> tuple[int, int]:
    """PyIceberg's oracle: ``(files, bytes)`` in ``newer``'s scan and not in ``older``'s."""
    before = {t.file.file_path for t in table.scan(snapshot_id=older).plan_files()}
    added = [t.file for t in table.scan(snapshot_id=newer).plan_files()
             if t.file.file_path not in before]
    return len(added), sum(f.file_size_in_bytes for f in added)


@pytest.fixture
def table(catalog: SqlCatalog) -> Table:
    table = make_table(catalog)
    table.append(rows(10))
    return table


def test_a_known_lag_reads_back_from_metrics_and_the_endpoint(
        catalog: SqlCatalog, table: Table, tmp_path: Path) -> None:
    src = IcebergSource("db.events", catalog=catalog, options={"pollIntervalMs": "50"})
    stream = src.stream(checkpoint=str(tmp_path / "ckpt"), parallelism=1,
                        checkpoint_interval_s=0, metrics_port=0)
    with stream:
        items = iter(stream)
        first = next(items)
        assert first.batch.num_rows == 10 and first.last
        first.ack()
        base = table.current_snapshot()
        assert base is not None
        wait_for(lambda: stream.metrics().lag_snapshots == 0, "the scan committed")

        start = 0
        for n in APPENDS:  # held: nothing of these is acknowledged
            table.append(rows(n, start=1000 + start))
            start += n
        table.refresh()
        head = table.current_snapshot()
        assert head is not None
        behind = [s for s in table.snapshots() if s.sequence_number > base.sequence_number]
        oldest_ms = min(s.timestamp_ms for s in behind)
        files, nbytes = files_between(table, base.snapshot_id, head.snapshot_id)

        before = time.time()
        metrics = wait_for(lambda: (m := stream.metrics()).head_snapshot_id
                           == head.snapshot_id and m, "the stream to see the head")
        after = time.time()
        assert metrics.lag_snapshots == len(APPENDS)
        assert metrics.lag_records == sum(APPENDS)
        assert (metrics.lag_files, metrics.lag_bytes) == (files, nbytes)
        assert before - oldest_ms / 1000 <= metrics.lag_seconds <= after - oldest_ms / 1000
        assert metrics.committed_snapshot_id == base.snapshot_id
        assert metrics.healthy and metrics.enumeration_alive and not metrics.health_reason

        # the same lag through a real scrape of the endpoint
        assert stream.metrics_address is not None
        status, text = scrape(stream.metrics_address)
        assert status == 200
        got = samples(text)
        label = (("table", "db.events"),)
        assert got[("icefloe_lag_snapshots", label)] == len(APPENDS)
        assert got[("icefloe_lag_records", label)] == sum(APPENDS)
        assert got[("icefloe_lag_files", label)] == files
        assert got[("icefloe_lag_bytes", label)] == nbytes
        assert got[("icefloe_healthy", label)] == 1
        assert scrape(stream.metrics_address, "/healthz") == (200, "ok\n")

        # deliver and acknowledge everything: the lag drains, the counters follow
        delivered, batches, finished = 10, 1, 1
        while delivered < 10 + sum(APPENDS):
            item = next(items)
            delivered += item.batch.num_rows
            batches += 1
            finished += item.last
            item.ack()
        done = wait_for(lambda: (m := stream.metrics()).lag_snapshots == 0 and m,
                        "the lag to drain")
        assert done.lag_records == done.lag_files == done.lag_bytes == 0
        assert done.lag_seconds == 0.0
        assert (done.rows, done.batches) == (delivered, batches)
        assert done.finished_splits == finished == done.discovered_splits
        assert done.committed_snapshot_id == head.snapshot_id
        assert done.polls > 0 and done.poll_seconds > 0
        assert done.reader_busy_seconds > 0
        assert done.checkpoints >= 1 + finished  # the start, then every ack (interval 0)
        assert done.checkpoint_bytes == (tmp_path / "ckpt" / CURRENT_NAME).stat().st_size
        got = samples(scrape(stream.metrics_address)[1])
        assert got[("icefloe_rows_total", label)] == delivered
        assert got[("icefloe_batches_total", label)] == batches
        assert got[("icefloe_finished_splits_total", label)] == finished
        assert got[("icefloe_lag_records", label)] == 0
        address = stream.metrics_address
    with pytest.raises(OSError):  # stopped with the stream
        scrape(address)


def test_the_endpoint_exports_every_documented_metric() -> None:
    """Every entry of METRICS is in the exposition, with its type and the table label."""
    metrics = StreamMetrics(table="db.t", retries={("refresh", "OSError"): 3},
                            errors={("plan", "DataFileError"): 1},
                            checkpoint_age_seconds=2.5)
    families = {f.name: f for f in text_string_to_metric_families(render(metrics))}
    for spec in METRICS:
        family = families[spec.name.removesuffix("_total")]
        assert family.type == spec.kind, spec.name
        assert family.documentation == spec.help
    got = samples(render(metrics))
    assert got[("icefloe_retries_total", (("error", "OSError"), ("operation", "refresh"),
                                          ("table", "db.t")))] == 3
    assert got[("icefloe_errors_total", (("error", "DataFileError"), ("operation", "plan"),
                                         ("table", "db.t")))] == 1
    assert got[("icefloe_checkpoint_age_seconds", (("table", "db.t"),))] == 2.5
    # no checkpoint yet: the age is absent, not 0
    assert "icefloe_checkpoint_age_seconds{" not in render(StreamMetrics(table="db.t"))


def test_pending_totals_are_the_records_and_bytes_of_the_waiting_splits(
        catalog: SqlCatalog, table: Table) -> None:
    table.append(rows(25, start=100))
    splits = list(IcebergSource("db.events", catalog=catalog).plan())
    assigner = SplitAssigner(max_pending=len(splits))
    for split in splits:
        assert assigner.offer(split, threading.Event())
    records = sum(t.file.record_count for t in table.scan().plan_files())
    assert assigner.pending_totals() == (len(splits), records, sum(s.length for s in splits))
    first = assigner.request("r1")
    assert first.split is not None
    assert assigner.assigned == 1
    assert assigner.pending_totals()[:2] == (len(splits) - 1,
                                             records - first.split.record_count)
    assert assigner.acked(first.split.split_id, None) is True
    assert assigner.acked(first.split.split_id, None) is False  # once per split
    assert assigner.assigned == 0


def test_health_follows_failures_and_the_age_of_the_last_poll() -> None:
    retry = RetryPolicy(max_attempts=4, backoff_ms=200)
    assert retry_budget_s(retry) == pytest.approx(0.2 + 0.4 + 0.8)
    recorder = MetricsRecorder(poll_interval_s=1.0, retry=retry)
    assert recorder.stale_after_s == pytest.approx(2.0 + 1.4)
    start = recorder.last_poll_ok
    recorder.set_phase("idle")
    assert recorder.health(start + 3.0) == (True, "")
    healthy, reason = recorder.health(start + 3.5)
    assert not healthy and "no successful poll for 3.5s" in reason
    recorder.set_phase("handing")  # waiting for readers is backpressure, not staleness
    assert recorder.health(start + 60) == (True, "")
    recorder.failed("refresh", OSError("catalog unreachable"), True)
    healthy, reason = recorder.health()
    assert not healthy and "refresh failed: OSError: catalog unreachable" in reason
    recorder.polled(0.01)
    assert recorder.health() == (True, "")
    assert recorder.values()["retries"] == {("refresh", "OSError"): 1}
    recorder.ended(RuntimeError("boom"))
    healthy, reason = recorder.health()
    assert not healthy and reason == "enumeration failed: RuntimeError: boom"
    assert recorder.values()["errors"] == {("enumeration", "RuntimeError"): 1}
    assert recorder.values()["enumeration_alive"] is False


ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_documents_every_metric_with_its_type_and_meaning() -> None:
    documented = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("| `icefloe_"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            documented[cells[0].strip("`").split("{")[0]] = (cells[1].strip("`"), cells[2],
                                                             cells[3])
    assert documented == {s.name: (s.field, s.kind, s.help) for s in METRICS}
    fields = {f for f in StreamMetrics.__dataclass_fields__ if f not in (
        "table", "head_snapshot_id", "committed_snapshot_id",
        "seconds_since_last_successful_poll", "health_reason")}
    assert fields == {s.field for s in METRICS}  # every value exported, or said why not


def test_the_grafana_dashboard_uses_only_exported_names() -> None:
    import json
    import re

    dashboard = json.loads((ROOT / "docs" / "grafana" / "icefloe-stream.json").read_text())
    exported = {s.name for s in METRICS}
    used = set()
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(re.findall(r"icefloe_\w+", target["expr"]))
            assert names, target
            used |= names
    assert used <= exported, used - exported
    assert {"icefloe_lag_records", "icefloe_lag_seconds", "icefloe_healthy",
            "icefloe_rows_total", "icefloe_retries_total"} <= used


def test_a_taken_metrics_port_is_a_typed_error_and_stops_the_stream(
        catalog: SqlCatalog, table: Table, tmp_path: Path) -> None:
    import socket

    from icefloe.errors import InvalidOptionError

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        stream = IcebergSource("db.events", catalog=catalog).stream(
            checkpoint=str(tmp_path / "ckpt"), metrics_port=port)
        with pytest.raises(InvalidOptionError, match=f"127.0.0.1:{port}.*free port"):
            stream.start()
        assert stream.stopped and stream.metrics_address is None
        assert not [t for t in threading.enumerate() if t.name == "icefloe-enumerator"
                    and t.is_alive()]
    finally:
        taken.close()


def test_without_the_metrics_extra_the_error_names_it(
        catalog: SqlCatalog, table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    with pytest.raises(ImportError, match=r"icefloe\[metrics\]"):
        IcebergSource("db.events", catalog=catalog).stream(metrics_port=0)
    stream = IcebergSource("db.events", catalog=catalog).stream()  # no endpoint: no need
    assert stream.metrics_address is None


def test_reader_retries_and_errors_are_counted_by_kind(tmp_path: Path) -> None:
    """A data file read fails twice (a transient ``ConnectionResetError``, injected by the
    table's FileIO) and is retried; the rows arrive once each, and the retries read back
    from ``stream.metrics()`` and the endpoint under operation ``read``. Then a read that
    fails more often than ``maxAttempts`` allows is one error of that kind."""
    faults = tmp_path / "faults"
    catalog = data_faults_catalog(tmp_path, faults)
    table = make_table(catalog)
    table.append(rows(20))
    expected = sorted(table.scan().to_arrow().column("id").to_pylist())
    faults.write_text("2")
    opts = {"maxAttempts": "3", "retryBackoffMs": "10", "pollIntervalMs": "50"}
    src = IcebergSource("db.events", catalog=catalog, options=opts)
    with src.stream(checkpoint=str(tmp_path / "ckpt"), parallelism=1, available_now=True,
                    metrics_port=0) as stream:
        ids = []
        for item in stream:
            ids.extend(item.batch.column("id").to_pylist())
            item.ack()
        metrics = stream.metrics()
        _status, text = scrape(stream.metrics_address)
    assert faults_left(str(faults)) == 0, "the faults were not hit"
    assert sorted(ids) == expected, "each row once"
    read_retries = {k: v for k, v in metrics.retries.items() if k[0] == "read"}
    assert sum(read_retries.values()) == 2, metrics.retries
    (_, error_type), = read_retries
    labels = (("error", error_type), ("operation", "read"), ("table", "db.events"))
    assert samples(text)[("icefloe_retries_total", labels)] == 2.0
    assert not any(k[0] == "read" for k in metrics.errors)

    faults.write_text("5")
    failing = IcebergSource("db.events", catalog=catalog,
                            options={**opts, "maxAttempts": "2"})
    with failing.stream(parallelism=1, available_now=True) as stream, \
            pytest.raises(DataFileError):
        for item in stream:
            item.ack()
    metrics = stream.metrics()
    assert sum(v for k, v in metrics.retries.items() if k[0] == "read") == 1
    assert sum(v for k, v in metrics.errors.items() if k[0] == "read") == 1, metrics.errors
