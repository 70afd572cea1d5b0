"""Schema changes while a stream runs (issue 19), on tables Java Iceberg 1.10.2 wrote.

The writer's ``schema_changes`` step gives one table ``sc_<kind>`` per change: append A
(ids 0..9), the change (Spark SQL ``ALTER TABLE``), append B (ids 10..19) in the new
schema. Each test replays that history under a running stream with Java's own metadata
files: it registers the table in a fresh ``SqlCatalog`` at the first metadata file whose
current snapshot is A, streams A, then commits the rest exactly as ``SqlCatalog`` commits
(the catalog row's ``metadata_location`` moves to the final metadata file) and reads on
per ``onSchemaChange``. The data files stay in the interop warehouse; nothing is written
there.

The oracle is PyIceberg's own reader (``ArrowScan``) over the data files B added, in B's
schema (``evolve``, and ``fail`` after its restart) or in the start schema (``keep``);
rows are compared as sorted lists of dicts, so column names (renames) count, and column
order is compared on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from sqlalchemy import update
from sqlalchemy.orm import Session

from icefloe import IcebergSource, SchemaChangedError
from icefloe.coordinator.item import StreamItem
from icefloe.state import open_store
from tests.interop.conftest import MANIFEST, interop_catalog
from tests.interop.conftest import _missing as missing

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

KINDS = ("add", "rename", "rename_nested", "drop", "readd", "int_long", "float_double",
         "reorder", "spec")
MODES = ("fail", "evolve", "keep")

CHANGES: dict[str, dict[str, tuple[Any, ...]] | None] = {
    "add": {"added": ("extra",)},
    "rename": {"renamed": (("name", "label"),)},
    "rename_nested": {"renamed": (("info.a", "info.alpha"),)},
    "drop": {"dropped": ("old",)},
    "readd": {"added": ("old",), "dropped": ("old",)},
    "int_long": {"widened": (("n", "int", "long"),)},
    "float_double": {"widened": (("score", "float", "double"),)},
    "reorder": {"reordered": ("",)},
    "spec": None,  # a partition spec change is no schema change
}
"""What :class:`SchemaChange` must say for each kind (attributes not named are empty)."""

ALLOW = {"rename": {"allowColumnRename": "true"},
         "rename_nested": {"allowColumnRename": "true"},
         "drop": {"allowColumnDrop": "true"},
         "readd": {"allowColumnDrop": "true"}}
"""The unblock each kind needs in ``evolve`` (and a ``fail`` restart)."""

KEEP_REFUSES = ("int_long", "float_double")
"""``keep`` cannot read a widened column in its start type."""

CHANGE_FIELDS = ("added", "dropped", "renamed", "widened", "made_optional", "reordered")


# -- the replayed history -------------------------------------------------------------------


@dataclass
class History:
    """One ``sc_<kind>`` table registered at snapshot A in a catalog of its own."""

    kind: str
    catalog: SqlCatalog
    name: str
    after_a: str  # Java's first metadata file with A current
    final: str  # Java's last metadata file (B current)
    source: Table  # the table in the interop catalog (final metadata)
    snapshot_a: int
    snapshot_b: int

    @property
    def identifier(self) -> str:
        return f"ns.{self.name}"

    @property
    def metadata(self) -> TableMetadata:
        return self.source.metadata

    def _schema_id_at(self, snapshot_id: int) -> int:
        """The ``schema-id`` Java wrote on ``snapshot_id`` (read from the metadata)."""
        snap = self.metadata.snapshot_by_id(snapshot_id)
        assert snap is not None and snap.schema_id is not None
        return snap.schema_id

    def _schema(self, schema_id: int) -> Schema:
        schema = self.metadata.schema_by_id(schema_id)
        assert schema is not None
        return schema

    @property
    def start_schema(self) -> Schema:
        return self._schema(self.start_schema_id)

    @property
    def start_schema_id(self) -> int:
        return self._schema_id_at(self.snapshot_a)

    @property
    def b_schema(self) -> Schema:
        return self._schema(self.b_schema_id)

    @property
    def b_schema_id(self) -> int:
        return self._schema_id_at(self.snapshot_b)

    def commit(self) -> None:
        """Move the catalog row from A's metadata file to the final one, as
        ``SqlCatalog.commit_table`` does (compare-and-swap on ``metadata_location``)."""
        with Session(self.catalog.engine) as session:
            result = session.execute(
                update(IcebergTables)
                .where(IcebergTables.catalog_name == self.catalog.name,
                       IcebergTables.table_namespace == "ns",
                       IcebergTables.table_name == self.name,
                       IcebergTables.metadata_location == self.after_a)
                .values(metadata_location=self.final, previous_metadata_location=self.after_a))
            assert result.rowcount == 1  # type: ignore[attr-defined]
            session.commit()
        assert self.catalog.load_table(self.identifier).metadata_location == self.final

    def oracle_b(self, schema: Schema) -> pa.Table:
        """PyIceberg's read of the data files B added, projected to ``schema``."""
        tbl = self.source
        in_a = {t.file.file_path for t in tbl.scan(snapshot_id=self.snapshot_a).plan_files()}
        tasks = [t for t in tbl.scan(snapshot_id=self.snapshot_b).plan_files()
                 if t.file.file_path not in in_a]
        assert tasks, f"{self.name}: snapshot B added no data file"
        return ArrowScan(self.metadata, tbl.io, schema, AlwaysTrue()).to_table(tasks)

    def oracle_a(self) -> pa.Table:
        tasks = list(self.source.scan(snapshot_id=self.snapshot_a).plan_files())
        return ArrowScan(self.metadata, self.source.io, self.start_schema,
                         AlwaysTrue()).to_table(tasks)


