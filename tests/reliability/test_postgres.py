"""Concurrent writer processes on a real PostgreSQL catalog while a stream reads.

The test starts its own server (initdb into a temp dir, pg_ctl on a free loopback port,
socket dir in the temp dir; as a non-root user when run as root). Skipped, with the
reason, when the PostgreSQL binaries or psycopg2 are missing
(``scripts/ensure-postgres.sh``; ``uv sync --extra postgres``).
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icefloe import IcebergSource
from icefloe.errors import SnapshotPolicyError
from tests.helpers.tables import make_table, rows
from tests.reliability.harness import REPO, child_env


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def postgres_uri() -> Iterator[str]:
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries not installed (run scripts/ensure-postgres.sh)")
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        pytest.skip("psycopg2 missing: sync the 'postgres' extra (uv sync --extra postgres)")
    root = Path(tempfile.mkdtemp(prefix="icefloe-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and no 'postgres' user to run the server as")
        os.chown(root, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", _free_port()
    subprocess.run([*prefix, initdb, "-D", str(data), "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True)
    # the server inherits pg_ctl's stdout/stderr: never a pipe, or run() waits for it forever
    subprocess.run([*prefix, pg_ctl, "-D", str(data), "-l", str(root / "log"), "-w", "-t", "60",
                    "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1", "start"],
                   check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=90)
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def test_concurrent_writers_every_appended_row_once(postgres_uri: str, tmp_path: Path) -> None:
    (tmp_path / "warehouse").mkdir()
    catalog = SqlCatalog("test", uri=postgres_uri, warehouse=f"file://{tmp_path}/warehouse")
    make_table(catalog).append(rows(100, start=0))
    expected = set(range(100))
    writers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.writer", "--root", str(tmp_path),
             "--catalog-uri", postgres_uri, "--start", str((w + 1) * 10**6), "--batches", "9",
             "--rows", "150", "--interval", "0.02", "--mix", "--seed", str(w)],
            cwd=REPO, env={**os.environ, **child_env()}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        for w in range(3)
    ]
    outputs: list[str] = []

    def wait_writers() -> None:
        """Collect the writers' reports, then commit a last marker row (id -1) so the
        reading loop, blocked on the stream, sees that everything was written."""
        for w in writers:
            out, err = w.communicate(timeout=180)
            assert w.returncode == 0, err[-3000:]
            outputs.append(out)
        catalog.load_table("db.events").append(rows(1, start=-1))

    waiter = threading.Thread(target=wait_writers, daemon=True)
    waiter.start()
    source = IcebergSource("db.events", catalog=catalog, options={
        "ignoreDeletes": "true", "pollIntervalMs": "50", "batchSize": "100"})
    seen: Counter[int] = Counter()
    with source.stream(checkpoint=str(tmp_path / "ck"), checkpoint_interval_s=0) as stream:
        for item in stream:
            seen.update(item.batch.column("id").to_pylist())
            item.ack()
            if -1 in seen:
                break
    waiter.join(timeout=10)
    for line in "".join(outputs).splitlines():
        event = json.loads(line)
        if "appended" in event:
            first, count = event["appended"]
            expected |= set(range(first, first + count))
    expected.add(-1)
    assert outputs, "writers did not finish"
    assert seen == Counter(expected)  # every appended row exactly once
    events = "".join(outputs)
    snapshots = catalog.load_table("db.events").snapshots()
    ops = Counter(s.summary.operation.value for s in snapshots if s.summary)
    assert ops["append"] == 1 + 27 + 1
    if '"deleted"' in events:
        # the documented default policy: a delete snapshot fails, naming the option
        strict = IcebergSource("db.events", catalog=catalog,
                               options={"startingVersion": "earliest"})
        with pytest.raises(SnapshotPolicyError, match="ignoreDeletes"), \
                strict.stream(available_now=True) as s:
            for item in s:
                item.ack()


def test_pointer_probe_leaves_no_transaction_open(postgres_uri: str, tmp_path: Path) -> None:
    """psycopg2 opens a transaction on a SELECT: the probe's connection, kept between
    polls, must end it each time (an open one would pin old row versions and, with a
    stricter isolation level, hide new commits)."""
    from icefloe.catalog.handle import open_table

    (tmp_path / "warehouse").mkdir()
    catalog = SqlCatalog("probe", uri=postgres_uri, warehouse=f"file://{tmp_path}/warehouse")
    table = make_table(catalog, "db.probed")
    table.append(rows(5))
    handle = open_table(catalog, "db.probed")
    for i in range(3):
        handle.refresh()
        with catalog.engine.connect() as conn:
            from sqlalchemy import text

            states = conn.execute(text(
                "SELECT state FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()")).scalars().all()
        assert "idle in transaction" not in states, states
        assert "idle" in states  # the probe's connection, kept
        table.append(rows(5, start=10 * (i + 1)))
        handle.refresh()
        assert handle.table.metadata_location == \
            catalog.load_table("db.probed").metadata_location
