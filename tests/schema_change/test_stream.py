"""Schema changes while a stream runs (``onSchemaChange``), on PyIceberg-written tables.

Every kind of change (add, rename top-level and nested, drop, re-add a dropped name,
int -> long, float -> double, reorder, partition spec change) is committed between two
appends while a stream runs, in every mode. The rows of the snapshot after the change are
compared with PyIceberg's own read of the files it added, projected onto the schema the
mode promises (the snapshot's for ``evolve`` and a restarted ``fail``, the start schema
for ``keep``). The full matrix runs on the local engine; Ray runs one case of each mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icefloe import IcebergSource, InvalidOptionError, SchemaChangedError
from icefloe.coordinator import StreamBase
from icefloe.coordinator.item import StreamItem
from icefloe.state import open_store
from tests.helpers.schema_changes import (
    CHANGED,
    CHANGES,
    KIND_OF,
    SCHEMA,
    added_rows,
    append_in_current_schema,
    make_sc_table,
    snapshot_schema,
    what_changed,
)

pytestmark = pytest.mark.timeout(240)
FAST = {"pollIntervalMs": "50", "batchSize": "4"}
ALLOW = {"allowColumnRename": "true", "allowColumnDrop": "true"}
WIDENING = ("int_long", "float_double")


def open_stream(engine: str, catalog: SqlCatalog, checkpoint: str,
                options: dict[str, str]) -> StreamBase:
    if engine == "local":
        stream: StreamBase = IcebergSource("db.sc", catalog=catalog, options=options).stream(
            checkpoint=checkpoint, parallelism=2, checkpoint_interval_s=0)
    else:
        import icefloe.ray

        stream = icefloe.ray.RayStream("db.sc", catalog=catalog, options=options,
                                       checkpoint=checkpoint, num_readers=2,
                                       reader_num_cpus=0.25, checkpoint_interval_s=0)
    stream.start()
    return stream


def take(items: Iterator[StreamItem], n: int) -> list[StreamItem]:
    """Items until ``n`` rows arrived, each acknowledged (and recorded) before the next."""
    got: list[StreamItem] = []
    while sum(i.batch.num_rows for i in got) < n:
        item = next(items)
        item.ack(wait=True)
        got.append(item)
    return got


def rows_of(items: list[StreamItem]) -> list[dict[str, Any]]:
    table = pa.Table.from_batches([i.batch for i in items])
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def run_case(engine: str, catalog: SqlCatalog, tmp_path: Path, kind: str, mode: str,
             extra: dict[str, str] | None = None) -> dict[str, Any]:
    """Append A, stream it, commit ``kind``, append B; return what the stream did with B:
    ``{"items": [...], "error": exc, "a": snapshot id, "b": ..., "table": ...}``."""
    tbl = make_sc_table(catalog)
    a = append_in_current_schema(tbl, range(10))
    ckpt = str(tmp_path / "ckpt")
    options = {**FAST, "onSchemaChange": mode, **(extra or {})}
    out: dict[str, Any] = {"a": a, "table": tbl, "ckpt": ckpt, "options": options,
                           "start": tbl.refresh().schema()}
    with open_stream(engine, catalog, ckpt, options) as stream:
        items = iter(stream)
        first = take(items, 10)
        assert rows_of(first) == added_rows(tbl, a, tbl.schema())
        assert {i.schema_id for i in first} == {0}
        assert all(i.schema_change is None for i in first)
        CHANGES[kind](tbl)
        out["b"] = append_in_current_schema(tbl, range(10, 20))
        try:
            out["items"] = take(items, 10)
        except SchemaChangedError as exc:
            out["error"] = exc
    return out


def check_evolved(out: dict[str, Any], kind: str) -> None:
    """B's items are in B's schema, PyIceberg's rows; the first says what changed."""
    tbl, b, items = out["table"], out["b"], out["items"]
    schema = snapshot_schema(tbl, b)
    assert rows_of(items) == added_rows(tbl, b, schema)
    assert {i.schema_id for i in items} == {schema.schema_id}
    assert all(i.batch.schema.names == [f.name for f in schema.fields] for i in items)
    changes = [i.schema_change for i in items if i.schema_change is not None]
    field = KIND_OF[kind]
    if field is None:  # a partition spec change is no schema change
        assert schema.schema_id == 0 and not changes
        specs = {t.file.spec_id for t in tbl.refresh().scan(snapshot_id=b).plan_files()}
        assert specs == {0, 1}, "B was not written in the new partition spec"
        return
    assert len(changes) == 1 and items[0].schema_change is changes[0], \
        "the change comes with the first item of the new schema, and only with it"
    change = changes[0]
    assert change.snapshot_id == b and change.to_schema_id == schema.schema_id
    assert what_changed(change) == CHANGED[kind], f"{kind}: {change}"


