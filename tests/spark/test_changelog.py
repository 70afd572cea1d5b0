"""Changelog reads on Spark: spark.read (batch) and spark.readStream (availableNow into a
Parquet file sink, one file per micro-batch), judged by the multiset oracle of PyIceberg's
scans; netChanges refused with one typed error."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.helpers.changelog import changes_by_commit, check_every_snapshot, rows_at
from tests.helpers.tables import add_position_deletes, live_data_files, make_table, rows

pytestmark = pytest.mark.spark


def _catalog_opts(catalog) -> dict[str, str]:
    props = catalog.properties
    return {"catalog": "test", "catalog.type": "sql", "catalog.uri": props["uri"],
            "catalog.warehouse": props["warehouse"]}


def changelog_history(catalog):
    """db.events: two appends, a delete, then position deletes on a live file."""
    table = make_table(catalog)
    table.append(rows(8))
    table.append(rows(4, start=8))
    table.delete("id < 3")
    table = catalog.load_table("db.events")
    add_position_deletes(table, {sorted(live_data_files(table))[0]: [0]})
    return catalog.load_table("db.events")


def test_spark_batch_changelog(spark, catalog) -> None:
    table = changelog_history(catalog)
    df = (spark.read.format("icefloe").options(**_catalog_opts(catalog))
          .option("changelog", "true").load("db.events"))
    assert df.columns[-4:] == ["_change_type", "_change_ordinal", "_commit_snapshot_id",
                               "_commit_timestamp"]
    got = [r.asDict() for r in df.collect()]
    assert check_every_snapshot(table, got) == 4
    net = (spark.read.format("icefloe").options(**_catalog_opts(catalog))
           .option("changelog", "true").option("netChanges", "true")
           .option("startSnapshotId", str(table.snapshots()[0].snapshot_id)).load("db.events"))
    assert net.rdd.getNumPartitions() == 1  # the net effect is computed in one task
    first = rows_at(table, table.snapshots()[0].snapshot_id)
    last = rows_at(table, table.current_snapshot().snapshot_id)
    removed, added = changes_by_commit(
        {**r.asDict(), "_commit_snapshot_id": 0} for r in net.collect())[0]
    assert (removed, added) == (first - last, last - first)


def test_spark_changelog_stream_into_a_file_sink(spark, catalog, tmp_path: Path) -> None:
    table = changelog_history(catalog)
    reader = spark.readStream.format("icefloe").options(**_catalog_opts(catalog))
    for key, value in {"changelog": "true", "startingVersion": "earliest",
                       "maxFilesPerTrigger": "1"}.items():
        reader = reader.option(key, value)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    query = (reader.load("db.events").writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) > 1  # admission control cuts the changes into micro-batches
    got = [r for f in sorted(out.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert check_every_snapshot(table, got) == 4
