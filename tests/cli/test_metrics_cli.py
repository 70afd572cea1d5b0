"""``icefloe stream --metrics-port`` and ``--log-format json`` in a real child process.

The stream runs on the embedded SQLite catalog. The catalog is made unreachable for
real: another connection holds an exclusive lock on the SQLite file, so every refresh
fails ("database is locked") and is retried; ``/healthz`` must say so (503, one line)
and turn healthy again once a poll succeeds after the lock is released. Every stderr
line of the run must be one JSON object, and no secret given on the command line may
appear in it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from icefloe.cli.logs import JsonFormatter, MaskingFormatter
from icefloe.logs import bind, mask_secrets
from tests.cli.support import ROOT, warehouse
from tests.helpers.tables import rows
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(240)
SECRET = "TOPSECRET42"


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric(port: int, name: str) -> float:
    """The sum of ``name``'s samples in a scrape (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(get(port, "/metrics")[1]):
        for sample in family.samples:
            if sample.name == name:
                total += sample.value
    return total


class Child:
    """``icefloe argv`` as a child process, its stderr lines collected as they come."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "icefloe.cli", *argv], cwd=cwd,
                                     env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in list(self.lines) if line.strip()]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=120)
        self._reader.join(timeout=10)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return code


def test_healthz_follows_an_unreachable_catalog_and_logs_are_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    _catalog, table = warehouse(home, monkeypatch)
    out = tmp_path / "out"
    env = {**os.environ, "ICEFLOE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    child = Child(["--log-format", "json", "-v", "stream", "db.events",
                   "--checkpoint", str(tmp_path / "ckpt"), "--sink", f"parquet:{out}",
                   "--parallelism", "1", "--metrics-port", "0",
                   "-o", "pollIntervalMs=100", "-o", "maxAttempts=60",
                   "-o", "retryBackoffMs=100",
                   "-o", f"catalog.s3.secret-access-key={SECRET}",
                   "-o", f"checkpoint.s3.secret-access-key={SECRET}"], tmp_path, env)
    lock: sqlite3.Connection | None = None
    try:
        port = wait_for(lambda: next((r["metrics_port"] for r in child.records()
                                      if "metrics_port" in r), None) or child.proc.poll(),
                        "the metrics line")
        assert child.proc.poll() is None, "".join(child.lines)
        assert get(port, "/healthz") == (200, "ok\n")
        wait_for(lambda: metric(port, "icefloe_rows_total") == 60, "the first 60 rows")

        # the catalog becomes unreachable: its SQLite file is locked by another writer
        polls = metric(port, "icefloe_polls_total")
        lock = sqlite3.connect(home / "catalog.db", isolation_level=None, timeout=30)
        lock.execute("BEGIN EXCLUSIVE")
        _status, body = wait_for(lambda: (r := get(port, "/healthz"))[0] == 503 and r,
                                "/healthz to turn unhealthy")
        assert body.startswith("unhealthy: ") and body.count("\n") == 1, body
        assert "refresh failed" in body and "retrying" in body, body
        assert metric(port, "icefloe_consecutive_failures") >= 1
        assert metric(port, "icefloe_retries_total") >= 1
        assert metric(port, "icefloe_healthy") == 0
        assert metric(port, "icefloe_enumeration_alive") == 1

        # reachable again: the next poll succeeds, the stream is healthy and reads on
        lock.rollback()
        lock.close()
        lock = None
        wait_for(lambda: get(port, "/healthz") == (200, "ok\n"), "/healthz to recover")
        assert metric(port, "icefloe_polls_total") > polls
        assert metric(port, "icefloe_consecutive_failures") == 0
        table.append(rows(7, start=500))
        wait_for(lambda: metric(port, "icefloe_rows_total") == 67, "the rows after it")
    finally:
        if lock is not None:
            lock.rollback()
            lock.close()
        code = child.stop()
    assert code == 130, "".join(child.lines)
    ids = sorted(pq.read_table(out).column("id").to_pylist())
    assert ids == sorted([*range(60), *range(500, 507)])

    text = "".join(child.lines)
    assert SECRET not in text
    records = child.records()  # every line parses: one JSON object per line
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    retried = [r for r in records if r["level"] == "WARNING" and "retrying" in r["message"]]
    assert retried, text
    assert all(r["error_type"] and r["table"] == "db.events" for r in retried), retried
    assert any(r["logger"] == "icefloe.cli.status" and "snapshots_behind" in r
               for r in records)
    assert records[-1]["message"].startswith("interrupted: checkpoint")


def test_json_errors_and_usage_errors_are_one_object(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse(tmp_path / "home", monkeypatch)
    env = {**os.environ, "ICEFLOE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "icefloe.cli", "--log-format", "json"]
    missing = subprocess.run([*base, "stream", "db.nope", "--checkpoint",
                              str(tmp_path / "c"), "-o", f"catalog.token={SECRET}"],
                             cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=120)
    usage = subprocess.run([*base, "stream", "db.events", "--checkpoint", "x",
                            "--metrics-port", "99999", f"catalog.credential={SECRET}"],
                           cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    for proc, code, kind in ((missing, 3, "TableNotFoundError"), (usage, 2, None)):
        assert proc.returncode == code, proc.stderr
        assert SECRET not in proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, proc.stderr
        record = json.loads(lines[0])
        assert record["level"] == "ERROR" and record["exit_code"] == code
        if kind is not None:
            assert record["error_type"] == kind
    assert "99999 is not a port number" in json.loads(usage.stderr)["message"]


def test_the_json_formatter_masks_secrets_and_carries_the_context() -> None:

    assert mask_secrets("catalog.s3.secret-access-key=abc checkpoint.token=xyz") == \
        "catalog.s3.secret-access-key=*** checkpoint.token=***"
    assert mask_secrets("postgresql://ice:hunter2@db:5432/cat") == "postgresql://ice:***@db:5432/cat"
    assert mask_secrets("{'s3.secret-access-key': 'abc', 'uri': 'x'}") == \
        "{'s3.secret-access-key': '***', 'uri': 'x'}"
    assert mask_secrets("read 12 rows of db.events") == "read 12 rows of db.events"

    logger = logging.getLogger("icefloe.test")
    try:
        raise ConnectionError("cannot reach postgresql://ice:hunter2@db:5432/cat")
    except ConnectionError:
        exc_info = sys.exc_info()
    with bind(table="db.events", snapshot=42):
        record = logger.makeRecord("icefloe.test", logging.WARNING, __file__, 1,
                                   "refresh failed: token=%s", ("s3cr3t",), exc_info,
                                   extra={"split": "s-1"})
        line = JsonFormatter().format(record)
    out = json.loads(line)
    assert out["level"] == "WARNING" and out["logger"] == "icefloe.test"
    assert out["message"] == "refresh failed: token=***"
    assert (out["table"], out["snapshot"], out["split"]) == ("db.events", 42, "s-1")
    assert out["error_type"] == "ConnectionError"
    assert "hunter2" not in line and "s3cr3t" not in line and "ice:***@db" in line
    assert "hunter2" not in MaskingFormatter("%(message)s").format(record)
