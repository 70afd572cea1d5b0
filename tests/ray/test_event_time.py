"""Event time on Ray: read tasks and stream splits in event-time order, one watermark
across the reader actors."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import ray
from pyiceberg.catalog.sql import SqlCatalog

import icefloe.ray
from icefloe.ray.datasource import IcefloeDatasource
from icefloe.state import open_store
from tests.helpers.event_time import HOURS, event_table, event_time_order, pyiceberg_bounds
from tests.ray.conftest import RAY_WARNINGS

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]

OPTS = {"watermarkColumn": "ts"}


def test_read_tasks_and_rows_in_event_time_order(catalog: SqlCatalog) -> None:
    table = event_table(catalog)
    tasks = IcefloeDatasource("db.events", catalog, OPTS).get_read_tasks(len(HOURS))
    files = [f for task in tasks for f in task.metadata.input_files]
    assert files == event_time_order(table)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    try:
        ts = icefloe.ray.read("db.events", catalog, OPTS).to_arrow_refs()
        got = [v for ref in ts for v in ray.get(ref).column("ts").to_pylist()]
    finally:
        ctx.execution_options.preserve_order = False
    assert got == sorted(got) and len(got) == 12 * len(HOURS)


def test_stream_hands_out_splits_in_event_time_order_with_one_watermark(
        catalog: SqlCatalog, tmp_path: Path) -> None:
    table = event_table(catalog)
    bounds = pyiceberg_bounds(table)
    ckpt = str(tmp_path / "ckpt")
    by_ordinal: dict[int, str] = {}
    watermarks: list[int] = []
    with icefloe.ray.stream("db.events", catalog=catalog, options=OPTS, checkpoint=ckpt,
                            num_readers=2, reader_num_cpus=0.25, available_now=True,
                            checkpoint_interval_s=0) as stream:
        for item in stream:
            by_ordinal[item.split.ordinal] = item.split.file_path
            assert item.watermark is not None
            oldest = min(item.batch.column("ts").to_pylist())
            assert item.watermark <= oldest.astimezone(dt.UTC).timestamp() * 1000
            watermarks.append(item.watermark)
            item.ack(wait=True)
        final = stream.watermark
    # ordinals are the enumerator's hand-out order: event-time ranks, across both actors
    assert [by_ordinal[i] for i in sorted(by_ordinal)] == event_time_order(table)
    assert watermarks == sorted(watermarks)
    assert final == max(bounds.values()) // 1000
    assert open_store(ckpt).read().watermark_ms == final
