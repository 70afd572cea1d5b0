"""NessieCatalog and Nessie-backed bounded reads, against FakeNessieServer.

Tables are written by a real PyIceberg SqlCatalog, then put into the fake Nessie with
``put_table``; results are checked against PyIceberg's own scans of the same snapshots.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table

from icefloe.catalog.handle import TableHandle, open_table
from icefloe.catalog.loader import open_catalog
from icefloe.catalog.nessie import NessieCatalog, NessieTable
from icefloe.errors import (
    CatalogAuthError,
    CatalogError,
    InvalidOptionError,
    RefNotFoundError,
    TableNotFoundError,
)
from icefloe.options import SourceOptions
from tests.conftest import assert_same_rows
from tests.helpers.nessie import KEY, append, nessie_catalog, nessie_source, oracle
from tests.helpers.nessie_fake import FakeNessieServer, Put
from tests.helpers.tables import make_table

TOKEN = "n3ss1e-s3cret-t0ken"


class CountingReads:
    """Counts Iceberg metadata JSON reads by patching PyIceberg's reader."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = FromInputFile.table_metadata

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(FromInputFile, "table_metadata", staticmethod(counting))


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def nessie() -> Iterator[FakeNessieServer]:
    with FakeNessieServer() as server:
        yield server


@pytest.fixture
def table(catalog: SqlCatalog) -> Table:
    tbl = make_table(catalog)
    append(tbl, 0)
    return tbl


# ------------------------------------------------------------------ catalog


def test_loader_routes_to_nessie(nessie: FakeNessieServer) -> None:
    by_name = open_catalog("nessie", {"uri": nessie.uri})
    by_type = open_catalog("lake", {"type": "nessie", "uri": nessie.uri, "ref": "dev"})
    assert isinstance(by_name, NessieCatalog) and isinstance(by_type, NessieCatalog)
    assert (by_type.name, by_type.ref) == ("lake", "dev")
    bare = NessieCatalog("n", uri=f"http://127.0.0.1:{nessie.port}")
    assert bare.uri == nessie.uri  # /api/v2 appended to a bare server address
    with pytest.raises(CatalogError, match=r"catalog\.uri"):
        open_catalog("nessie", {})
    with pytest.raises(InvalidOptionError):
        NessieCatalog("n", uri=nessie.uri, ref="main@nothex")


def test_load_table_carries_content_id_and_commit(
    nessie: FakeNessieServer, table: Table
) -> None:
    h1 = nessie.put_table("main", KEY, table)
    content_id = nessie.content("main", KEY)["id"]  # type: ignore[index]
    loaded = nessie_catalog(nessie.uri).load_table(KEY)
    assert isinstance(loaded, NessieTable)
    assert (loaded.content_id, loaded.commit_hash, loaded.key) == (content_id, h1, ("db", "events"))
    assert loaded.metadata.table_uuid == table.metadata.table_uuid
    assert_same_rows(loaded.scan().to_arrow(), table.scan().to_arrow())

    handle = open_table(nessie_catalog(nessie.uri), KEY)
    assert handle.identity == content_id != str(table.metadata.table_uuid)
    assert handle.commit_hash == h1
    assert TableHandle(table.catalog, KEY, table).commit_hash is None  # not Nessie


def test_branches_and_tags(nessie: FakeNessieServer, table: Table) -> None:
    s1 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    nessie.put_table("main", KEY, table)
    nessie.create_tag("v1", "main")
    nessie.create_branch("dev")
    s2 = append(table, 100)
    nessie.put_table("dev", KEY, table)

    assert_same_rows(nessie_source(nessie.uri).to_arrow(), oracle(table, s1))
    assert_same_rows(nessie_source(nessie.uri, ref="dev").to_arrow(), oracle(table, s2))
    assert_same_rows(nessie_source(nessie.uri, branch="dev").to_arrow(), oracle(table, s2))
    assert_same_rows(nessie_source(nessie.uri, tag="v1").to_arrow(), oracle(table, s1))
    # open_table can also load at a ref directly (how source.py should pass it)
    at_dev = open_table(nessie_catalog(nessie.uri), KEY, ref="dev")
    assert at_dev.head("dev").snapshot_id == s2  # type: ignore[union-attr]
    assert at_dev.ref_type("v1") == "tag"

    with pytest.raises(RefNotFoundError, match="is a tag, not a branch"):
        nessie_source(nessie.uri, branch="v1").to_arrow()
    with pytest.raises(RefNotFoundError, match="'nope'"):
        nessie_source(nessie.uri, ref="nope").to_arrow()
    with pytest.raises(TableNotFoundError, match=r"db\.other"):
        nessie_source(nessie.uri, "db.other").to_arrow()


