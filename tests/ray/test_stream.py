"""The continuous pipeline on Ray actors: delivery, reader death, restart from the checkpoint."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
from pyiceberg.catalog.sql import SqlCatalog

import icefloe.ray
from icefloe.state import open_store
from tests.helpers.tables import make_table, rows
from tests.ray.conftest import RAY_WARNINGS

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]


class DirSink:
    """Picklable sink run in the reader actors: one Parquet file per batch (duplicates kept).

    Writes a temporary file and renames it, as any sink must: an actor killed mid-write
    leaves only a ``.tmp`` file, never a torn ``.parquet`` one.
    """

    def __init__(self, directory: Path, delay_s: float = 0.0) -> None:
        self.directory = str(directory)
        self.delay_s = delay_s

    def __call__(self, item: icefloe.ray.RayStreamItem) -> None:
        time.sleep(self.delay_s)
        name = f"{item.split_id}-{item.consumed}-{uuid.uuid4().hex}.parquet"
        temp = f"{self.directory}/{name}.tmp"
        pq.write_table(pa.Table.from_batches([item.batch]), temp)
        os.replace(temp, f"{self.directory}/{name}")


def _ids_in(directory: Path) -> list[int]:
    return sorted(i for f in directory.glob("*.parquet")
                  for i in pq.read_table(f).column("id").to_pylist())


def test_writer_appending_every_row_delivered(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = make_table(catalog)
    table.append(rows(30))
    received: list[int] = []

    def writer() -> None:
        for i in range(1, 5):
            time.sleep(0.3)
            table.append(rows(30, start=30 * i))

    with icefloe.ray.stream("db.events", catalog=catalog, checkpoint=str(tmp_path / "ckpt"),
                            num_readers=2, reader_num_cpus=0.25,
                            options={"pollIntervalMs": "100"}) as stream:
        thread = threading.Thread(target=writer)
        thread.start()
        deadline = time.monotonic() + 60
        for item in stream:
            received.extend(item.batch.column("id").to_pylist())
            item.ack()
            if len(received) >= 150 or time.monotonic() > deadline:
                break
        thread.join()
    assert sorted(received) == list(range(150))
    ckpt = open_store(str(tmp_path / "ckpt")).read()
    assert ckpt is not None
    assert ckpt.position.snapshot_id == table.current_snapshot().snapshot_id


def test_killed_reader_loses_nothing(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = make_table(catalog)
    for i in range(4):
        table.append(rows(200, start=200 * i))
    out = tmp_path / "out"
    out.mkdir()
    stream = icefloe.ray.stream(
        "db.events", catalog=catalog, checkpoint=str(tmp_path / "ckpt"), num_readers=2,
        reader_num_cpus=0.25, sink=DirSink(out, delay_s=0.05), available_now=True,
        options={"batchSize": "20"})
    with stream:
        while not list(out.glob("*.parquet")):  # the readers are mid-split
            time.sleep(0.05)
        victim = next(iter(stream.readers))
        ray.kill(stream.readers[victim])
        assert stream.run(max_seconds=90)
        assert stream.replaced == [victim]
    ids = _ids_in(out)
    assert set(ids) == set(range(800))  # nothing lost (the killed split may repeat rows)
    assert len(ids) < 800 + 200


def test_restart_redelivers_only_unacknowledged(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = make_table(catalog)
    for i in range(3):
        table.append(rows(100, start=100 * i))
    ckpt = str(tmp_path / "ckpt")
    options = {"batchSize": "25"}
    acked: list[int] = []
    unacked: list[int] = []
    with icefloe.ray.stream("db.events", catalog=catalog, checkpoint=ckpt, num_readers=2,
                            reader_num_cpus=0.25, options=options) as first:
        for n, item in enumerate(first):
            ids = item.batch.column("id").to_pylist()
            if n < 5:
                item.ack()
                acked.extend(ids)
            else:
                unacked.extend(ids)
            if n == 7:
                break
    assert len(acked) == 125
    again: list[int] = []
    with icefloe.ray.stream("db.events", catalog=catalog, checkpoint=ckpt, num_readers=2,
                            reader_num_cpus=0.25, options=options,
                            available_now=True) as second:
        for item in second:
            again.extend(item.batch.column("id").to_pylist())
            item.ack()
    assert sorted(acked + again) == list(range(300))  # nothing lost, acked never again
    assert set(unacked) <= set(again)
