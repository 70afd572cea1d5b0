"""Event time on a table Java Iceberg wrote (files appended out of event-time order):
icefloe's split order against the bounds PyIceberg decodes from Java's manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icefloe import IcebergSource
from tests.helpers.event_time import event_time_order, pyiceberg_bounds

pytestmark = pytest.mark.interop

TABLE = "ns.event_time"


def test_java_files_planned_and_streamed_in_event_time_order(catalog: Any,
                                                             tmp_path: Path) -> None:
    table = catalog.load_table(TABLE)
    oracle = event_time_order(table)
    bounds = pyiceberg_bounds(table)
    assert len(oracle) == 6
    plain = [s.file_path for s in IcebergSource(TABLE, catalog).plan()]
    assert sorted(plain) == sorted(oracle) and plain != oracle  # the option must matter
    opts = {"watermarkColumn": "ts"}
    splits = list(IcebergSource(TABLE, catalog, opts).plan())
    assert [s.file_path for s in splits] == oracle
    assert [s.watermark_ms for s in splits] == [bounds[p] // 1000 for p in oracle]
    files: list[str] = []
    watermarks: list[int] = []
    with IcebergSource(TABLE, catalog, {**opts, "pollIntervalMs": "100"}).stream(
            checkpoint=str(tmp_path / "ckpt"), available_now=True,
            checkpoint_interval_s=0) as stream:
        for item in stream:
            if not files or files[-1] != item.split.file_path:
                files.append(item.split.file_path)
            watermarks.append(item.watermark)
            item.ack()
    assert files == oracle
    assert watermarks == sorted(watermarks) and watermarks[-1] == bounds[oracle[-1]] // 1000