@pytest.fixture
def history(request: pytest.FixtureRequest, tmp_path: Path) -> History:
    kind: str = request.param
    if MANIFEST is None or kind not in MANIFEST.get("schema_changes", {}):
        missing()
    assert MANIFEST is not None
    entry = MANIFEST["schema_changes"][kind]
    name = entry["table"]
    source = interop_catalog().load_table(f"ns.{name}")
    md = source.metadata
    snaps = sorted(md.snapshots, key=lambda s: s.sequence_number or 0)
    assert [s.snapshot_id for s in snaps] == [entry["snapshot_a"], entry["snapshot_b"]], (
        f"{name}: expected exactly the two appends A and B")
    a, b = snaps
    files = [e.metadata_file for e in md.metadata_log] + [source.metadata_location]
    after_a = None
    for path in files:
        meta = FromInputFile.table_metadata(source.io.new_input(path))
        if meta.current_snapshot_id == a.snapshot_id:
            after_a = path
            break
    assert after_a is not None, f"{name}: no metadata file has A current"
    assert after_a != source.metadata_location
    catalog = SqlCatalog(f"sc_{kind}", uri=f"sqlite:///{tmp_path / 'catalog.db'}",
                         warehouse=f"file://{tmp_path / 'unused-warehouse'}")
    catalog.create_namespace("ns")
    catalog.register_table(("ns", name), after_a)
    return History(kind, catalog, name, after_a, source.metadata_location, source,
                   a.snapshot_id, b.snapshot_id)


def kind_params(kinds: tuple[str, ...] = KINDS) -> list[Any]:
    return [pytest.param(k, id=k) for k in kinds]


# -- reading -----------------------------------------------------------------------------


def source(h: History, mode: str, **options: str) -> IcebergSource:
    return IcebergSource(h.identifier, catalog=h.catalog,
                         options={"pollIntervalMs": "50", "onSchemaChange": mode, **options})


def take(items: Iterator[StreamItem], n: int) -> list[StreamItem]:
    """Items until ``n`` rows arrived (each acknowledged)."""
    got: list[StreamItem] = []
    rows = 0
    while rows < n:
        item = next(items)
        got.append(item)
        rows += item.batch.num_rows
        item.ack(wait=True)
    return got


def table_of(items: list[StreamItem]) -> pa.Table:
    return pa.Table.from_batches([i.batch for i in items])


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def types(table: pa.Table) -> list[str]:
    return [str(t).replace("large_string", "string") for t in table.schema.types]


def assert_same(h: History, what: str, actual: pa.Table, expected: pa.Table) -> None:
    """Same column names in the same order, the same types (Arrow's string and
    large_string alike: PyIceberg reads ``string``, icefloe ``large_string``) and the same
    rows (by id)."""
    assert actual.schema.names == expected.schema.names, (
        f"{h.name} {what}: icefloe columns {actual.schema.names}, PyIceberg "
        f"{expected.schema.names}")
    assert types(actual) == types(expected), f"{h.name} {what}: column types differ"
    assert rows(actual) == rows(expected), f"{h.name} {what}: rows differ from PyIceberg's"


