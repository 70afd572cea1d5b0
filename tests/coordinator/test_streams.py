"""One suite for every engine's stream: the local stream and the Ray stream (driver mode).

Both run on the one coordinator (``icefloe.coordinator``); each test here runs against
both, on real tables, and checks what once drifted between them: enumeration retried
on transient faults, the reset checkpoint written at once, Nessie hashes in the
checkpoints, the lag measured from the committed position, ``stop()`` from another
thread, and the ack contract.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table.snapshots import Operation

from icefloe import IcebergSource, StreamClosedError
from icefloe.coordinator import StreamBase
from icefloe.state import Position, open_store
from tests.helpers.flaky_io import FAULTS_PROPERTY, faults_left
from tests.helpers.nessie_fake import FakeNessieServer
from tests.helpers.tables import commit_replace, make_table, rollback_to, rows

FAST = {"pollIntervalMs": "50"}
pytestmark = pytest.mark.timeout(240)


def open_stream(engine: str, catalog: str | Catalog, checkpoint: str | None,
                options: dict[str, str], **kwargs: Any) -> StreamBase:
    """A started stream of ``db.events`` on ``engine`` (one reader)."""
    if engine == "local":
        src = IcebergSource("db.events", catalog=catalog, options=options)
        stream: StreamBase = src.stream(checkpoint=checkpoint, parallelism=2, **kwargs)
    else:
        import icefloe.ray

        stream = icefloe.ray.RayStream("db.events", catalog=catalog, options=options,
                                       checkpoint=checkpoint, num_readers=1,
                                       reader_num_cpus=0.25, **kwargs)
    stream.start()
    return stream


def take(items: Iterator[Any], n: int, ack: bool = True) -> list[int]:
    """Consume items until ``n`` rows arrived (acking each); returns their sorted ids."""
    got: list[int] = []
    while len(got) < n:
        item = next(items)
        got.extend(item.batch.column("id").to_pylist())
        if ack:
            item.ack(wait=True)
    return sorted(got)


def wait_for(condition: Any, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def table_ids(tbl: Any) -> list[int]:
    return sorted(tbl.refresh().scan().to_arrow().column("id").to_pylist())


# -- drift fixed: retries, resets, Nessie hashes, lag -------------------------------------


def test_enumeration_retries_transient_faults(engine: str, tmp_path: Path) -> None:
    """Three reads of the manifest list fail (a reset connection) when the stream first
    plans: the stream retries them and delivers every row; the fault budget is spent, and
    the metrics count the three retries by operation and error type."""
    faults = tmp_path / "faults"
    faults.write_text("0")
    catalog = SqlCatalog("flaky", uri=f"sqlite:///{tmp_path}/catalog.db",
                         warehouse=f"file://{tmp_path}/warehouse",
                         **{"py-io-impl": "tests.helpers.flaky_io.FlakyFileIO",
                            FAULTS_PROPERTY: str(faults)})
    catalog.create_namespace("db")
    tbl = make_table(catalog)
    tbl.append(rows(20))
    faults.write_text("3")
    options = {**FAST, "maxAttempts": "6", "retryBackoffMs": "50"}
    with open_stream(engine, catalog, None, options, available_now=True) as stream:
        got = sorted(i for item in stream for i in item.batch.column("id").to_pylist()
                     if item.ack() is None)
        metrics = stream.metrics()
    assert got == table_ids(tbl)
    assert faults_left(str(faults)) == 0, "the faults were not hit"
    # counted by kind: three retried planning attempts (the manifest read, a DataFileError
    # caused by the reset connection), no error
    assert metrics.retries == {("plan", "DataFileError"): 3}, metrics.retries
    assert metrics.errors == {}


def test_lineage_reset_is_checkpointed_at_once(engine: str, catalog: SqlCatalog,
                                               tmp_path: Path) -> None:
    """``onLineageBreak=restartFromHead`` after a rollback: the new start is in the
    checkpoint before any further ack (a crash then must not resolve the head again)."""
    tbl = make_table(catalog)
    tbl.append(rows(5))
    first = tbl.current_snapshot().snapshot_id
    tbl.append(rows(5, start=100))
    ckpt = str(tmp_path / "ckpt")
    options = {**FAST, "onLineageBreak": "restartFromHead"}
    with open_stream(engine, catalog, ckpt, options, checkpoint_interval_s=3600) as stream:
        items = iter(stream)
        assert take(items, 10) == [*range(5), *range(100, 105)]
        rollback_to(tbl, first)  # the committed snapshot leaves the lineage
        # no ack from here on: only the reset itself may write this checkpoint
        wait_for(lambda: open_store(ckpt).read().position.snapshot_id == first,
                 "the reset to the head was not checkpointed at once")
        assert open_store(ckpt).read().position == Position.after(
            first, tbl.refresh().snapshot_by_id(first).sequence_number)


def test_nessie_hashes_in_the_checkpoint(engine: str, catalog: SqlCatalog,
                                         tmp_path: Path) -> None:
    """A Nessie table's checkpoint keeps the commit hash its committed snapshot was seen
    at (restores pin the table's metadata to it)."""
    tbl = make_table(catalog)
    tbl.append(rows(4))
    ckpt = str(tmp_path / "ckpt")
    with FakeNessieServer() as nessie:
        nessie.put_table("main", "db.events", tbl)
        options = {**FAST, "catalog.uri": nessie.uri, "catalog.backoff-s": "0.001"}
        with open_stream(engine, "nessie", ckpt, options, available_now=True,
                         checkpoint_interval_s=0) as stream:
            got = [i for item in stream for i in item.batch.column("id").to_pylist()
                   if item.ack(wait=True) is None]
        assert sorted(got) == [0, 1, 2, 3]
        state = open_store(ckpt).read()
        assert state is not None
        snapshot = tbl.current_snapshot().snapshot_id
        assert state.position.snapshot_id == snapshot
        assert dict(state.nessie_hashes).get(snapshot) == nessie.head("main")


def test_lag_is_measured_from_the_committed_position(engine: str, catalog: SqlCatalog) -> None:
    """With the committed position N snapshots behind the head, the lag is N snapshots
    (their added records, the age of the oldest) while items wait unacknowledged, and
    drops to 0 once they are acknowledged. (Before the coordinator, the local stream
    measured how far planning got: 0 here.)"""
    tbl = make_table(catalog)
    tbl.append(rows(3))
    with open_stream(engine, catalog, None, FAST, checkpoint_interval_s=0) as stream:
        items = iter(stream)
        assert take(items, 3) == [0, 1, 2]
        wait_for(lambda: stream.lag.snapshots == 0, "caught up: no lag")
        for i in range(4):
            tbl.append(rows(5, start=100 * (i + 1)))
        commit_replace(tbl)  # a compaction: the stream skips it, its records are no lag
        behind = tbl.refresh().snapshots()[-5:]  # the oracle: PyIceberg's snapshot list
        assert behind[-1].summary.operation == Operation.REPLACE  # type: ignore[union-attr]
        oracle = sum(int(s.summary.get("added-records")) for s in behind[:-1])  # type: ignore
        held = []  # read, never acked (Ray's readers hold 2 unacked splits at most)
        while sum(i.batch.num_rows for i in held) < 10:
            held.append(next(items))
        expected = {i for s in range(1, 5) for i in range(100 * s, 100 * s + 5)}
        assert {i for item in held for i in item.batch.column("id").to_pylist()} <= expected
        head = tbl.current_snapshot().snapshot_id
        # measured against the head as of the stream's last poll: wait until it saw ours
        wait_for(lambda: stream.lag.head_snapshot_id == head, "the stream never saw the head")
        lag = stream.lag
        assert (lag.snapshots, lag.records) == (5, oracle)
        assert lag.seconds >= time.time() - behind[0].timestamp_ms / 1000 - 1
        assert stream.stats.unacked == len(held)
        assert stream.describe()["snapshots_behind"] == 5
        for item in held:
            item.ack(wait=True)
        take(items, 20 - sum(i.batch.num_rows for i in held))
        wait_for(lambda: stream.lag.snapshots == 0, "acknowledged: no lag")
        assert stream.stats.unacked == 0


# -- the stream API -------------------------------------------------------------------------


def test_stop_from_another_thread_writes_the_final_checkpoint(
        engine: str, catalog: SqlCatalog, tmp_path: Path) -> None:
    """The consumer waits for data; another thread calls stop(): the loop ends and the
    final checkpoint holds every ack (none was written before: the interval is long)."""
    tbl = make_table(catalog)
    tbl.append(rows(6))
    ckpt = str(tmp_path / "ckpt")
    stream = open_stream(engine, catalog, ckpt, FAST, checkpoint_interval_s=3600)
    first = open_store(ckpt).read()
    assert first is not None  # the resolved start, written at once
    got: list[int] = []

    def consume() -> None:
        for item in stream:
            got.extend(item.batch.column("id").to_pylist())
            item.ack(wait=True)

    consumer = threading.Thread(target=consume)
    consumer.start()
    wait_for(lambda: len(got) == 6, "the rows did not arrive")
    time.sleep(0.3)  # the consumer now waits for more
    assert open_store(ckpt).read().position == first.position
    stopper = threading.Thread(target=stream.stop)
    stopper.start()
    stopper.join(60)
    consumer.join(60)
    assert not consumer.is_alive(), "the consumer's loop did not end"
    stream.stop()  # idempotent
    final = open_store(ckpt).read()
    assert final.position.snapshot_id == tbl.current_snapshot().snapshot_id
    assert final.position.is_unit_complete


def test_ack_contract(engine: str, catalog: SqlCatalog, caplog: pytest.LogCaptureFixture
                      ) -> None:
    """Acking twice is a no-op; unacknowledged items are counted and reported at stop;
    an ack after stop() is a StreamClosedError."""
    tbl = make_table(catalog)
    tbl.append(rows(10))
    tbl.append(rows(10, start=10))
    options = {**FAST, "batchSize": "5"}
    stream = open_stream(engine, catalog, None, options, checkpoint_interval_s=0)
    items = iter(stream)
    first, second, third = next(items), next(items), next(items)
    first.ack(wait=True)
    first.ack(wait=True)  # again: nothing happens
    assert stream.stats.unacked == 2
    third.ack(wait=True)
    assert stream.stats.unacked == (0 if third.split_id == second.split_id else 1)
    fourth = next(items)
    with caplog.at_level(logging.WARNING):
        stream.stop()
    assert stream.stats.unacked >= 1
    assert any("never acknowledged" in r.getMessage() for r in caplog.records)
    with pytest.raises(StreamClosedError, match="after the stream was stopped"):
        fourth.ack()
    assert next(iter(stream), None) is None  # the one iteration has ended
    unused = open_stream(engine, catalog, None, options, checkpoint_interval_s=0)
    unused.stop()
    with pytest.raises(StreamClosedError):
        next(iter(unused))
