"""NessieClient against FakeNessieServer (a test double following the Nessie REST API v2)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import StaticTable, Table

from icefloe.catalog.nessie_client import (
    IcebergTableContent,
    NessieClient,
    Reference,
    encode_key,
    parse_ref,
)
from icefloe.errors import (
    CatalogAuthError,
    CatalogError,
    InvalidOptionError,
    RefNotFoundError,
    TableNotFoundError,
)
from tests.helpers.nessie_fake import Delete, FakeNessieServer, Put, _decode_key

KEY = ("db", "events")
TOKEN = "s3cr3t-token-value"


@pytest.fixture
def nessie() -> Iterator[FakeNessieServer]:
    with FakeNessieServer() as server:
        yield server


@pytest.fixture
def client(nessie: FakeNessieServer) -> NessieClient:
    c = NessieClient(nessie.uri, backoff_s=0.001)
    c._sleep = lambda s: None  # no real waiting between retries
    return c


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[SqlCatalog]:
    cat = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    yield cat
    cat.close()


SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def _rows(start: int, n: int = 3) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "name": [f"r{i}" for i in ids]}, schema=SCHEMA)


@pytest.fixture
def table(catalog: SqlCatalog) -> Table:
    tbl = catalog.create_table("db.events", schema=SCHEMA)
    tbl.append(_rows(0))
    return tbl


def _put(key: tuple[str, ...] = KEY, **kw: object) -> Put:
    return Put(key, metadata_location="file:///wh/db/events/metadata/00000.json", **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- references


def test_get_reference_branch_tag_and_pinned_hash(
    nessie: FakeNessieServer, client: NessieClient
) -> None:
    h1 = nessie.commit("main", [_put()], "create")
    h2 = nessie.commit("main", [_put(content_id=nessie.content("main", KEY)["id"])], "update")  # type: ignore[index]
    nessie.create_tag("v1", h1)
    nessie.create_branch("dev", "main")

    assert client.get_reference("main") == Reference("main", "BRANCH", h2)
    assert client.get_reference("dev") == Reference("dev", "BRANCH", h2)
    assert client.get_reference("v1") == Reference("v1", "TAG", h1)
    assert client.get_reference(f"main@{h1}") == Reference("main", "BRANCH", h1)
    assert {r.name for r in client.list_references()} == {"main", "dev", "v1"}


def test_list_references_pages(nessie: FakeNessieServer, client: NessieClient) -> None:
    nessie.page_size = 1
    for name in ("a", "b", "c"):
        nessie.create_branch(name)
    assert [r.name for r in client.list_references()] == ["a", "b", "c", "main"]
    assert nessie.request_count("/trees") == 4


def test_parse_ref() -> None:
    assert parse_ref("main") == ("main", None)
    assert parse_ref("feature/x@ABCDEF0123") == ("feature/x", "abcdef0123")
    for bad in ("", "@abcdef0123", "main@", "main@not-hex!", "main@abc"):
        with pytest.raises(InvalidOptionError):
            parse_ref(bad)


def test_unknown_ref_and_hash_not_on_ref(nessie: FakeNessieServer, client: NessieClient) -> None:
    nessie.commit("main", [_put()], "create")
    with pytest.raises(RefNotFoundError) as err:
        client.get_reference("nope")
    assert "'nope'" in str(err.value) and nessie.uri in str(err.value)

    nessie.create_branch("dev")
    on_dev = nessie.commit("dev", [_put(("db", "other"))], "dev only")
    with pytest.raises(RefNotFoundError, match="Could not find commit"):
        client.get_reference(f"main@{on_dev}")
    with pytest.raises(RefNotFoundError):
        client.get_content("nope", KEY)


# ---------------------------------------------------------------- contents


def test_contents_at_ref_and_pinned_hash_with_real_iceberg_table(
    nessie: FakeNessieServer, client: NessieClient, table: Table
) -> None:
    first_snapshot = table.metadata.current_snapshot_id
    h1 = nessie.put_table("main", KEY, table)
    table.append(_rows(10))
    second_snapshot = table.metadata.current_snapshot_id
    assert second_snapshot != first_snapshot
    nessie.put_table("main", KEY, table)

    head = client.get_content("main", KEY)
    assert isinstance(head, IcebergTableContent)
    assert head.snapshot_id == second_snapshot
    assert head.metadata_location == table.metadata_location
    static = StaticTable.from_metadata(head.metadata_location)
    assert static.metadata.current_snapshot_id == head.snapshot_id
    assert head.schema_id == static.metadata.current_schema_id
    assert head.spec_id == static.metadata.default_spec_id
    assert head.sort_order_id == static.metadata.default_sort_order_id
    assert static.scan().to_arrow().num_rows == 6

    pinned = client.get_content("main", KEY, hash=h1)
    assert pinned == client.get_content(f"main@{h1}", KEY)
    assert pinned is not None and pinned.snapshot_id == first_snapshot
    assert StaticTable.from_metadata(pinned.metadata_location).scan().to_arrow().num_rows == 3
    assert pinned.content_id == head.content_id  # an update keeps the content id

    with pytest.raises(InvalidOptionError):
        client.get_content(f"main@{h1}", KEY, hash=nessie.head("main"))


def test_unknown_key(nessie: FakeNessieServer, client: NessieClient) -> None:
    nessie.commit("main", [_put()], "create")
    with pytest.raises(TableNotFoundError) as err:
        client.get_content("main", ("db", "missing"))
    assert "db.missing" in str(err.value) and "'main'" in str(err.value)
    assert client.get_content("main", ("db", "missing"), missing_ok=True) is None
    with pytest.raises(InvalidOptionError):
        client.get_content("main", "db.events")  # type: ignore[arg-type]


def test_key_with_dot_in_element(nessie: FakeNessieServer, client: NessieClient) -> None:
    key = ("db", "a.b", "c")
    nessie.commit("main", [_put(key)], "dotted")
    content = client.get_content("main", key)
    assert content is not None
    assert encode_key(key) == "db.a%1Db.c"
    # the double also accepts Nessie's newer escaping representation
    assert _decode_key(".db.a*.b.c") == key
    assert _decode_key(".foo*..*.bar.a*{*}*[aa") == ("foo.", ".bar", "a/\\%aa")


# ---------------------------------------------------------------- auth


def test_auth_failure_hides_token(
    nessie: FakeNessieServer, caplog: pytest.LogCaptureFixture
) -> None:
    nessie.commit("main", [_put()], "create")
    nessie.set_token(TOKEN)
    caplog.set_level(logging.DEBUG)

    anonymous = NessieClient(nessie.uri, backoff_s=0)
    with pytest.raises(CatalogAuthError, match="HTTP 401"):
        anonymous.get_reference("main")
    assert anonymous.requests_made == 1  # auth failures are not retried

    wrong = NessieClient(nessie.uri, token="wrong-token-42", backoff_s=0)
    with pytest.raises(CatalogAuthError) as err:
        wrong.get_content("main", KEY)
    assert "wrong-token-42" not in str(err.value)
    assert "wrong-token-42" not in repr(wrong) and "wrong-token-42" not in repr(vars(wrong))
    assert nessie.uri in str(err.value) and "token" in str(err.value)

    good = NessieClient(nessie.uri, token=TOKEN, backoff_s=0)
    good._sleep = lambda s: None
    assert good.get_reference("main").hash == nessie.head("main")
    assert TOKEN not in repr(good) and "bearer" in repr(good)

    nessie.fail_next(1, status=503)
    nessie.fail_next(1, status=403)
    with pytest.raises(CatalogAuthError, match="HTTP 403") as err403:
        good.get_reference("main")
    assert TOKEN not in str(err403.value)
    assert TOKEN not in caplog.text and "wrong-token-42" not in caplog.text


# ---------------------------------------------------------------- retries


def test_transient_503_retried_with_exponential_backoff(nessie: FakeNessieServer) -> None:
    nessie.commit("main", [_put()], "create")
    client = NessieClient(nessie.uri, backoff_s=0.2, max_attempts=4)
    sleeps: list[float] = []
    client._sleep = sleeps.append
    nessie.fail_next(2, status=503)
    nessie.fail_next(1, status=429)
    assert client.get_reference("main").hash == nessie.head("main")
    assert client.requests_made == 4
    assert nessie.request_count("/trees/main") == 4
    assert sleeps == pytest.approx([0.2, 0.4, 0.8])


def test_retry_after_is_honoured(nessie: FakeNessieServer, client: NessieClient) -> None:
    sleeps: list[float] = []
    client._sleep = sleeps.append
    nessie.fail_next(1, status=429, retry_after=2)
    client.get_reference("main")
    assert sleeps == [2.0]


def test_permanent_500_gives_catalog_error_after_max_attempts(
    nessie: FakeNessieServer, client: NessieClient
) -> None:
    client = NessieClient(nessie.uri, max_attempts=3, backoff_s=0)
    nessie.fail_next(10, status=500)
    with pytest.raises(CatalogError) as err:
        client.get_reference("main")
    assert type(err.value) is CatalogError
    assert client.requests_made == 3 and nessie.request_count() == 3
    assert "3 attempts" in str(err.value) and "HTTP 500" in str(err.value)
    assert nessie.uri in str(err.value)


def test_other_4xx_not_retried(nessie: FakeNessieServer, client: NessieClient) -> None:
    nessie.fail_next(1, status=409)
    with pytest.raises(CatalogError, match="HTTP 409"):
        client.get_reference("main")
    assert client.requests_made == 1


def test_dropped_connection_and_timeout_are_retried(
    nessie: FakeNessieServer, client: NessieClient
) -> None:
    nessie.drop_next(1)
    assert client.get_reference("main").name == "main"
    assert client.requests_made == 2

    slow = NessieClient(nessie.uri, timeout_s=0.2, max_attempts=2, backoff_s=0)
    nessie.delay_next(1, 1.0)
    assert slow.get_reference("main").name == "main"
    assert slow.requests_made == 2


def test_unreachable_server(client: NessieClient) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = NessieClient(f"http://127.0.0.1:{port}/api/v2", max_attempts=2, backoff_s=0)
    with pytest.raises(CatalogError, match="did not answer"):
        dead.get_reference("main")
    assert dead.requests_made == 2


def test_wrong_base_path(nessie: FakeNessieServer) -> None:
    client = NessieClient(nessie.uri.removesuffix("/api/v2") + "/api/v1", backoff_s=0)
    with pytest.raises(CatalogError, match="/api/v2") as err:
        client.get_reference("main")
    assert not isinstance(err.value, RefNotFoundError)


def test_bad_constructor_arguments() -> None:
    for kwargs in (
        {"uri": "nessie:19120"},
        {"uri": "http://user:pw@host/api/v2"},
        {"uri": "http://h/api/v2", "max_attempts": 0},
        {"uri": "http://h/api/v2", "timeout_s": 0},
    ):
        with pytest.raises(InvalidOptionError):
            NessieClient(**kwargs)


# ---------------------------------------------------------------- commit log


def test_commit_log_paging_with_operations(nessie: FakeNessieServer, client: NessieClient) -> None:
    nessie.page_size = 2
    hashes = [nessie.commit("main", [_put(("db", f"t{i}"))], f"commit {i}") for i in range(5)]
    nessie.reset_requests()

    log = list(client.commit_log("main"))
    assert [e.hash for e in log] == hashes[::-1]
    assert [e.message for e in log] == [f"commit {i}" for i in range(4, -1, -1)]
    assert [e.parent_hash for e in log[:-1]] == hashes[::-1][1:]
    assert all(isinstance(e.commit_time, datetime) for e in log)
    op = log[0].operations[0]
    assert (op.type, op.key, op.content_type) == ("PUT", ("db", "t4"), "ICEBERG_TABLE")
    assert op.content is not None and op.content.metadata_location.endswith(".json")
    assert nessie.request_count("/history") == 3  # 2 + 2 + 1
    assert [q.get("page-token") for q in nessie.queries] == [None, hashes[2], hashes[0]]
    assert all(q["fetch"] == "ALL" for q in nessie.queries)

    after = list(client.commit_log("main", since_hash=hashes[1]))
    assert [e.hash for e in after] == hashes[:1:-1]
    assert [e.hash for e in client.commit_log("main", limit=3)] == hashes[:1:-1]
    assert [e.hash for e in client.commit_log(f"main@{hashes[2]}")] == hashes[2::-1]
    assert list(client.commit_log("main", since_hash=hashes[4])) == []

    delete = nessie.commit("main", [Delete(("db", "t0"))], "drop t0")
    (entry,) = client.commit_log("main", since_hash=hashes[4])
    assert entry.hash == delete
    assert [(o.type, o.key, o.content) for o in entry.operations] == [
        ("DELETE", ("db", "t0"), None)
    ]


def test_commit_log_is_lazy(nessie: FakeNessieServer, client: NessieClient) -> None:
    nessie.page_size = 2
    for i in range(6):
        nessie.commit("main", [_put(("db", f"t{i}"))], f"c{i}")
    it = client.commit_log("main")
    assert client.requests_made == 0
    next(it)
    assert client.requests_made == 1


def test_commit_log_since_hash_gone_after_reset(
    nessie: FakeNessieServer, client: NessieClient
) -> None:
    h1 = nessie.commit("main", [_put()], "create")
    h2 = nessie.commit("main", [_put(("db", "x"))], "x")
    nessie.assign("main", h1)  # reset: h2 no longer on main
    with pytest.raises(RefNotFoundError, match="reset"):
        list(client.commit_log("main", since_hash=h2))


# ---------------------------------------------------------------- identity: rename, re-create


def test_rename_detection(nessie: FakeNessieServer, client: NessieClient) -> None:
    since = nessie.commit("main", [_put(("db", "a"))], "create a")
    cid = client.get_content("main", ("db", "a")).content_id  # type: ignore[union-attr]
    nessie.commit("main", [_put(("db", "other"))], "unrelated")
    assert client.find_rename("main", cid, since) is None

    nessie.commit("main", [Delete(("db", "a")), _put(("db", "b"), content_id=cid)], "rename a b")
    assert client.find_rename("main", cid, since) == ("db", "b")
    assert client.find_rename("main", cid, since, old_key=("db", "a")) == ("db", "b")
    assert client.find_rename("main", cid, since, old_key=("db", "zzz")) is None
    moved = client.get_content("main", ("db", "b"))
    assert moved is not None and moved.content_id == cid

    nessie.commit("main", [Delete(("db", "b")), _put(("db", "c"), content_id=cid)], "rename b c")
    assert client.find_rename("main", cid, since) == ("db", "c")

    nessie.commit("main", [Delete(("db", "c"))], "drop c")
    assert client.find_rename("main", cid, since) is None


def test_update_plus_unrelated_drop_is_not_a_rename(
    nessie: FakeNessieServer, client: NessieClient
) -> None:
    since = nessie.commit("main", [_put(("db", "a")), _put(("db", "junk"))], "create")
    cid = client.get_content("main", ("db", "a")).content_id  # type: ignore[union-attr]
    nessie.commit("main", [Delete(("db", "junk")), _put(("db", "a"), content_id=cid)], "upd+drop")
    assert client.find_rename("main", cid, since) is None


def test_drop_and_recreate_gives_new_content_id(
    nessie: FakeNessieServer, client: NessieClient, table: Table
) -> None:
    since = nessie.put_table("main", KEY, table)
    first = client.get_content("main", KEY)
    nessie.commit("main", [Delete(KEY)], "drop")
    with pytest.raises(TableNotFoundError):
        client.get_content("main", KEY)
    nessie.put_table("main", KEY, table)  # nothing under the key now: new content id
    second = client.get_content("main", KEY)
    assert first is not None and second is not None
    assert second.content_id != first.content_id
    assert client.find_rename("main", first.content_id, since) is None

    # drop + create in a single commit: one Put with a different content id
    nessie.commit("main", [_put()], "replace in one commit")
    third = client.get_content("main", KEY)
    assert third is not None and third.content_id not in (first.content_id, second.content_id)


def test_merge_carries_changed_contents(nessie: FakeNessieServer, client: NessieClient) -> None:
    nessie.commit("main", [_put(("db", "a")), _put(("db", "gone"))], "base")
    nessie.create_branch("dev")
    cid = nessie.content("dev", ("db", "a"))["id"]  # type: ignore[index]
    nessie.commit("dev", [_put(("db", "a"), content_id=cid, snapshot_id=7)], "dev a")
    nessie.commit("dev", [Delete(("db", "gone"))], "dev drop")
    merged = nessie.merge("dev", "main")

    content = client.get_content("main", ("db", "a"))
    assert content is not None and (content.content_id, content.snapshot_id) == (cid, 7)
    assert client.get_content("main", ("db", "gone"), missing_ok=True) is None
    (entry,) = client.commit_log("main", limit=1)
    assert entry.hash == merged and entry.message.startswith("Merged dev")
    assert {(o.type, o.key) for o in entry.operations} == {
        ("PUT", ("db", "a")),
        ("DELETE", ("db", "gone")),
    }
    assert nessie.merge("dev", "main") == merged  # nothing new to merge


# ---------------------------------------------------------------- request counter


def test_request_counter_allows_cheap_polls(nessie: FakeNessieServer, client: NessieClient) -> None:
    nessie.commit("main", [_put()], "create")
    assert client.requests_made == 0
    head = client.get_reference("main").hash
    assert client.requests_made == 1
    # a poll with no change is one request
    assert client.get_reference("main").hash == head
    assert client.requests_made == 2
    assert nessie.requests[-1] == ("GET", "/api/v2/trees/main")
    client.get_content("main", KEY)
    assert nessie.requests[-1] == ("GET", "/api/v2/trees/main/contents/db.events")
    assert client.requests_made == 3