def assert_change(h: History, change: Any, snapshot_id: int | None) -> None:
    """``change`` says exactly what ``CHANGES[kind]`` says, from A's schema to B's."""
    want = CHANGES[h.kind]
    assert want is not None
    assert change is not None, f"{h.name}: no schema change reported"
    got = {f: getattr(change, f) for f in CHANGE_FIELDS}
    assert got == {f: want.get(f, ()) for f in CHANGE_FIELDS}, (
        f"{h.name}: change {change.describe()}")
    assert (change.from_schema_id, change.to_schema_id) == (h.start_schema_id, h.b_schema_id)
    assert change.snapshot_id == snapshot_id


def stream_a(h: History, st: Any) -> Iterator[StreamItem]:
    """Consume A from the started stream ``st`` (checked against PyIceberg), then commit
    the change and B; returns the iterator to read on with."""
    it = iter(st)
    items = take(it, 10)
    assert {i.schema_id for i in items} == {h.start_schema_id}
    assert all(i.schema_change is None for i in items)
    assert {i.snapshot_id for i in items} == {h.snapshot_a}
    assert_same(h, "snapshot A", table_of(items), h.oracle_a())
    h.commit()
    return it


def checkpoint_schema(ckpt: Path) -> tuple[int | None, int | None]:
    """The committed (snapshot id, schema id) of the checkpoint in ``ckpt``."""
    state = open_store(str(ckpt)).read()
    assert state is not None
    return state.position.snapshot_id, state.schema_id


# -- onSchemaChange=fail -----------------------------------------------------------------


@pytest.mark.parametrize("history", kind_params(), indirect=True)
def test_fail(history: History, tmp_path: Path) -> None:
    """A is delivered, then the stream raises at B naming B and the change; the checkpoint
    stays at A in A's schema. A restart reads B in the table's current schema, and needs
    allowColumnRename / allowColumnDrop for a rename / drop (without: it raises)."""
    h, ckpt = history, tmp_path / "ckpt"
    if h.kind == "spec":
        with source(h, "fail").stream(checkpoint=str(ckpt)) as st:
            it = stream_a(h, st)
            items = take(it, 10)
        assert_b_unchanged(h, items)
        return
    with source(h, "fail").stream(checkpoint=str(ckpt)) as st:
        it = stream_a(h, st)
        with pytest.raises(SchemaChangedError) as info:
            take(it, 1)
    assert info.value.snapshot_id == h.snapshot_b
    assert_change(h, info.value.change, h.snapshot_b)
    assert checkpoint_schema(ckpt) == (h.snapshot_a, h.start_schema_id)

    allow = ALLOW.get(h.kind, {})
    if allow:  # the restart without its unblock refuses, and leaves the checkpoint alone
        with pytest.raises(SchemaChangedError) as info, \
                source(h, "fail").stream(checkpoint=str(ckpt)) as st:
            take(iter(st), 1)
        assert info.value.snapshot_id is None
        assert_change(h, info.value.change, None)
        assert checkpoint_schema(ckpt) == (h.snapshot_a, h.start_schema_id)

    with source(h, "fail", **allow).stream(checkpoint=str(ckpt)) as st:
        assert st.schema_id == h.b_schema_id
        items = take(iter(st), 10)
    assert {i.schema_id for i in items} == {h.b_schema_id}
    assert {i.snapshot_id for i in items} == {h.snapshot_b}
    assert all(i.schema_change is None for i in items)  # the restart started in it
    assert_same(h, "snapshot B after the restart", table_of(items), h.oracle_b(h.b_schema))
    assert checkpoint_schema(ckpt) == (h.snapshot_b, h.b_schema_id)


def assert_b_unchanged(h: History, items: list[StreamItem]) -> None:
    """A partition spec change: B in the start schema, no change reported."""
    assert h.b_schema_id == h.start_schema_id
    assert {i.schema_id for i in items} == {h.start_schema_id}
    assert all(i.schema_change is None for i in items)
    assert {i.snapshot_id for i in items} == {h.snapshot_b}
    assert_same(h, "snapshot B (new partition spec)", table_of(items),
                h.oracle_b(h.start_schema))
    assert h.metadata.default_spec_id != 0  # B's files were written in the new spec
    assert {t.file.spec_id for t in h.source.scan(snapshot_id=h.snapshot_b).plan_files()} \
        == {0, h.metadata.default_spec_id}


# -- onSchemaChange=evolve ---------------------------------------------------------------