# -- the matrix on the local engine ------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_evolve_switches_at_the_snapshot_boundary(catalog: SqlCatalog, tmp_path: Path,
                                                  kind: str) -> None:
    out = run_case("local", catalog, tmp_path, kind, "evolve", ALLOW)
    check_evolved(out, kind)
    ckpt = open_store(out["ckpt"]).read()
    assert ckpt.schema_id == snapshot_schema(out["table"], out["b"]).schema_id


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_keep_projects_onto_the_start_schema(catalog: SqlCatalog, tmp_path: Path,
                                             kind: str) -> None:
    out = run_case("local", catalog, tmp_path, kind, "keep", ALLOW)
    if kind in WIDENING:
        exc = out["error"]
        assert exc.snapshot_id == out["b"] and exc.change.widened
        assert "onSchemaChange=keep cannot read column" in str(exc)
        return
    items = out["items"]
    assert rows_of(items) == added_rows(out["table"], out["b"], out["start"])
    assert {i.schema_id for i in items} == {0}
    assert all(i.schema_change is None for i in items)
    assert items[0].batch.schema.names == [f.name for f in SCHEMA.fields]


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_fail_stops_before_the_change_and_a_restart_reads_on(
        catalog: SqlCatalog, tmp_path: Path, kind: str) -> None:
    out = run_case("local", catalog, tmp_path, kind, "fail")
    tbl, b = out["table"], out["b"]
    if KIND_OF[kind] is None:  # a spec change does not stop the stream
        assert rows_of(out["items"]) == added_rows(tbl, b, out["start"])
        return
    exc = out["error"]
    assert exc.snapshot_id == b and what_changed(exc.change) == CHANGED[kind], str(exc)
    assert str(b) in str(exc) and "restart" in str(exc)
    ckpt = open_store(out["ckpt"]).read()
    assert ckpt.schema_id == 0
    assert ckpt.position.snapshot_id == out["a"] and ckpt.position.is_unit_complete
    gated = KIND_OF[kind] in ("renamed", "dropped")
    if gated:  # a rename / drop needs its explicit unblock on the restart
        with pytest.raises(SchemaChangedError, match="allowColumn"):
            open_stream("local", catalog, out["ckpt"], out["options"])
    with open_stream("local", catalog, out["ckpt"], {**out["options"], **ALLOW}) as stream:
        items = take(iter(stream), 10)
    schema = snapshot_schema(tbl, b)
    assert rows_of(items) == added_rows(tbl, b, schema)
    assert {i.schema_id for i in items} == {schema.schema_id}
    assert open_store(out["ckpt"]).read().schema_id == schema.schema_id


# -- the gates -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "option"), [("rename", "allowColumnRename"),
                                              ("rename_nested", "allowColumnRename"),
                                              ("drop", "allowColumnDrop"),
                                              ("readd", "allowColumnDrop")])
def test_evolve_needs_the_explicit_unblock(catalog: SqlCatalog, tmp_path: Path, kind: str,
                                           option: str) -> None:
    out = run_case("local", catalog, tmp_path, kind, "evolve")
    exc = out["error"]
    assert exc.snapshot_id == out["b"]
    assert f"{option}=true" in str(exc)
    # nothing of B was acknowledged: the checkpoint stays before it, in the old schema
    ckpt = open_store(out["ckpt"]).read()
    assert (ckpt.position.snapshot_id, ckpt.schema_id) == (out["a"], 0)


def test_keep_needs_allow_drop(catalog: SqlCatalog, tmp_path: Path) -> None:
    out = run_case("local", catalog, tmp_path, "drop", "keep")
    assert "allowColumnDrop=true" in str(out["error"])


# -- more than one change, restarts, order -------------------------------------------------------


