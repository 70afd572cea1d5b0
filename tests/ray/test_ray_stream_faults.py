"""Regression tests for faults the Ray kill campaign (``tests/ray/test_ray_kill.py``)
and its review found in the Ray stream: durable starts, awaited acks, available-now
ends while readers cannot start."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icefloe.ray
from icefloe.state import open_store
from tests.helpers.tables import make_table, rows
from tests.ray.conftest import RAY_WARNINGS

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]


def test_latest_start_is_durable_before_any_ack(catalog: SqlCatalog, tmp_path: Path) -> None:
    """``startingVersion=latest`` resolved at the first start is checkpointed at once: a
    restart before any ack must not resolve ``latest`` anew and skip what came between."""
    table = make_table(catalog)
    table.append(rows(10))
    ckpt = str(tmp_path / "ckpt")
    options = {"startingVersion": "latest", "pollIntervalMs": "100"}
    with icefloe.ray.stream("db.events", catalog=catalog, checkpoint=ckpt, num_readers=1,
                            reader_num_cpus=0.25, options=options):
        pass  # started, nothing to read, nothing acked
    assert open_store(ckpt).read() is not None
    table.append(rows(10, start=10))  # committed while no stream runs
    got: list[int] = []
    with icefloe.ray.stream("db.events", catalog=catalog, checkpoint=ckpt, num_readers=1,
                            reader_num_cpus=0.25, options=options,
                            available_now=True) as again:
        for item in again:
            got.extend(item.batch.column("id").to_pylist())
            item.ack()
    assert sorted(got) == list(range(10, 20))


def test_ack_wait_returns_after_the_checkpoint(catalog: SqlCatalog, tmp_path: Path) -> None:
    """``item.ack(wait=True)`` returns once the enumerator recorded the ack; with
    ``checkpoint_interval_s=0`` the checkpoint on disk already covers the item."""
    table = make_table(catalog)
    table.append(rows(30))
    ckpt = str(tmp_path / "ckpt")
    with icefloe.ray.stream("db.events", catalog=catalog, checkpoint=ckpt, num_readers=1,
                            reader_num_cpus=0.25, checkpoint_interval_s=0,
                            options={"batchSize": "10"}) as stream:
        for item in stream:
            item.ack(wait=True)
            state = open_store(ckpt).read()
            assert state is not None
            if item.last:
                assert item.split_id not in dict(state.offsets)
                break
            assert dict(state.offsets)[item.split_id] == item.consumed


class AckLog:
    """A sink run in the reader actors that records writes and ``acked`` calls."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def _line(self, text: str) -> None:
        with open(self.path, "a") as fh:
            fh.write(text + "\n")

    def write(self, item: icefloe.ray.RayStreamItem) -> None:
        self._line(f"write {item.split_id} {item.consumed}")

    def acked(self, item: icefloe.ray.RayStreamItem) -> None:
        state = open_store(str(Path(self.path).parent / "ckpt")).read()
        assert state is not None
        done = item.last or dict(state.offsets).get(item.split_id) == item.consumed
        self._line(f"acked {item.split_id} {item.consumed} {done}")


def test_sink_acked_is_called_once_the_ack_is_recorded(catalog: SqlCatalog,
                                                       tmp_path: Path) -> None:
    table = make_table(catalog)
    table.append(rows(20))
    table.append(rows(20, start=20))
    log = tmp_path / "log.txt"
    with icefloe.ray.stream("db.events", catalog=catalog, checkpoint=str(tmp_path / "ckpt"),
                            num_readers=2, reader_num_cpus=0.25, sink=AckLog(log),
                            available_now=True, checkpoint_interval_s=0,
                            options={"batchSize": "10"}) as stream:
        assert stream.run(max_seconds=120)
    lines = log.read_text().splitlines()
    writes = [line.split()[1:] for line in lines if line.startswith("write")]
    acks = [line.split()[1:] for line in lines if line.startswith("acked")]
    assert len(writes) == 4
    assert sorted(a[:2] for a in acks) == sorted(writes)  # each write acked once
    assert all(a[2] == "True" for a in acks)  # the checkpoint covered it by then


def test_available_now_ends_while_a_reader_cannot_start(catalog: SqlCatalog,
                                                        tmp_path: Path) -> None:
    """Driver mode, available-now: a reader that never comes up (no CPU left for it:
    3 x 0.9 CPUs on 2) must not hold the end back once everything is acknowledged."""
    table = make_table(catalog)
    table.append(rows(50))
    got: list[int] = []
    stream = icefloe.ray.stream("db.events", catalog=catalog, checkpoint=str(tmp_path / "c"),
                                num_readers=3, reader_num_cpus=0.9, available_now=True)
    fired: list[bool] = []
    watchdog = threading.Timer(120, lambda: (fired.append(True), stream.stop()))
    watchdog.start()
    try:
        with stream:
            for item in stream:
                got.extend(item.batch.column("id").to_pylist())
                item.ack()
    finally:
        watchdog.cancel()
    assert not fired, "the available-now stream did not end by itself"
    assert sorted(got) == list(range(50))