@pytest.mark.parametrize("history", kind_params(), indirect=True)
def test_evolve(history: History, tmp_path: Path) -> None:
    """B arrives in its own schema; its first item carries the change (with B's snapshot
    id); the checkpoint then holds B's schema."""
    h, ckpt = history, tmp_path / "ckpt"
    with source(h, "evolve", **ALLOW.get(h.kind, {})).stream(checkpoint=str(ckpt)) as st:
        it = stream_a(h, st)
        items = take(it, 10)
        if h.kind != "spec":
            assert st.schema_id == h.b_schema_id
    if h.kind == "spec":
        assert_b_unchanged(h, items)
        return
    assert {i.schema_id for i in items} == {h.b_schema_id}
    assert {i.snapshot_id for i in items} == {h.snapshot_b}
    assert_change(h, items[0].schema_change, h.snapshot_b)
    assert all(i.schema_change is None for i in items[1:])
    assert_same(h, "snapshot B (evolve)", table_of(items), h.oracle_b(h.b_schema))
    assert checkpoint_schema(ckpt) == (h.snapshot_b, h.b_schema_id)


@pytest.mark.parametrize("history", kind_params(tuple(ALLOW)), indirect=True)
def test_evolve_needs_its_unblock(history: History, tmp_path: Path) -> None:
    """``evolve`` without allowColumnRename / allowColumnDrop: A is delivered, then the
    rename / drop raises at B."""
    h = history
    with source(h, "evolve").stream(checkpoint=str(tmp_path / "ckpt")) as st:
        it = stream_a(h, st)
        with pytest.raises(SchemaChangedError) as info:
            take(it, 1)
    assert info.value.snapshot_id == h.snapshot_b
    assert_change(h, info.value.change, h.snapshot_b)
    assert checkpoint_schema(tmp_path / "ckpt") == (h.snapshot_a, h.start_schema_id)


# -- onSchemaChange=keep -----------------------------------------------------------------


@pytest.mark.parametrize("history", kind_params(), indirect=True)
def test_keep(history: History, tmp_path: Path) -> None:
    """B arrives in the start schema (by field id: renames followed, new columns not read,
    a dropped column null with allowColumnDrop); a widened column raises at B."""
    h, ckpt = history, tmp_path / "ckpt"
    allow = {"allowColumnDrop": "true"} if h.kind in ("drop", "readd") else {}
    with source(h, "keep", **allow).stream(checkpoint=str(ckpt)) as st:
        it = stream_a(h, st)
        if h.kind in KEEP_REFUSES:
            with pytest.raises(SchemaChangedError) as info:
                take(it, 1)
        else:
            items = take(it, 10)
            assert st.schema_id == h.start_schema_id
    if h.kind in KEEP_REFUSES:
        assert info.value.snapshot_id == h.snapshot_b
        assert_change(h, info.value.change, h.snapshot_b)
        assert checkpoint_schema(ckpt) == (h.snapshot_a, h.start_schema_id)
        return
    if h.kind == "spec":
        assert_b_unchanged(h, items)
        return
    assert {i.schema_id for i in items} == {h.start_schema_id}
    assert {i.snapshot_id for i in items} == {h.snapshot_b}
    assert all(i.schema_change is None for i in items)
    expected = h.oracle_b(h.start_schema)
    assert_same(h, "snapshot B (keep)", table_of(items), expected)
    if h.kind in ("drop", "readd"):
        assert table_of(items).column("old").null_count == 10
    assert checkpoint_schema(ckpt) == (h.snapshot_b, h.start_schema_id)


@pytest.mark.parametrize("history", kind_params(("drop", "readd")), indirect=True)
def test_keep_drop_needs_allow_column_drop(history: History, tmp_path: Path) -> None:
    h = history
    with source(h, "keep").stream(checkpoint=str(tmp_path / "ckpt")) as st:
        it = stream_a(h, st)
        with pytest.raises(SchemaChangedError) as info:
            take(it, 1)
    assert info.value.snapshot_id == h.snapshot_b
    assert_change(h, info.value.change, h.snapshot_b)


# -- a change before the stream starts ---------------------------------------------------


@pytest.mark.parametrize("history", kind_params(), indirect=True)
def test_change_before_the_start_is_no_change(history: History, tmp_path: Path) -> None:
    """A stream started after B (even ``fail``, no unblock) reads A and B in the table's
    current schema: snapshots up to the head at the start are no change."""
    h = history
    h.commit()
    with source(h, "fail").stream(checkpoint=str(tmp_path / "ckpt")) as st:
        assert st.schema_id == h.b_schema_id
        items = take(iter(st), 20)
    assert {i.schema_id for i in items} == {h.b_schema_id}
    assert all(i.schema_change is None for i in items)
    tasks = list(h.source.scan(snapshot_id=h.snapshot_b).plan_files())
    expected = ArrowScan(h.metadata, h.source.io, h.b_schema, AlwaysTrue()).to_table(tasks)
    assert_same(h, "A and B in B's schema", table_of(items), expected)
