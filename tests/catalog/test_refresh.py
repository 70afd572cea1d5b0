"""Refresh by pointer (icefloe.catalog.refresh): an idle poll reads no metadata file, and
a moved table is parsed reusing the known snapshots into exactly PyIceberg's metadata.

Oracle: PyIceberg's own parse of the same metadata file (``TableMetadataUtil.parse_raw``,
``catalog.load_table``).
"""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadataUtil
from pyiceberg.types import LongType, StringType

from icefloe.catalog.handle import open_table
from icefloe.catalog.refresh import MetadataParser, SqlPointerProbe
from icefloe.enumerator.lineage import snapshot_index
from icefloe.errors import CatalogError, TableNotFoundError
from tests.helpers.tables import (
    EVENTS_SCHEMA,
    commit_replace,
    expire_snapshots,
    make_table,
    rows,
)


def _local(location: str) -> Path:
    return Path(location.removeprefix("file://"))


def _oracle(location: str) -> object:
    return TableMetadataUtil.parse_raw(_local(location).read_bytes())


def _history(table: Table) -> list[Table]:
    """A table through appends, a schema change, a branch, a tag, a compaction and an
    expiry; the table after each commit."""
    states = []
    for i in range(3):
        table.append(rows(5, start=10 * i))
        states.append(table)
    with table.update_schema() as update:
        update.add_column("note", StringType())
        update.rename_column("kind", "category")
    states.append(table)
    snapshot_id = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    table.manage_snapshots().create_branch(snapshot_id, "audit").commit()
    table.manage_snapshots().create_tag(snapshot_id, "v1").commit()
    states.append(table)
    commit_replace(table)
    table = table.refresh()
    states.append(table)
    first = table.metadata.snapshots[0].snapshot_id
    expire_snapshots(table, [first])
    table = table.refresh()
    states.append(table)
    with table.update_schema() as update:
        update.add_column("extra", LongType())
    states.append(table)
    return states


def test_parse_metadata_equals_pyiceberg_at_every_commit(catalog: SqlCatalog) -> None:
    """Each metadata file of a real history, parsed against the one before it, is equal to
    PyIceberg's own parse, and reuses the snapshot objects already known."""
    table = make_table(catalog, "db.hist")
    previous = table.metadata
    locations = [table.metadata_location]
    _history(table)
    table = catalog.load_table("db.hist")
    locations.extend(entry.metadata_file for entry in table.metadata.metadata_log)
    locations.append(table.metadata_location)
    seen = set()
    ordered = [loc for loc in locations if not (loc in seen or seen.add(loc))]
    assert len(ordered) >= 10
    parser = MetadataParser()
    previous = parser.parse(_local(ordered[0]).read_bytes())
    assert previous == _oracle(ordered[0])
    reused = rebuilt = extended = 0
    for location in ordered[1:]:
        parsed = parser.parse(_local(location).read_bytes())
        assert parsed == _oracle(location), location
        # the snapshot index the parser handed the enumerator (copied from the last one
        # after an append, built anew after an expiry) is exactly this file's snapshots
        index = snapshot_index(parsed)
        assert index is parser._index  # handed over, not built again by the enumerator
        assert index == {s.snapshot_id: s for s in parsed.snapshots}
        assert all(index[s.snapshot_id] is s for s in parsed.snapshots)
        extended += parser._snapshots.extended
        old = {s.snapshot_id: s for s in previous.snapshots}  # type: ignore[attr-defined]
        for snapshot in parsed.snapshots:
            if snapshot.snapshot_id not in old:
                continue
            if snapshot == old[snapshot.snapshot_id]:  # unchanged: the same object
                assert snapshot is old[snapshot.snapshot_id]
                reused += 1
            else:  # PyIceberg's expiry cut the parent of the oldest kept snapshot
                assert snapshot.parent_snapshot_id is None
                rebuilt += 1
        previous = parsed
    assert reused >= 10 and rebuilt == 1
    assert 3 <= extended < len(ordered) - 1  # appends extended the index, not every commit


def test_a_seeded_parser_indexes_every_snapshot(catalog: SqlCatalog) -> None:
    """A parser whose last file held no ``snapshots`` array, then given a ``previous``
    loaded elsewhere (as a handle after a reload): the index it hands the enumerator holds
    every snapshot of the new file, not only those new since its own last result."""
    import json

    table = make_table(catalog, "db.seeded")
    for i in range(3):
        table.append(rows(3, start=10 * i))
    bare = json.loads(_local(table.metadata_location).read_bytes())
    for key in ("snapshots", "snapshot-log", "refs"):
        bare.pop(key, None)
    bare["current-snapshot-id"] = -1
    parser = MetadataParser()
    assert parser.parse(json.dumps(bare).encode()).snapshots == []
    previous = catalog.load_table("db.seeded").metadata  # built by PyIceberg
    table.append(rows(3, start=100))
    parsed = parser.parse(_local(table.metadata_location).read_bytes(), previous)
    assert parsed == _oracle(table.metadata_location)
    assert len(parsed.snapshots) == 4
    assert snapshot_index(parsed) == {s.snapshot_id: s for s in parsed.snapshots}


