"""``columns`` and ``filter`` keep naming their columns across a rename (issue 26).

The stream's options name ``name``; the table renames it to ``label`` while the stream runs
(``onSchemaChange=evolve``), or while it is stopped. The names typed stay valid: at the
switch in the same run, and after a restart from a checkpoint taken before or after the
rename. Batches carry the column under its name in the schema they were read in
(``label`` from the switch on), as the projection of every other column does. Oracle:
PyIceberg's scan of the head with the same filter and columns in the new names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.types import StringType

from icefloe import IcebergSource, SchemaChangedError
from icefloe.coordinator.item import StreamItem
from icefloe.reader.names import TypedNames
from icefloe.state import open_store
from tests.helpers.schema_changes import CHANGES, append_in_current_schema, make_sc_table
from tests.schema_change.test_stream import FAST, open_stream, take

pytestmark = pytest.mark.timeout(240)
SKIPPED = ("n3", "n13", "n23", "n33")
NAMED = {**FAST, "allowColumnRename": "true", "columns": "id,name",
         "filter": "name not in ({})".format(", ".join(f"'{s}'" for s in SKIPPED))}
"""The options as the user typed them, before the rename (``name``)."""


def oracle(catalog: SqlCatalog) -> list[dict[str, Any]]:
    """PyIceberg's scan of the head, filtered and projected in the new names."""
    table = catalog.load_table("db.sc")
    where = "label not in ({})".format(", ".join(f"'{s}'" for s in SKIPPED))
    data = table.scan(row_filter=where, selected_fields=("id", "label")).to_arrow()
    return sorted(data.to_pylist(), key=lambda r: r["id"])


def as_new_names(items: list[StreamItem]) -> list[dict[str, Any]]:
    """The items' rows, each batch's two columns named ``id`` and ``label``."""
    rows = []
    for item in items:
        batch = item.batch.rename_columns(["id", "label"])
        rows.extend(pa.Table.from_batches([batch]).to_pylist())
    return sorted(rows, key=lambda r: r["id"])


def test_evolve_follows_a_rename_in_the_run_and_after_a_restart(
        engine: str, catalog: SqlCatalog, tmp_path: Path) -> None:
    """A in ``name``; the rename and B while the stream runs (the switch); a restart from
    the checkpoint taken after the rename, with the same options, reads C."""
    tbl = make_sc_table(catalog)
    append_in_current_schema(tbl, range(10))
    ckpt = str(tmp_path / "ckpt")
    with open_stream(engine, catalog, ckpt, NAMED) as stream:
        items = iter(stream)
        got_a = take(items, 9)
        CHANGES["rename"](tbl)
        b = append_in_current_schema(tbl, range(10, 20))
        got_b = take(items, 9)
    assert open_store(ckpt).read().schema_id == 1, "the checkpoint is in the new schema"
    append_in_current_schema(tbl, range(20, 30))
    with open_stream(engine, catalog, ckpt, NAMED) as stream:
        got_c = take(iter(stream), 9)
    assert all(i.batch.schema.names == ["id", "name"] for i in got_a)
    assert all(i.batch.schema.names == ["id", "label"] for i in got_b + got_c)
    changes = [i.schema_change for i in got_b if i.schema_change is not None]
    assert changes and changes[0].renamed == (("name", "label"),)
    assert changes[0].snapshot_id == b
    assert as_new_names(got_a + got_b + got_c) == oracle(catalog)


def test_restart_from_a_checkpoint_before_the_rename(catalog: SqlCatalog,
                                                     tmp_path: Path) -> None:
    tbl = make_sc_table(catalog)
    append_in_current_schema(tbl, range(10))
    ckpt = str(tmp_path / "ckpt")
    with open_stream("local", catalog, ckpt, NAMED) as stream:
        got_a = take(iter(stream), 9)
    CHANGES["rename"](tbl)
    append_in_current_schema(tbl, range(10, 20))
    assert open_store(ckpt).read().schema_id == 0
    with open_stream("local", catalog, ckpt, NAMED) as stream:
        got_b = take(iter(stream), 9)
    assert got_b[0].schema_change is not None
    assert got_b[0].schema_change.renamed == (("name", "label"),)
    assert all(i.batch.schema.names == ["id", "label"] for i in got_b)
    assert as_new_names(got_a + got_b) == oracle(catalog)
    # the new names work as well on a restart (the filter changed at a unit boundary)
    append_in_current_schema(tbl, range(30, 40))
    renamed = {**NAMED, "columns": "id,label",
               "filter": NAMED["filter"].replace("name", "label")}
    with open_stream("local", catalog, ckpt, renamed) as stream:
        got_d = take(iter(stream), 9)
    assert as_new_names(got_a + got_b + got_d) == oracle(catalog)


def test_a_filter_on_a_dropped_column_stops_at_the_drop(catalog: SqlCatalog,
                                                        tmp_path: Path) -> None:
    tbl = make_sc_table(catalog)
    a = append_in_current_schema(tbl, range(10))
    opts = {**FAST, "allowColumnDrop": "true", "filter": "old <> 'o3'"}
    with open_stream("local", catalog, str(tmp_path / "ckpt"), opts) as stream:
        items = iter(stream)
        take(items, 9)
        CHANGES["drop"](tbl)
        b = append_in_current_schema(tbl, range(10, 20))
        with pytest.raises(SchemaChangedError) as info:
            take(items, 10)
    assert info.value.snapshot_id == b
    assert "filter option names column 'old'" in str(info.value)
    ckpt = open_store(str(tmp_path / "ckpt")).read()
    assert ckpt.position.snapshot_id == a and ckpt.schema_id == 0, "nothing of B passed"


def test_names_resolve_in_the_stream_schema_then_in_the_table_history(
        catalog: SqlCatalog) -> None:
    """Schema 0 ``name``; 1 renames it ``label``; 2 adds a new ``name`` (another field
    id). In schema 1 the old name means the renamed column; in schema 2 the new one."""
    tbl = make_sc_table(catalog)
    CHANGES["rename"](tbl)
    with tbl.refresh().update_schema() as update:
        update.add_column("name", StringType())
    metadata = tbl.refresh().metadata
    opts = IcebergSource("db.sc", catalog=catalog, options={
        "columns": "id,name", "filter": "name = 'x' and nope = 1"}).options
    in_one = TypedNames.resolve(opts, metadata, metadata.schema_by_id(1))  # type: ignore[arg-type]
    assert dict(in_one.field_ids) == {"id": 1, "name": 2}
    assert in_one.columns_in(("id", "name"), metadata.schema_by_id(1)) == ("id", "label")  # type: ignore[arg-type]
    assert in_one.unresolved(("nope",)) == ("nope",)
    in_two = TypedNames.resolve(opts, metadata, metadata.schema())
    new_id = metadata.schema().find_field("name").field_id
    assert new_id != 2 and dict(in_two.field_ids)["name"] == new_id
    assert in_two.renames_in(metadata.schema()) == ()
