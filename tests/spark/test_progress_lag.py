"""icefloe.spark.progress_lag: a Spark streaming query's progress as icefloe's lag.

A real query on a real local Spark processes the table (Trigger.AvailableNow, a Parquet
sink), then K snapshots of known record counts are committed behind it; the lag read from
the query's last progress must be exactly those (files and bytes against PyIceberg's scan
plans, seconds against the commit timestamps).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import icefloe.spark
from icefloe.errors import InvalidOptionError
from tests.helpers.tables import make_catalog, make_table, rows

from .test_streaming import catalog_opts

pytestmark = pytest.mark.spark


def test_progress_lag_counts_what_the_query_has_not_read(spark, tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path / "wh")
    table = make_table(catalog)
    table.append(rows(10))
    opts = catalog_opts(catalog)
    reader = spark.readStream.format("icefloe")
    for key, value in opts.items():
        reader = reader.option(key, value)
    query = (reader.load("db.events").writeStream.format("parquet")
             .option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    progress = query.lastProgress
    source = progress["sources"][0]
    # reportLatestOffset: Spark's progress shows the head, here the same as the end
    assert json.loads(source["latestOffset"]) == json.loads(source["endOffset"])
    caught_up = icefloe.spark.progress_lag(progress, "db.events", opts)
    assert (caught_up.snapshots, caught_up.records, caught_up.seconds) == (0, 0, 0.0)

    base = table.current_snapshot()
    assert base is not None
    for i, n in enumerate((3, 4)):
        table.append(rows(n, start=100 + 10 * i))
    table.refresh()
    head = table.current_snapshot()
    assert head is not None
    before_files = {t.file.file_path for t in table.scan(snapshot_id=base.snapshot_id)
                    .plan_files()}
    added = [t.file for t in table.scan().plan_files() if t.file.file_path not in before_files]
    oldest_ms = min(s.timestamp_ms for s in table.snapshots()
                    if s.sequence_number > base.sequence_number)
    before = time.time()
    lag = icefloe.spark.progress_lag(progress.json, "db.events", opts)  # its JSON text
    after = time.time()
    assert (lag.snapshots, lag.records) == (2, 7)
    assert (lag.files, lag.bytes) == (len(added), sum(f.file_size_in_bytes for f in added))
    assert before - oldest_ms / 1000 <= lag.seconds <= after - oldest_ms / 1000
    assert lag.head_snapshot_id == head.snapshot_id

    with pytest.raises(InvalidOptionError, match="lastProgress"):
        icefloe.spark.progress_lag({"sources": []}, "db.events", opts)