def test_pretty_printed_files(catalog: SqlCatalog, tmp_path: Path) -> None:
    """Java Iceberg pretty-prints its metadata files: the same history, indented, parses
    to PyIceberg's metadata at every commit."""
    import json

    table = make_table(catalog, "db.pretty")
    for i in range(4):
        table.append(rows(3, start=10 * i))
    first = table.metadata.snapshots[0].snapshot_id
    expire_snapshots(table, [first])
    table = catalog.load_table("db.pretty")
    table.append(rows(3, start=100))
    table = catalog.load_table("db.pretty")
    locations = [e.metadata_file for e in table.metadata.metadata_log] + [
        table.metadata_location]
    parser = MetadataParser()
    for i, location in enumerate(locations):
        pretty = json.dumps(json.loads(_local(location).read_bytes()), indent=2).encode()
        parsed = parser.parse(pretty)
        assert parsed == _oracle(location), (i, location)


def test_parser_across_tables(catalog: SqlCatalog) -> None:
    """A parser that parsed one table's file parses another table's correctly."""
    one = make_table(catalog, "db.one")
    one.append(rows(3))
    two = make_table(catalog, "db.two")
    two.append(rows(3))
    parser = MetadataParser()
    first = parser.parse(_local(one.metadata_location).read_bytes())
    second = parser.parse(_local(two.metadata_location).read_bytes())
    assert first == _oracle(one.metadata_location)
    assert second == _oracle(two.metadata_location)
    assert second.table_uuid != first.table_uuid


def test_idle_refresh_reads_no_metadata_file(catalog: SqlCatalog) -> None:
    """With the current metadata file gone, PyIceberg's load fails; icefloe's idle refresh
    does not read it, so it keeps the loaded table (the same object)."""
    table = make_table(catalog, "db.idle")
    table.append(rows(5))
    handle = open_table(catalog, "db.idle")
    before = handle.table
    _local(before.metadata_location).unlink()
    with pytest.raises(FileNotFoundError):
        catalog.load_table("db.idle")
    assert handle.refresh().table is before


def test_moved_refresh_equals_pyiceberg_load(catalog: SqlCatalog) -> None:
    table = make_table(catalog, "db.moved")
    table.append(rows(5))
    handle = open_table(catalog, "db.moved")
    known = handle.metadata.snapshots[0]
    table.append(rows(5, start=5))
    handle.refresh()
    oracle = catalog.load_table("db.moved")
    assert handle.table.metadata_location == oracle.metadata_location
    assert handle.metadata == oracle.metadata
    assert handle.metadata.snapshots[0] is known
    assert handle.head("main").snapshot_id == oracle.current_snapshot().snapshot_id  # type: ignore[union-attr]
    # the FileIO of an unchanged table is kept
    assert handle.io is handle.table.io


def test_dropped_then_recreated_table(catalog: SqlCatalog) -> None:
    table = make_table(catalog, "db.again")
    table.append(rows(5))
    handle = open_table(catalog, "db.again")
    old_identity = handle.identity
    catalog.drop_table("db.again")
    with pytest.raises(TableNotFoundError, match=r"db\.again"):
        handle.refresh()
    fresh = drop_and_recreate_missing(catalog, "db.again")
    fresh.append(rows(2))
    handle.refresh()
    assert handle.identity == str(fresh.metadata.table_uuid) != old_identity
    assert handle.metadata == catalog.load_table("db.again").metadata


def drop_and_recreate_missing(catalog: SqlCatalog, identifier: str) -> Table:
    return catalog.create_table(identifier, EVENTS_SCHEMA, properties={"format-version": "2"})


def test_sql_probe_keeps_one_connection_and_reads_every_commit(catalog: SqlCatalog) -> None:
    """The probe's own connection (no pool check-out per poll) holds no transaction or
    lock between polls: a writer commits beside it, and the next poll reads that commit."""
    table = make_table(catalog, "db.held")
    table.append(rows(5))
    handle = open_table(catalog, "db.held")
    handle.refresh()
    probe = handle.pointer_probe
    assert isinstance(probe, SqlPointerProbe)
    connection = probe._connection
    assert connection is not None
    pool: Any = catalog.engine.pool
    assert pool.checkedout() == 0  # detached: not the pool's any more
    for i in range(3):
        # a SQLite lock kept by the probe would make this commit fail ("database is locked")
        table.append(rows(5, start=10 * (i + 1)))
        handle.refresh()
        assert handle.table.metadata_location == catalog.load_table("db.held").metadata_location
        assert probe._connection is connection


def test_sql_probe_reconnects_after_its_connection_failed(catalog: SqlCatalog) -> None:
    table = make_table(catalog, "db.lost")
    table.append(rows(5))
    handle = open_table(catalog, "db.lost")
    handle.refresh()
    probe = handle.pointer_probe
    assert isinstance(probe, SqlPointerProbe)
    broken = probe._connection
    broken.close()  # as a database server that went away leaves it
    with pytest.raises(CatalogError, match=r"db\.lost"):
        handle.refresh()
    table.append(rows(5, start=5))
    handle.refresh()  # a new connection
    assert probe._connection is not None and probe._connection is not broken
    assert handle.metadata == catalog.load_table("db.lost").metadata


def test_sql_probe_closes_its_connection_when_closed_or_collected(catalog: SqlCatalog) -> None:
    table = make_table(catalog, "db.closed")
    table.append(rows(5))
    probe = SqlPointerProbe(catalog, "db.closed")
    assert probe.probe(table).location == table.metadata_location
    first = probe._connection
    probe.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        first.cursor()
    assert probe.probe(table).location == table.metadata_location  # reopens
    second = probe._connection
    del probe
    gc.collect()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        second.cursor()
