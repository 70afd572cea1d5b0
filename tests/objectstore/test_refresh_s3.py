"""Refresh by pointer on S3, with the REST catalog (SeaweedFS answers ``snapshots=refs``)
and a SQL catalog: an idle refresh keeps the loaded table, a moved one equals PyIceberg's
``load_table`` and keeps the snapshots already known."""

from __future__ import annotations

from icefloe.catalog.handle import open_table
from icefloe.catalog.refresh import RestPointerProbe, SqlPointerProbe
from tests.helpers.tables import rows
from tests.objectstore.conftest import S3Catalog


def test_refresh_by_pointer(s3_catalog: S3Catalog) -> None:
    table = s3_catalog.new_table("refresh")
    table.append(rows(5))
    identifier = ".".join(table.name())
    handle = open_table(s3_catalog.catalog, identifier)
    loaded = handle.table
    assert handle.refresh().table is loaded  # nothing moved: nothing read
    probe = handle.pointer_probe
    expected = RestPointerProbe if s3_catalog.kind == "rest" else SqlPointerProbe
    assert isinstance(probe, expected)
    known = handle.metadata.snapshots[0]
    table.append(rows(5, start=5))
    handle.refresh()
    oracle = s3_catalog.catalog.load_table(identifier)
    assert handle.table.metadata_location == oracle.metadata_location
    assert handle.metadata == oracle.metadata
    assert handle.metadata.snapshots[0] is known
    # the table reads through the new FileIO: its rows are PyIceberg's
    assert sorted(handle.table.scan().to_arrow().column("id").to_pylist()) == list(range(10))
    assert handle.refresh().table is handle.table
