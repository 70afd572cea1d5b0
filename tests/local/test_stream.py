"""The local stream: delivery, acks, checkpoints and restarts on real tables.

A "crash" here abandons a stream without its final checkpoint (threads stopped,
nothing written): what survives is exactly what the acks wrote. Real SIGKILLs of
real processes are in tests/reliability/.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icefloe import CheckpointMismatchError, IcebergSource, SnapshotPolicyError, TableNotFoundError
from icefloe.catalog.handle import TableHandle
from icefloe.cli import main as cli_main
from icefloe.local.stream import LocalStream
from icefloe.state import open_store
from tests.helpers.tables import (
    commit_delete_files,
    drop_and_recreate,
    live_data_files,
    make_catalog,
    make_table,
    rows,
)
from tests.helpers.waiting import ack_rows

FAST = {"pollIntervalMs": "50"}


def crash(stream: LocalStream) -> None:
    """Stop a stream without writing its final checkpoint: what survives is exactly what
    the acks wrote, as after a crash."""
    stream.store = None
    stream.stop()


def table_ids(tbl) -> list[int]:
    return sorted(tbl.refresh().scan().to_arrow().column("id").to_pylist())


@pytest.fixture
def setup(tmp_path: Path):
    catalog = make_catalog(tmp_path)
    tbl = make_table(catalog)
    return catalog, tbl, str(tmp_path / "ckpt")


def drain(src: IcebergSource, ckpt: str, **kwargs) -> list[int]:
    got: list[int] = []
    with src.stream(checkpoint=ckpt, available_now=True, checkpoint_interval_s=0,
                    **kwargs) as stream:
        for item in stream:
            got.extend(item.batch.column("id").to_pylist())
            item.ack()
    return got


def test_every_appended_row_arrives_in_snapshot_order(setup) -> None:
    catalog, tbl, ckpt = setup
    tbl.append(rows(30))
    src = IcebergSource("db.events", catalog=catalog, options=FAST)
    seen: list[tuple[int, int]] = []
    with src.stream(checkpoint=ckpt, parallelism=3, checkpoint_interval_s=0) as stream:
        def writer() -> None:
            for i in range(4):
                tbl.append(rows(10, start=1000 + 100 * i))
                time.sleep(0.05)
        thread = threading.Thread(target=writer)
        thread.start()
        deadline = time.monotonic() + 60
        for item in stream:
            seen.extend((item.sequence_number, i) for i in item.batch.column("id").to_pylist())
            item.ack()
            if len(seen) >= 70 or time.monotonic() > deadline:
                break
        thread.join()
    assert sorted(i for _, i in seen) == table_ids(tbl)
    sequences = [s for s, _ in seen]
    assert sequences == sorted(sequences), "snapshots must arrive in commit order"


@pytest.mark.parametrize("acked", [0, 1, 3, 5])
def test_restart_redelivers_only_unacknowledged_data(setup, acked: int) -> None:
    catalog, tbl, ckpt = setup
    for i in range(6):
        tbl.append(rows(5, start=i * 5))
    src = IcebergSource("db.events", catalog=catalog, options=FAST)
    delivered: list[int] = []
    acked_ids: list[int] = []
    stream = src.stream(checkpoint=ckpt, parallelism=2, checkpoint_interval_s=0)
    stream.start()
    for n, item in enumerate(stream):
        ids = item.batch.column("id").to_pylist()
        delivered.extend(ids)
        if n < acked:
            item.ack()  # checkpoint written on every ack (interval 0)
            acked_ids.extend(ids)
        if n == acked:  # emitted, not acked: the crash point "after emit"
            break
    crash(stream)
    again = drain(IcebergSource("db.events", catalog=catalog, options=FAST), ckpt)
    assert sorted(acked_ids + again) == table_ids(tbl), "nothing lost, nothing acked re-read"
    assert not set(acked_ids) & set(again)


def test_ack_without_checkpoint_write_is_redelivered(setup) -> None:
    """Crash point "after ack, before the checkpoint write": at least once."""
    catalog, tbl, ckpt = setup
    for i in range(3):
        tbl.append(rows(4, start=i * 4))
    src = IcebergSource("db.events", catalog=catalog, options=FAST)
    stream = src.stream(checkpoint=ckpt, checkpoint_interval_s=3600)
    stream.start()
    first = next(iter(stream))
    first.ack()  # interval not reached: only the final checkpoint would record it
    crash(stream)
    again = drain(IcebergSource("db.events", catalog=catalog, options=FAST), ckpt)
    assert sorted(again) == table_ids(tbl)


def test_mid_split_resume(setup) -> None:
    catalog, tbl, ckpt = setup
    tbl.append(rows(100))
    opts = {**FAST, "batchSize": "10"}
    src = IcebergSource("db.events", catalog=catalog, options=opts)
    stream = src.stream(checkpoint=ckpt, checkpoint_interval_s=0)
    stream.start()
    acked: list[int] = []
    for n, item in enumerate(stream):
        assert not item.last
        acked.extend(item.batch.column("id").to_pylist())
        item.ack()
        if n == 2:
            break
    crash(stream)
    shown = open_store(ckpt).read()
    assert shown is not None and dict(shown.offsets)  # partial progress recorded
    again = drain(IcebergSource("db.events", catalog=catalog, options=opts), ckpt)
    assert len(acked) == 30
    assert sorted(acked + again) == table_ids(tbl) and not set(acked) & set(again)


def test_branch_other_than_main(setup) -> None:
    catalog, tbl, ckpt = setup
    tbl.append(rows(5))
    tbl.manage_snapshots().create_branch(tbl.current_snapshot().snapshot_id, "dev").commit()
    tbl.append(rows(5, start=100))  # main only
    src = IcebergSource("db.events", catalog=catalog, options={**FAST, "branch": "dev"})
    assert sorted(drain(src, ckpt)) == [0, 1, 2, 3, 4]


def test_delete_snapshot_fails_by_default_and_is_skipped_when_allowed(setup) -> None:
    catalog, tbl, ckpt = setup
    tbl.append(rows(5))
    tbl.append(rows(5, start=10))
    src = IcebergSource("db.events", catalog=catalog,
                        options={**FAST, "startingVersion": "latest"})
    assert drain(src, ckpt) == []
    commit_delete_files(tbl, [next(iter(live_data_files(tbl)))])
    tbl.append(rows(2, start=50))
    with pytest.raises(SnapshotPolicyError, match="ignoreDeletes"):
        drain(IcebergSource("db.events", catalog=catalog, options=FAST), ckpt)
    allowed = IcebergSource("db.events", catalog=catalog,
                            options={**FAST, "ignoreDeletes": "true"})
    assert sorted(drain(allowed, ckpt)) == [50, 51]


def test_checkpoint_of_another_table_is_refused(setup) -> None:
    catalog, tbl, ckpt = setup
    tbl.append(rows(3))
    drain(IcebergSource("db.events", catalog=catalog, options=FAST), ckpt)
    other = make_table(catalog, "db.other")
    other.append(rows(3))
    before = Path(ckpt, "checkpoint.bin").read_bytes()
    with pytest.raises(CheckpointMismatchError):
        drain(IcebergSource("db.other", catalog=catalog, options=FAST), ckpt)
    assert Path(ckpt, "checkpoint.bin").read_bytes() == before, "nothing overwritten"


def test_corrupt_newest_checkpoint_falls_back(setup, caplog) -> None:
    catalog, tbl, ckpt = setup
    tbl.append(rows(3))
    assert len(drain(IcebergSource("db.events", catalog=catalog, options=FAST), ckpt)) == 3
    tbl.append(rows(3, start=10))
    assert sorted(drain(IcebergSource("db.events", catalog=catalog, options=FAST),
                        ckpt)) == [10, 11, 12]
    newest = Path(ckpt, "checkpoint.bin")
    newest.write_bytes(newest.read_bytes()[:-5])  # truncated
    with caplog.at_level(logging.WARNING):
        again = drain(IcebergSource("db.events", catalog=catalog, options=FAST), ckpt)
    # the previous good checkpoint is before the second append: that one is re-read
    assert sorted(again) == [10, 11, 12]
    assert any("checkpoint" in r.getMessage().lower() for r in caplog.records)


def test_cli_stream_available_now_and_checkpoint_show(setup, tmp_path: Path, capsys) -> None:
    catalog, tbl, ckpt = setup
    tbl.append(rows(7))
    props = catalog.properties
    opts = ["-o", "catalog.type=sql", "-o", f"catalog.uri={props['uri']}",
            "-o", f"catalog.warehouse={props['warehouse']}"]
    out = tmp_path / "out"
    code = cli_main(["stream", "db.events", "--catalog", "test", *opts, "--checkpoint", ckpt,
                     "--sink", f"parquet:{out}", "--available-now"])
    assert code == 0
    import pyarrow.parquet as pq

    written = sorted(
        i for f in out.glob("*.parquet") for i in pq.read_table(f).column("id").to_pylist())
    assert written == table_ids(tbl)
    capsys.readouterr()
    assert cli_main(["checkpoint", "show", ckpt, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["lastAckedSnapshotID"] == str(tbl.current_snapshot().snapshot_id)
    assert shown["branch"] == "main" and shown["namespace"] == "db"
    assert shown["table"] == "events"


def _count_missing_loads(catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The stream's polls (``TableHandle.refresh``: the pointer probe, or a whole load) that
    found no table in ``catalog``, from now on."""
    missed: list[str] = []
    real = TableHandle.refresh

    def refresh(self: TableHandle) -> TableHandle:
        try:
            return real(self)
        except TableNotFoundError:
            if self.catalog is catalog:
                missed.append(self.identifier)
            raise

    monkeypatch.setattr(TableHandle, "refresh", refresh)
    return missed


