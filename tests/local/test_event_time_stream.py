"""Event time on the local stream: splits in event-time order, watermarks that never
decrease (also across a restart from a checkpoint), the checkpoint's watermark."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pyiceberg.catalog import Catalog

from icefloe import CheckpointMismatchError, IcebergSource
from icefloe.local.stream import LocalStream
from icefloe.state import open_store
from tests.helpers.event_time import HOURS, event_table, event_time_order, hour_rows

OPTS = {"pollIntervalMs": "50", "watermarkColumn": "ts"}


def _ms(value: dt.datetime) -> int:
    return int(value.replace(tzinfo=dt.UTC).timestamp() * 1000)


def _crash(stream: LocalStream) -> None:
    """Stop without the final checkpoint: what survives is what the acks wrote."""
    stream.store = None
    stream.stop()


def test_initial_scan_in_event_time_order_with_rising_watermarks(catalog: Catalog,
                                                                   tmp_path: Path) -> None:
    table = event_table(catalog)
    oracle = event_time_order(table)
    files: list[str] = []
    watermarks: list[int] = []
    src = IcebergSource("db.events", catalog, OPTS)
    with src.stream(checkpoint=str(tmp_path / "ckpt"), parallelism=2, available_now=True,
                    checkpoint_interval_s=0) as stream:
        assert stream.watermark is None or stream.watermark <= _ms(min(
            hour_rows(h).column("ts").to_pylist()[0] for h in HOURS))
        for item in stream:
            if not files or files[-1] != item.split.file_path:
                files.append(item.split.file_path)
            assert item.watermark is not None
            # the item's rows are not older than the watermark it carries
            assert item.watermark <= _ms(min(item.batch.column("ts").to_pylist()))
            watermarks.append(item.watermark)
            item.ack()
        final = stream.watermark
    assert files == oracle
    assert watermarks == sorted(watermarks) and watermarks[0] < watermarks[-1]
    assert final is not None and final >= watermarks[-1]
    assert open_store(str(tmp_path / "ckpt")).read().watermark_ms == final


def test_watermark_never_decreases_across_a_restart_and_late_files(catalog: Catalog,
                                                                     tmp_path: Path) -> None:
    table = event_table(catalog)
    ckpt = str(tmp_path / "ckpt")
    before: list[int] = []
    seen: list[int] = []
    stream = IcebergSource("db.events", catalog, OPTS).stream(
        checkpoint=ckpt, parallelism=1, checkpoint_interval_s=0)
    stream.start()
    for n, item in enumerate(stream):
        seen.extend(item.batch.column("id").to_pylist())
        before.append(item.watermark)
        item.ack()
        if n == 2:
            break
    _crash(stream)
    stored = open_store(ckpt).read().watermark_ms
    assert stored is not None and stored >= before[-1]
    table.append(hour_rows(0, 3, first_id=9000))  # a late file: older than the watermark
    after: list[int] = []
    with IcebergSource("db.events", catalog, OPTS).stream(
            checkpoint=ckpt, parallelism=2, available_now=True,
            checkpoint_interval_s=0) as again:
        for item in again:
            seen.extend(item.batch.column("id").to_pylist())
            after.append(item.watermark)
            item.ack()
    assert after and after == sorted(after)
    assert after[0] >= stored  # restored: not below what was reported before the crash
    expected = sorted(table.refresh().scan().to_arrow().column("id").to_pylist())
    assert sorted(set(seen)) == expected  # the late file is read, nothing is lost


def test_checkpoint_without_the_option_is_refused_mid_unit_with_it(catalog: Catalog,
                                                                    tmp_path: Path) -> None:
    event_table(catalog)
    ckpt = str(tmp_path / "ckpt")
    stream = IcebergSource("db.events", catalog, {"pollIntervalMs": "50"}).stream(
        checkpoint=ckpt, parallelism=1, checkpoint_interval_s=0)
    stream.start()
    next(iter(stream)).ack()
    _crash(stream)
    written = open_store(ckpt).read()
    assert written.watermark_ms is None and not written.position.is_unit_complete
    try:
        IcebergSource("db.events", catalog, OPTS).stream(checkpoint=ckpt).start()
    except CheckpointMismatchError as exc:
        assert "watermarkColumn" in str(exc)
    else:
        raise AssertionError("a checkpoint inside a unit planned in file order was resumed "
                             "in event-time order")
    # without the option it still resumes, meaning what it meant
    rest: list[int] = []
    with IcebergSource("db.events", catalog, {"pollIntervalMs": "50"}).stream(
            checkpoint=ckpt, available_now=True, checkpoint_interval_s=0) as same:
        for item in same:
            rest.extend(item.batch.column("id").to_pylist())
            item.ack()
    assert len(rest) == 12 * (len(HOURS) - 1)