def test_two_changes_two_events_and_a_restart_mid_way(catalog: SqlCatalog,
                                                      tmp_path: Path) -> None:
    """add, append B, rename, append C and D: two events, each on the first item of its
    schema; a restart after B resumes in B's schema and switches again at C."""
    tbl = make_sc_table(catalog)
    append_in_current_schema(tbl, range(5))
    ckpt = str(tmp_path / "ckpt")
    opts = {**FAST, **ALLOW}
    with open_stream("local", catalog, ckpt, opts) as stream:
        items = iter(stream)
        take(items, 5)
        CHANGES["add"](tbl)
        b = append_in_current_schema(tbl, range(5, 10))
        got_b = take(items, 5)
    assert got_b[0].schema_change is not None and got_b[0].schema_change.added == ("extra",)
    assert open_store(ckpt).read().schema_id == 1
    CHANGES["rename"](tbl)
    c = append_in_current_schema(tbl, range(10, 20))
    d = append_in_current_schema(tbl, range(20, 25))
    with open_stream("local", catalog, ckpt, opts) as stream:
        got = take(iter(stream), 15)
    ids = [i.schema_id for i in got]
    assert ids == sorted(ids) and set(ids) == {2}, "C and D in schema 2 after the restart"
    events = [i.schema_change for i in got if i.schema_change is not None]
    assert len(events) == 1 and events[0].renamed == (("name", "label"),)
    assert events[0].snapshot_id == c
    assert rows_of(got) == sorted(added_rows(tbl, c, snapshot_schema(tbl, c))
                                  + added_rows(tbl, d, snapshot_schema(tbl, d)),
                                  key=lambda r: r["id"])
    assert rows_of(got_b) == added_rows(tbl, b, snapshot_schema(tbl, b))


def test_start_reads_history_in_the_current_schema(catalog: SqlCatalog,
                                                   tmp_path: Path) -> None:
    """Changes before the stream started are no event: every snapshot up to the head is
    read in the current schema (as PyIceberg reads old files with a newer schema)."""
    tbl = make_sc_table(catalog)
    a = append_in_current_schema(tbl, range(5))
    CHANGES["rename"](tbl)
    b = append_in_current_schema(tbl, range(5, 10))
    opts = {**FAST, "onSchemaChange": "fail", "startingVersion": "earliest"}
    with open_stream("local", catalog, str(tmp_path / "c"), opts) as stream:
        got = take(iter(stream), 10)
    current = tbl.refresh().schema()
    assert rows_of(got) == sorted(added_rows(tbl, a, current) + added_rows(tbl, b, current),
                                  key=lambda r: r["id"])
    assert all(i.schema_change is None for i in got)


def test_bad_mode_is_a_typed_error(catalog: SqlCatalog) -> None:
    make_sc_table(catalog)
    with pytest.raises(InvalidOptionError, match="'evlove' is not one of fail, evolve, keep"):
        IcebergSource("db.sc", catalog=catalog, options={"onSchemaChange": "evlove"})
    with pytest.raises(InvalidOptionError, match="applies only to a stream"):
        IcebergSource("db.sc", catalog=catalog,
                      options={"onSchemaChange": "keep"}).to_arrow()


# -- Ray: one case per mode ----------------------------------------------------------------------


@pytest.mark.ray
def test_ray_evolve_keep_and_fail(ray_local: None, catalog: SqlCatalog, tmp_path: Path) -> None:
    out = run_case("ray", catalog, tmp_path / "evolve", "rename_nested", "evolve", ALLOW)
    check_evolved(out, "rename_nested")
    catalog.drop_table("db.sc")
    out = run_case("ray", catalog, tmp_path / "keep", "drop", "keep", ALLOW)
    assert rows_of(out["items"]) == added_rows(out["table"], out["b"], out["start"])
    assert [r["old"] for r in rows_of(out["items"])] == [None] * 10
    catalog.drop_table("db.sc")
    out = run_case("ray", catalog, tmp_path / "fail", "add", "fail")
    assert out["error"].snapshot_id == out["b"] and out["error"].change.added == ("extra",)
    with open_stream("ray", catalog, out["ckpt"], out["options"]) as stream:
        items = take(iter(stream), 10)
    tbl, b = out["table"], out["b"]
    assert rows_of(items) == added_rows(tbl, b, snapshot_schema(tbl, b))