def test_a_table_dropped_and_recreated_while_polled_is_followed_not_failed(
        setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop and create are two commits in a SQL catalog: a stream that polls in between finds
    no table. With an ``onLineageBreak`` strategy that follows a re-created table, that gap is
    waited out (retried per ``maxAttempts``), not a TableNotFoundError that ends the stream
    (the cause of an intermittent failure of the test below under load)."""
    catalog, tbl, ckpt = setup
    tbl.append(rows(10))
    opts = {**FAST, "onLineageBreak": "restartFromStart", "retryBackoffMs": "100"}
    got: list[int] = []
    with IcebergSource("db.events", catalog=catalog, options=opts).stream(
            checkpoint=ckpt, checkpoint_interval_s=0) as stream:
        items = iter(stream)
        while len(got) < 10:
            item = next(items)
            got.extend(item.batch.column("id").to_pylist())
            item.ack()
        schema = tbl.schema()
        missed = _count_missing_loads(catalog, monkeypatch)
        catalog.drop_table("db.events")
        deadline = time.monotonic() + 60
        while len(missed) < 3:  # polls find no table (and the stream goes on)
            assert time.monotonic() < deadline, "the stream did not poll the dropped table"
            time.sleep(0.01)
        new = catalog.create_table("db.events", schema, properties={"format-version": "2"})
        new.append(rows(5, start=100))
        deadline = time.monotonic() + 60
        while len(got) < 15:
            assert time.monotonic() < deadline, f"rows of the re-created table missing: {got}"
            item = next(items)
            got.extend(item.batch.column("id").to_pylist())
            item.ack()
    assert sorted(got) == list(range(10)) + list(range(100, 105))


def test_restart_from_head_after_a_recreated_table_is_checkpointed_at_once(setup) -> None:
    """After ``onLineageBreak=restartFromHead`` moved the stream to the new table's head, a
    crash before the next ack must not resolve the head again: rows committed in between
    would be skipped."""
    catalog, tbl, ckpt = setup
    tbl.append(rows(10))
    opts = {**FAST, "onLineageBreak": "restartFromHead"}
    src = IcebergSource("db.events", catalog=catalog, options=opts)
    stream = src.stream(checkpoint=ckpt, checkpoint_interval_s=0)
    items = iter(stream)
    ack_rows(items, 10)
    old_identity = open_store(ckpt).read().table_identity
    new = drop_and_recreate(catalog, "db.events", tbl.schema())
    new.append(rows(5, start=100))  # the head the strategy restarts after
    deadline = time.monotonic() + 60
    while open_store(ckpt).read().table_identity == old_identity:
        assert time.monotonic() < deadline, "the restart on the new table was not checkpointed"
        time.sleep(0.05)
    crash(stream)
    restart = open_store(ckpt).read().position
    new.append(rows(5, start=200))  # committed after the restart, before any ack
    got = drain(IcebergSource("db.events", catalog=catalog, options=opts), ckpt)
    # the break may be seen before or after the first append to the new table: the head
    # then was empty (everything of the new table follows) or that append (skipped)
    first = [] if restart.snapshot_id is not None else list(range(100, 105))
    assert sorted(got) == first + list(range(200, 205))
