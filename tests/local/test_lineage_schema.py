"""A lineage reset onto a re-created table restarts the stream schema (issue 26), and
re-resolves ``watermarkColumn`` there (by name: the new table's field id).

The re-created table numbers its schemas from 0 again, so the stream's schema id of the
old table may mean other columns in the new one. After ``onLineageBreak`` moved the stream
onto the new table, its rows come in the new table's schema (oracle: PyIceberg's scan of
the new table), and the first item says what changed.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

from icefloe import IcebergSource, SchemaChangedError
from icefloe.state import open_store
from tests.helpers.event_time import BASE, event_table, pyiceberg_bounds
from tests.helpers.tables import make_catalog, make_table, rows
from tests.helpers.waiting import ack_rows

pytestmark = pytest.mark.timeout(180)

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
        ack_rows(items, 10)
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


# -- watermarkColumn on the re-created table -------------------------------------------------

RECREATED_EVENTS = Schema(  # ``ts`` under another field id; field 2 is a string now
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "note", StringType(), required=False),
    NestedField(3, "ts", TimestamptzType(), required=False),
)


def _follow_onto_recreated(catalog: Catalog, tmp_path: Path, schema: Schema,
                           data: list[pa.Table], **names: str
                           ) -> tuple[list[Any], Exception | None]:
    """Stream the event table with ``names`` (default ``watermarkColumn=ts``), drop it,
    re-create it with ``schema`` and ``data`` (one append each); the items of the new
    table, or the error."""
    old = event_table(catalog, hours=(1, 0), n=4)
    opts = {"pollIntervalMs": "50", "onLineageBreak": "restartFromStart",
            "retryBackoffMs": "100", **(names or {"watermarkColumn": "ts"})}
    got: list[Any] = []
    old_files = {task.file.file_path for task in old.scan().plan_files()}
    with IcebergSource("db.events", catalog=catalog, options=opts).stream(
            checkpoint=str(tmp_path / "ckpt"), checkpoint_interval_s=0) as stream:
        items = iter(stream)
        ack_rows(items, 8)
        catalog.drop_table("db.events")
        new = catalog.create_table("db.events", schema, properties={"format-version": "2"})
        for part in data:
            new.append(part)
        total = sum(part.num_rows for part in data)
        try:
            while sum(i.batch.num_rows for i in got) < total:
                item = next(items)
                item.ack()
                if item.split.file_path in old_files:
                    continue
                got.append(item)
        except SchemaChangedError as exc:
            return got, exc
    return got, None


def test_a_reset_resolves_the_watermark_column_in_the_recreated_table(
        catalog: Catalog, tmp_path: Path) -> None:
    data = [pa.table({"id": pa.array([10 * h + i for i in range(3)], pa.int64()),
                      "note": [f"x{h}"] * 3,
                      "ts": [BASE + dt.timedelta(hours=h, minutes=i) for i in range(3)]},
                     schema=schema_to_pyarrow(RECREATED_EVENTS)) for h in (7, 6)]
    got, error = _follow_onto_recreated(catalog, tmp_path, RECREATED_EVENTS, data)
    assert error is None
    bounds = pyiceberg_bounds(catalog.load_table("db.events"), "ts")
    assert {i.split.file_path for i in got} == set(bounds)
    for item in got:  # the new table's ts (field 3), not its field 2 (``note``)
        bound = bounds[item.split.file_path]
        micros = bound if isinstance(bound, int) else int(bound.timestamp() * 1_000_000)
        assert item.split.watermark_ms == micros // 1000
    ids = sorted(r for i in got for r in i.batch.column("id").to_pylist())
    assert ids == sorted(r for part in data for r in part.column("id").to_pylist())


def test_a_reset_onto_a_table_without_the_watermark_column_is_a_typed_error(
        catalog: Catalog, tmp_path: Path) -> None:
    got, error = _follow_onto_recreated(catalog, tmp_path, NEW_SCHEMA, [
        pa.table({"id": pa.array([1], pa.int64()), "name": ["a"], "score": [1.0]})])
    assert isinstance(error, SchemaChangedError), error
    assert not got, "nothing of the new table is read without its event time"
    message = str(error)
    assert "re-created" in message and "watermarkColumn" in message and "'ts'" in message
    assert "added 'id', 'name', 'score'" in message, "the new table's columns are named"


def test_a_reset_onto_a_table_without_a_selected_column_is_a_typed_error(
        catalog: Catalog, tmp_path: Path) -> None:
    got, error = _follow_onto_recreated(catalog, tmp_path, NEW_SCHEMA, [
        pa.table({"id": pa.array([1], pa.int64()), "name": ["a"], "score": [1.0]})],
        columns="id,kind")
    assert isinstance(error, SchemaChangedError), error
    assert not got
    assert "re-created" in str(error) and "columns option names column 'kind'" in str(error)