def test_pinned_commit_bounded_read(nessie: FakeNessieServer, table: Table) -> None:
    s1 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    h1 = nessie.put_table("main", KEY, table)
    append(table, 100)
    nessie.put_table("main", KEY, table)
    append(table, 200)
    nessie.put_table("main", KEY, table)

    src = nessie_source(nessie.uri, ref=f"main@{h1}")
    assert_same_rows(src.to_arrow(), oracle(table, s1))
    assert src.handle.commit_hash == h1
    # a pinned ref never moves: refresh does not even ask Nessie
    before = nessie.request_count()
    src.handle.refresh()
    assert nessie.request_count() == before and src.handle.commit_hash == h1

    nessie.create_branch("other")
    on_other = nessie.commit("other", [Put("db.x", table.metadata_location)])
    with pytest.raises(RefNotFoundError, match="Could not find commit"):
        nessie_source(nessie.uri, ref=f"main@{on_other}").to_arrow()


def test_refresh_unmoved_reads_nothing_but_the_reference(
    nessie: FakeNessieServer, table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    nessie.put_table("main", KEY, table)
    catalog = nessie_catalog(nessie.uri)
    handle = open_table(catalog, KEY)
    reads = CountingReads(monkeypatch)
    nessie.reset_requests()
    metadata = handle.metadata

    for _ in range(3):
        handle.refresh()
    assert reads.count == 0 and catalog.metadata_reads == 1
    assert nessie.requests == [("GET", "/api/v2/trees/main")] * 3
    assert handle.metadata is metadata

    # the branch moves, but only another table changed: still no metadata read
    h2 = nessie.commit("main", [Put("db.other", table.metadata_location)])
    handle.refresh()
    assert reads.count == 0 and handle.commit_hash == h2 and handle.metadata is metadata

    # the table changed: exactly one metadata read
    s2 = append(table, 100)
    h3 = nessie.put_table("main", KEY, table)
    reads.count = 0  # PyIceberg's own commit above read metadata too
    handle.refresh()
    assert reads.count == 1 and catalog.metadata_reads == 2 and handle.commit_hash == h3
    assert handle.head("main").snapshot_id == s2  # type: ignore[union-attr]


def test_writes_are_not_supported(nessie: FakeNessieServer, table: Table) -> None:
    catalog = nessie_catalog(nessie.uri)
    for call in (lambda: catalog.create_table("db.t", table.schema()),
                 lambda: catalog.drop_table(KEY),
                 lambda: catalog.rename_table(KEY, "db.x"),
                 lambda: catalog.commit_table(table, (), ()),
                 lambda: catalog.list_tables("db")):
        with pytest.raises(NotImplementedError, match="read-only NessieCatalog"):
            call()
    assert catalog.table_exists(KEY) is False
    nessie.put_table("main", KEY, table)
    assert catalog.table_exists(KEY) is True


def test_token_is_sent_and_never_shown(
    nessie: FakeNessieServer, table: Table, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    nessie.put_table("main", KEY, table)
    nessie.set_token(TOKEN)
    catalog = nessie_catalog(nessie.uri, token=TOKEN)
    handle = open_table(catalog, KEY)
    src = nessie_source(nessie.uri, **{"catalog.token": TOKEN})
    assert src.to_arrow().num_rows == 4

    wrong = nessie_source(nessie.uri, **{"catalog.token": TOKEN + "-wrong"})
    with pytest.raises(CatalogAuthError) as err:
        wrong.to_arrow()
    with pytest.raises(CatalogAuthError) as no_token:
        nessie_source(nessie.uri).to_arrow()
    shown = [str(err.value), repr(err.value), str(no_token.value), repr(catalog),
             repr(catalog.properties), repr(handle), repr(src), repr(wrong), repr(src.handle),
             repr(vars(catalog)), repr(vars(catalog.client)), caplog.text]
    for text in shown:
        assert TOKEN not in text
    assert "token" not in catalog.properties


def test_server_errors_are_retried(nessie: FakeNessieServer, table: Table) -> None:
    nessie.put_table("main", KEY, table)
    nessie.fail_next(2, status=503)
    assert nessie_source(nessie.uri).to_arrow().num_rows == 4
    nessie.fail_next(10, status=500)
    with pytest.raises(CatalogError, match="after 4 attempts"):
        nessie_source(nessie.uri).to_arrow()


def test_nessie_design_option_names() -> None:
    opts = SourceOptions.parse(
        {"startSnapshotID": "1234567890123456789", "pollInterval": "10", "followRenames": "true"}
    ).for_mode("continuous")
    assert opts.starting_version == 1234567890123456789
    assert opts.poll_interval_ms == 10_000
    assert opts.follow_renames is True
    assert SourceOptions.parse({}).follow_renames is False
    for bad in ("-1", "12a", "1.5", "", "18446744073709551616"):
        with pytest.raises(InvalidOptionError, match="startingVersion"):
            SourceOptions.parse({"startSnapshotID": bad}).for_mode("continuous")
    with pytest.raises(InvalidOptionError, match="followRenames"):
        SourceOptions.parse({"followRenames": "true"}).for_mode("bounded")
    with pytest.raises(InvalidOptionError, match="followRenames"):
        SourceOptions.parse({"followRenames": "maybe"})
