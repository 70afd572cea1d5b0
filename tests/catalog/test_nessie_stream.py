"""Continuous reads of Nessie tables (``src.stream``) against FakeNessieServer.

Each test writes a real table with PyIceberg, puts its states into the fake Nessie
(commits, branches, merges, resets, renames) and checks what the stream delivers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from icefloe.catalog.nessie import NessieCatalog
from icefloe.errors import LineageBreakError, TableNotFoundError, TableReplacedError
from tests.helpers.nessie import KEY, append, nessie_source, open_stream, take
from tests.helpers.nessie_fake import Delete, FakeNessieServer, Put
from tests.helpers.tables import EVENTS_SCHEMA, drop_and_recreate, make_table, rollback_to

pytestmark = pytest.mark.timeout(30)
POLL = {"pollIntervalMs": "20"}


@pytest.fixture
def nessie() -> Iterator[FakeNessieServer]:
    with FakeNessieServer() as server:
        yield server


@pytest.fixture
def table(catalog: SqlCatalog) -> Table:
    tbl = make_table(catalog)
    append(tbl, 0)
    return tbl


def wait_polls(nessie: FakeNessieServer, n: int = 3) -> None:
    """Wait until the stream sent ``n`` more requests (it is polling); fail when it does
    not within 20 s."""
    target = nessie.request_count() + n
    deadline = time.monotonic() + 20
    while nessie.request_count() < target:
        assert time.monotonic() < deadline, \
            f"the stream sent {nessie.request_count() - target + n} of {n} requests in 20 s"
        time.sleep(0.01)


def test_new_commits_are_picked_up_and_idle_polls_are_cheap(
    nessie: FakeNessieServer, table: Table
) -> None:
    nessie.put_table("main", KEY, table)
    src = nessie_source(nessie.uri, **POLL)
    stream, items = open_stream(src)
    with stream:
        assert take(items, 4) == [0, 1, 2, 3]
        catalog = src.handle.catalog
        assert isinstance(catalog, NessieCatalog)
        reads = catalog.metadata_reads
        nessie.reset_requests()
        wait_polls(nessie, 5)
        assert catalog.metadata_reads == reads  # head did not move: no metadata read
        assert set(nessie.requests) == {("GET", "/api/v2/trees/main")}

        for start in (100, 200, 300):
            append(table, start)
            nessie.put_table("main", KEY, table)
        assert take(items, 12) == [*range(100, 104), *range(200, 204), *range(300, 304)]
        assert catalog.metadata_reads <= reads + 3
        assert src.handle.commit_hash == nessie.head("main")


def test_stream_follows_a_branch_and_a_merge(nessie: FakeNessieServer, table: Table) -> None:
    nessie.put_table("main", KEY, table)
    nessie.create_branch("dev")
    append(table, 100)
    nessie.put_table("dev", KEY, table)
    src = nessie_source(nessie.uri, **POLL)
    stream, items = open_stream(src)
    with stream:
        assert take(items, 4) == [0, 1, 2, 3]
        nessie.merge("dev", "main")
        assert take(items, 4) == [100, 101, 102, 103]

    dev = nessie_source(nessie.uri, ref="dev", **POLL)
    with dev.stream(available_now=True) as dev_stream:
        assert sorted(r for i in dev_stream for r in i.batch.column("id").to_pylist()) == [
            *range(4), *range(100, 104)]


def test_reassigned_branch_is_a_lineage_break(nessie: FakeNessieServer, table: Table) -> None:
    h1 = nessie.put_table("main", KEY, table)
    s1 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    append(table, 100)
    nessie.put_table("main", KEY, table)
    stream, items = open_stream(nessie_source(nessie.uri, **POLL))
    with stream:
        assert take(items, 8) == [*range(4), *range(100, 104)]
        nessie.assign("main", h1)
        with pytest.raises(LineageBreakError, match=f"not an ancestor of snapshot {s1}"):
            next(items)


def test_reassigned_branch_restart_from_head(nessie: FakeNessieServer, table: Table) -> None:
    h1 = nessie.put_table("main", KEY, table)
    s1 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    append(table, 100)
    nessie.put_table("main", KEY, table)
    src = nessie_source(nessie.uri, onLineageBreak="restartFromHead", **POLL)
    stream, items = open_stream(src)
    with stream:
        assert take(items, 8) == [*range(4), *range(100, 104)]
        nessie.assign("main", h1)
        wait_polls(nessie, 3)
        # a writer continues from the reset state: only its new rows arrive
        rollback_to(table, s1)
        append(table, 500)
        nessie.put_table("main", KEY, table)
        assert take(items, 4) == [500, 501, 502, 503]


def test_merge_that_rewrote_the_table_is_a_lineage_break(
    nessie: FakeNessieServer, table: Table
) -> None:
    s1 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    nessie.put_table("main", KEY, table)
    append(table, 100)
    nessie.put_table("main", KEY, table)
    nessie.create_branch("dev")
    rollback_to(table, s1)  # dev rewrites history: s1 -> s3, without s2
    append(table, 200)
    nessie.put_table("dev", KEY, table)
    stream, items = open_stream(nessie_source(nessie.uri, **POLL))
    with stream:
        assert take(items, 8) == [*range(4), *range(100, 104)]
        nessie.merge("dev", "main")
        with pytest.raises(LineageBreakError):
            next(items)


def test_drop_and_recreate_is_a_replaced_table(
    nessie: FakeNessieServer, catalog: SqlCatalog, table: Table
) -> None:
    nessie.put_table("main", KEY, table)
    stream, items = open_stream(nessie_source(nessie.uri, **POLL))
    with stream:
        assert take(items, 4) == [0, 1, 2, 3]
        new = drop_and_recreate(catalog, KEY, EVENTS_SCHEMA)
        append(new, 1000)
        # DROP + CREATE in one commit: one Put with a new content id (Nessie spec)
        nessie.commit("main", [Put(KEY, new.metadata_location)], "drop and create")
        with pytest.raises(TableReplacedError, match="dropped and re-created"):
            next(items)


def test_rename_is_followed_with_follow_renames(
    nessie: FakeNessieServer, table: Table
) -> None:
    nessie.put_table("main", KEY, table)
    content_id = nessie.content("main", KEY)["id"]  # type: ignore[index]
    src = nessie_source(nessie.uri, followRenames="true", **POLL)
    # what source.py is to do: hand the option to the handle (open_table(follow_renames=))
    src.handle.follow_renames = src.options.follow_renames
    stream, items = open_stream(src)
    with stream:
        assert take(items, 4) == [0, 1, 2, 3]
        nessie.commit("main", [Delete(KEY), Put("db.renamed", table.metadata_location,
                                                 content_id=content_id)], "rename")
        append(table, 100)
        nessie.put_table("main", "db.renamed", table)
        assert take(items, 4) == [100, 101, 102, 103]
        assert src.handle.identity == content_id
        assert src.handle.table.key == ("db", "renamed")  # type: ignore[attr-defined]


def test_rename_without_follow_renames_names_the_new_key(
    nessie: FakeNessieServer, table: Table
) -> None:
    nessie.put_table("main", KEY, table)
    content_id = nessie.content("main", KEY)["id"]  # type: ignore[index]
    stream, items = open_stream(nessie_source(nessie.uri, **POLL))
    with stream:
        assert take(items, 4) == [0, 1, 2, 3]
        nessie.commit("main", [Delete(KEY), Put("db.renamed", table.metadata_location,
                                                 content_id=content_id)], "rename")
        with pytest.raises(TableNotFoundError, match=r"renamed to 'db\.renamed'.*followRenames"):
            next(items)


def test_stream_survives_server_errors(nessie: FakeNessieServer, table: Table) -> None:
    nessie.put_table("main", KEY, table)
    stream, items = open_stream(nessie_source(nessie.uri, **POLL))
    with stream:
        assert take(items, 4) == [0, 1, 2, 3]
        nessie.fail_next(3, status=503)
        append(table, 100)
        nessie.put_table("main", KEY, table)
        assert take(items, 4) == [100, 101, 102, 103]


def test_restart_from_checkpoint_tracks_the_content_id(
    nessie: FakeNessieServer, table: Table, tmp_path: Path
) -> None:
    nessie.put_table("main", KEY, table)
    ckpt = str(tmp_path / "ckpt")
    stream, items = open_stream(nessie_source(nessie.uri, **POLL), checkpoint=ckpt)
    with stream:
        assert take(items, 4) == [0, 1, 2, 3]
    append(table, 100)
    nessie.put_table("main", KEY, table)
    again = nessie_source(nessie.uri, **POLL)
    with again.stream(checkpoint=ckpt, available_now=True) as restarted:
        assert sorted(r for i in restarted for r in i.batch.column("id").to_pylist()) == [
            100, 101, 102, 103]
        assert restarted.coordinator.enumerator.identity == nessie.content("main", KEY)["id"]  # type: ignore[index]
