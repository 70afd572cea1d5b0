"""A lineage reset onto a re-created table restarts the stream schema (issue 26).

The re-created table numbers its schemas from 0 again, so the stream's schema id of the
old table may mean other columns in the new one. After ``onLineageBreak`` moved the stream
onto the new table, its rows come in the new table's schema (oracle: PyIceberg's scan of
the new table), and the first item says what changed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from icefloe import IcebergSource
from icefloe.state import open_store
from tests.helpers.tables import make_catalog, make_table, rows

NEW_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "score", DoubleType(), required=False),
)


@pytest.mark.parametrize("strategy", ["restartFromStart", "restartFromHead"])
def test_reset_onto_a_recreated_table_reads_its_schema(tmp_path: Path, strategy: str) -> None:
    catalog = make_catalog(tmp_path)
    old = make_table(catalog, "db.events")
    old.append(rows(10))
    opts = {"pollIntervalMs": "50", "onLineageBreak": strategy, "retryBackoffMs": "100"}
    got = []
    ckpt = str(tmp_path / "ckpt")
    with IcebergSource("db.events", catalog=catalog, options=opts).stream(
            checkpoint=ckpt, checkpoint_interval_s=0) as stream:
        items = iter(stream)
        seen = 0
        while seen < 10:
            item = next(items)
            seen += item.batch.num_rows
            item.ack()
        catalog.drop_table("db.events")
        # created with its first rows in one commit: the head restartFromHead starts after
        with catalog.create_table_transaction(
                "db.events", NEW_SCHEMA, properties={"format-version": "2"}) as create:
            create.append(pa.table({"id": pa.array([0], pa.int64()), "name": ["before"],
                                    "score": [0.0]}))
        new = catalog.load_table("db.events")
        assert new.schema().schema_id == old.schema().schema_id == 0  # same id, other columns
        # the reset writes its checkpoint at once: wait for it, so restartFromHead restarts
        # after the create commit and not after the append below
        deadline = time.monotonic() + 60
        while open_store(ckpt).read().table_identity != str(new.metadata.table_uuid):
            assert time.monotonic() < deadline, "the stream did not follow the new table"
            time.sleep(0.05)
        new.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"],
                             "score": [1.0, 2.0, 3.0]}))
        expected = catalog.load_table("db.events").scan(
            snapshot_id=new.refresh().current_snapshot().snapshot_id).to_arrow()  # type: ignore[union-attr]
        if strategy == "restartFromHead":
            expected = expected.filter(pa.compute.not_equal(expected.column("id"), 0))
        deadline = time.monotonic() + 60
        while sum(i.batch.num_rows for i in got) < expected.num_rows:
            assert time.monotonic() < deadline, "rows of the re-created table missing"
            item = next(items)
            got.append(item)
            item.ack()
    assert all(i.batch.schema.names == ["id", "name", "score"] for i in got)
    actual = pa.Table.from_batches([i.batch for i in got]).sort_by("id")
    assert actual.to_pylist() == expected.sort_by("id").to_pylist()
    change = got[0].schema_change
    assert change is not None, "the first item of the new table says the schema changed"
    # another table: every column is new, even the one whose name is the same
    assert change.added == ("id", "name", "score")
    assert change.dropped == ("id", "kind", "ts", "day", "value")
    assert all(i.schema_change is None for i in got[1:])
    assert {i.schema_id for i in got} == {0}  # the new table's schema id, as Iceberg names it
