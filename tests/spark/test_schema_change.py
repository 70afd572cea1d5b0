"""Schema changes under ``spark.readStream.format("icefloe")`` (``onSchemaChange``).

A Spark query's schema is fixed when it starts: ``fail`` (the default) stops the query
before the first snapshot of another schema; the restarted query reads on in the new
schema (a rename needs ``allowColumnRename``) and the Parquet sink holds every row once;
``keep`` goes on in the start schema; ``evolve`` is refused. Rows against PyIceberg's own
read of the files each snapshot added (tests/helpers/schema_changes.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.helpers.schema_changes import (
    CHANGES,
    added_rows,
    append_in_current_schema,
    make_sc_table,
    snapshot_schema,
)
from tests.helpers.tables import make_catalog
from tests.reliability.spark_harness import sink_files
from tests.spark.test_streaming import catalog_opts

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def start_query(spark: Any, catalog: Any, out: Path, ckpt: Path, available_now: bool,
                **extra: str) -> Any:
    reader = spark.readStream.format("icefloe")
    for key, value in {**catalog_opts(catalog), "pollIntervalMs": "100", **extra}.items():
        reader = reader.option(key, value)
    writer = (reader.load("db.sc").writeStream.format("parquet").option("path", str(out))
              .option("checkpointLocation", str(ckpt)))
    writer = writer.trigger(availableNow=True) if available_now \
        else writer.trigger(processingTime="200 milliseconds")
    return writer.start()


def sink_rows(out: Path) -> list[dict[str, Any]]:
    """Every row of every Parquet file the sink committed (listed in ``_spark_metadata``,
    as Spark's own file-sink reader reads; each file in its own schema)."""
    if not (out / "_spark_metadata").exists():
        return []
    rows = [r for f in sink_files(out) for r in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: r["id"])


def finish(query: Any, timeout_s: float = 120) -> str | None:
    """Wait for ``query`` to end; its exception's text (None: it ended cleanly)."""
    try:
        query.awaitTermination(timeout_s)
    except Exception as exc:  # StreamingQueryException: what query.exception() holds
        return str(exc)
    exc = query.exception()
    return None if exc is None else str(exc)


def wait_rows(out: Path, n: int, query: Any, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while len(sink_rows(out)) < n:
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"the sink never reached {n} rows"
        time.sleep(0.2)


def test_fail_stops_the_query_and_the_restart_reads_on_in_the_new_schema(
        spark: Any, tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    tbl = make_sc_table(catalog)
    a = append_in_current_schema(tbl, range(10))
    start = tbl.schema()
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    query = start_query(spark, catalog, out, ckpt, available_now=False)
    try:
        wait_rows(out, 10, query)
        CHANGES["rename"](tbl)
        b = append_in_current_schema(tbl, range(10, 20))
        message = str(finish(query))
    finally:
        query.stop()
    assert "SchemaChangedError" in message and str(b) in message
    assert "renamed 'name' to 'label'" in message
    assert sink_rows(out) == added_rows(tbl, a, start), "A delivered, nothing of B"

    # the restart reads in the new schema, but a rename needs its explicit unblock
    refused = start_query(spark, catalog, out, ckpt, available_now=True)
    assert "allowColumnRename=true" in str(finish(refused))

    again = start_query(spark, catalog, out, ckpt, available_now=True,
                        allowColumnRename="true")
    assert finish(again) is None
    got = sink_rows(out)
    assert [r["id"] for r in got] == list(range(20)), "every row exactly once"
    assert got[10:] == added_rows(tbl, b, snapshot_schema(tbl, b))


def test_keep_goes_on_in_the_start_schema(spark: Any, tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    tbl = make_sc_table(catalog)
    append_in_current_schema(tbl, range(10))
    start = tbl.schema()
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    query = start_query(spark, catalog, out, ckpt, available_now=False,
                        onSchemaChange="keep")
    try:
        wait_rows(out, 10, query)
        CHANGES["add"](tbl)
        b = append_in_current_schema(tbl, range(10, 20))
        wait_rows(out, 20, query)
    finally:
        query.stop()
    got = sink_rows(out)
    assert [r["id"] for r in got] == list(range(20))
    assert got[10:] == added_rows(tbl, b, start), "B in the start schema (no 'extra')"


def test_evolve_is_refused_on_spark(spark: Any, tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    make_sc_table(catalog)
    try:
        message = finish(start_query(spark, catalog, tmp_path / "o", tmp_path / "c",
                                     available_now=True, onSchemaChange="evolve"), 60)
    except Exception as exc:  # refused while the query is defined
        message = f"{type(exc).__name__}: {exc}"
    assert message is not None and "evolve is not possible on Spark" in message
    assert "InvalidOptionError" in message


def test_columns_and_filter_typed_before_a_rename_work_after_the_restart(
        spark: Any, tmp_path: Path) -> None:
    """The query's options name ``name``; the table renames it ``label`` between two
    queries on one checkpoint (the first stopped by ``fail`` at the rename). The restarted
    query with the same options reads B in the new schema: the column under its new name,
    the filter applied to it. Oracle: PyIceberg's scan of the head in the new names."""
    catalog = make_catalog(tmp_path)
    tbl = make_sc_table(catalog)
    append_in_current_schema(tbl, range(10))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    named = {"columns": "id,name", "filter": "name not in ('n3', 'n13')"}
    assert finish(start_query(spark, catalog, out, ckpt, available_now=True, **named)) is None
    CHANGES["rename"](tbl)
    append_in_current_schema(tbl, range(10, 20))
    again = start_query(spark, catalog, out, ckpt, available_now=True,
                        allowColumnRename="true", **named)
    assert finish(again) is None
    files = sink_files(out)
    assert {tuple(pq.read_schema(f).names) for f in files} == {("id", "name"), ("id", "label")}
    got = sorted(([r["id"], r.get("name", r.get("label"))] for f in files
                  for r in pq.read_table(f).to_pylist()), key=lambda r: r[0])
    expected = catalog.load_table("db.sc").scan(
        row_filter="label not in ('n3', 'n13')", selected_fields=("id", "label")).to_arrow()
    assert got == sorted(([r["id"], r["label"]] for r in expected.to_pylist()),
                         key=lambda r: r[0])
