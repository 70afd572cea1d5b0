"""icefloe through Spark Connect: a real Connect server (PySpark's own script, on a free
loopback port: the test session's ``connect_server``, shared with the README's Connect
blocks) and a Connect client session in this process.

What a Connect user does: ``icefloe.spark.register`` (no ``sparkContext`` on a Connect
client), batch reads, changelog reads, ``availableNow`` and continuous streams into
Spark's file sink, a schema change stopping a stream, typed errors with the CLI's exit
statuses, and ``icefloe read|stream --engine spark --remote``. Rows against PyIceberg's
scans; the server's Python workers run this interpreter (icefloe installed), as on a
user's server hosts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

pytest.importorskip("pyspark.sql.connect.session", reason="needs pyspark[connect]")

import icefloe.spark
from icefloe.cli.failures import (
    EXIT_CATALOG,
    EXIT_CHECKPOINT,
    EXIT_ENGINE,
    EXIT_OUTPUT,
    EXIT_SNAPSHOT,
    EXIT_USAGE,
    describe,
)
from icefloe.spark.session import catalog_options, is_connect
from tests.helpers.changelog import check_every_snapshot
from tests.helpers.schema_changes import (
    CHANGES,
    append_in_current_schema,
    make_sc_table,
)
from tests.helpers.tables import (
    EVENTS_SPEC_BY_DAY,
    make_catalog,
    make_table,
    rows,
)
from tests.reliability.spark_harness import sink_files
from tests.spark.connect_server import CONNECT_ENV, ConnectServer, connect_client
from tests.spark.support import assert_same_rows
from tests.spark.test_changelog import changelog_history

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

@pytest.fixture(scope="module")
def connect(connect_server: ConnectServer) -> Iterator[Any]:
    """A Connect client session with icefloe registered. PySpark marks the whole process
    as a Connect client once one exists (an environment variable): it is unmarked after
    the module, so the suite's classic session keeps working."""
    with connect_client(connect_server.url) as spark:
        yield spark


def _opts(catalog: SqlCatalog) -> dict[str, str]:
    return catalog_options(catalog)


def _ids(out: Path) -> list[int]:
    """The ids in the files Spark's file sink committed (listed in its metadata log)."""
    return sorted(i for f in sink_files(out) for i in pq.read_table(f).column("id").to_pylist())


def test_register_on_a_connect_session_then_a_batch_read_equals_pyiceberg(
        connect: Any, catalog: SqlCatalog) -> None:
    assert is_connect(connect)
    icefloe.spark.register(connect)  # again: a no-op, no sparkContext touched
    table = make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY)
    table.append(rows(30))
    table.append(rows(20, start=30))
    df = icefloe.spark.read(connect, "db.events", catalog=catalog,
                            options={"filter": "id >= 5", "splitSize": 1})
    assert_same_rows(df, table.scan(row_filter="id >= 5").to_arrow())
    first = table.snapshots()[0].snapshot_id
    plain = (connect.read.format("icefloe").options(**_opts(catalog))
             .option("snapshotId", str(first)).load("db.events"))
    assert_same_rows(plain, table.scan(snapshot_id=first).to_arrow())


def test_changelog_read_through_connect(connect: Any, catalog: SqlCatalog) -> None:
    table = changelog_history(catalog)
    df = (connect.read.format("icefloe").options(**_opts(catalog))
          .option("changelog", "true").load("db.events"))
    assert check_every_snapshot(table, [r.asDict() for r in df.collect()]) == 4


def _available_now(connect: Any, catalog: SqlCatalog, out: Path, ckpt: Path) -> None:
    query = (connect.readStream.format("icefloe").options(**_opts(catalog))
             .option("maxFilesPerTrigger", "1").load("db.events")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()


def test_available_now_stream_is_exactly_once_across_runs(
        connect: Any, tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    table = make_table(catalog)
    table.append(rows(10))
    table.append(rows(10, start=10))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    _available_now(connect, catalog, out, ckpt)
    assert _ids(out) == list(range(20))
    table.append(rows(5, start=100))
    _available_now(connect, catalog, out, ckpt)  # resumes from the query's checkpoint
    assert _ids(out) == sorted(table.refresh().scan().to_arrow().column("id").to_pylist())


def _wait_for_ids(out: Path, expected: list[int], query: Any, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        got = _ids(out)
        if got == expected:
            return
        assert query.exception() is None, query.exception()
        assert len(got) <= len(expected), f"more rows than the table holds: {got}"
        assert time.monotonic() < deadline, f"the sink holds {len(got)} of {len(expected)}"
        time.sleep(0.25)


def test_continuous_stream_follows_new_snapshots(connect: Any, tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    table = make_table(catalog)
    table.append(rows(10))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    query = (connect.readStream.format("icefloe").options(**_opts(catalog))
             .option("pollIntervalMs", "100").load("db.events")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ckpt))
             .trigger(processingTime="200 milliseconds").start())
    try:
        _wait_for_ids(out, list(range(10)), query)
        table.append(rows(7, start=10))
        _wait_for_ids(out, list(range(17)), query)
    finally:
        query.stop()
    assert _ids(out) == sorted(table.refresh().scan().to_arrow().column("id").to_pylist())


def test_a_schema_change_stops_the_stream_with_its_typed_error(
        connect: Any, tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    table = make_sc_table(catalog)
    append_in_current_schema(table, range(5))
    out = tmp_path / "out"
    query = (connect.readStream.format("icefloe").options(**_opts(catalog))
             .option("pollIntervalMs", "100").load("db.sc")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        _wait_for_ids(out, list(range(5)), query)
        CHANGES["rename"](table)
        renamed = append_in_current_schema(table, range(5, 10))
        try:
            query.awaitTermination(300)
        except Exception as exc:  # StreamingQueryException, as query.exception() holds it
            error: BaseException | None = exc
        else:
            error = query.exception()
    finally:
        query.stop()
    assert error is not None, "the query went on past the rename"
    line, code = describe(error) or ("", 0)
    assert line.startswith("SchemaChangedError: ") and str(renamed) in line, line
    assert code == EXIT_SNAPSHOT
    assert _ids(out) == list(range(5)), "nothing of the renamed schema's snapshot delivered"


BAD = [
    ({"snapshotId": "12x"}, "db.events", "InvalidOptionError", EXIT_USAGE),
    ({"snapshotId": "12"}, "db.events", "SnapshotNotFoundError", EXIT_SNAPSHOT),
    ({}, "db.nope", "TableNotFoundError", EXIT_CATALOG),
]


@pytest.mark.parametrize(("options", "name", "error", "code"), BAD,
                         ids=[e for _, _, e, _ in BAD])
def test_typed_errors_keep_their_type_and_exit_status(
        connect: Any, catalog: SqlCatalog, options: dict[str, str], name: str, error: str,
        code: int) -> None:
    make_table(catalog).append(rows(3))
    with pytest.raises(Exception) as caught:
        icefloe.spark.read(connect, name, catalog=catalog, options=options).collect()
    assert describe(caught.value) is not None
    line, status = describe(caught.value)  # type: ignore[misc]
    assert line.startswith(f"{error}: "), line
    assert status == code


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in CONNECT_ENV}
    return subprocess.run([sys.executable, "-m", "icefloe.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _cli_catalog(catalog: SqlCatalog) -> list[str]:
    return [part for key, value in _opts(catalog).items() if key != "catalog"
            for part in ("-o", f"{key}={value}")] + ["--catalog", "test"]


def test_cli_read_and_stream_with_remote(connect_server: ConnectServer,
                                        tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    table = make_table(catalog)
    table.append(rows(12))
    table.append(rows(8, start=12))
    oracle = sorted(table.scan().to_arrow().column("id").to_pylist())

    done = _cli(["read", "db.events", *_cli_catalog(catalog), "--engine", "spark",
                 "--remote", connect_server.url, "--to", "out"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "wrote 20 rows" in done.stdout
    assert sorted(pq.read_table(tmp_path / "out").column("id").to_pylist()) == oracle

    stream = ["stream", "db.events", *_cli_catalog(catalog), "--engine", "spark",
              "--remote", connect_server.url, "--sink", f"parquet:{tmp_path / 's'}",
              "--checkpoint", str(tmp_path / "ckpt"), "--available-now"]
    done = _cli(stream, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _ids(tmp_path / "s") == oracle

    bad = _cli(["read", "db.events", *_cli_catalog(catalog), "--engine", "spark",
                "--remote", connect_server.url, "--to", "bad", "-o", "snapshotId=7"], tmp_path)
    assert bad.returncode == EXIT_SNAPSHOT, bad.stderr
    assert bad.stderr.startswith("error: SnapshotNotFoundError: "), bad.stderr
    assert not (tmp_path / "bad").exists()


def test_cli_remote_paths_are_this_machines_and_unwritable_ones_fail_typed(
        connect_server: ConnectServer, tmp_path: Path) -> None:
    """With ``--remote`` a relative ``--checkpoint`` / sink means this directory (the
    server's working directory is elsewhere); a checkpoint or sink the server cannot
    create fails with CheckpointError / OutputError naming the path and the fix."""
    catalog = make_catalog(tmp_path)
    make_table(catalog).append(rows(7))
    base = ["stream", "db.events", *_cli_catalog(catalog), "--engine", "spark",
            "--remote", connect_server.url, "--available-now"]
    done = _cli([*base, "--checkpoint", "rel-ckpt", "--sink", "parquet:rel-out"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "rel-ckpt" / "offsets").is_dir()
    assert _ids(tmp_path / "rel-out") == list(range(7))
    assert not list((tmp_path / "rel-out").glob("_icefloe_probe-*")), "the probe is removed"

    (tmp_path / "a-file").write_text("not a directory")
    ckpt = tmp_path / "a-file" / "ckpt"
    done = _cli([*base, "--checkpoint", str(ckpt), "--sink", f"parquet:{tmp_path / 'o2'}"],
                tmp_path)
    assert done.returncode == EXIT_CHECKPOINT, done.stderr[-3000:]
    assert done.stderr.startswith(f"error: CheckpointError: --checkpoint {ckpt}: "), done.stderr
    assert "give a directory the server's driver host can write" in done.stderr

    sink = tmp_path / "a-file" / "out"
    done = _cli([*base, "--checkpoint", str(tmp_path / "c3"), "--sink", f"parquet:{sink}"],
                tmp_path)
    assert done.returncode == EXIT_OUTPUT, done.stderr[-3000:]
    assert done.stderr.startswith(f"error: OutputError: --sink parquet:{sink}: the Spark "
                                  "Connect server"), done.stderr
    assert "cannot write there" in done.stderr and "mounted at the same path" in done.stderr
    assert not (tmp_path / "c3").exists(), "refused before the query started"


@pytest.mark.parametrize(("extra", "message"), [
    (["--engine", "local", "--remote", "sc://127.0.0.1:1"], "add --engine spark"),
    (["--engine", "spark", "--master", "local[1]", "--remote", "sc://127.0.0.1:1"], "not both"),
    (["--engine", "spark", "--remote", "localhost:1"], "not a Spark Connect URL"),
], ids=["engine", "master", "url"])
def test_cli_refuses_remote_misuse_in_one_line(tmp_path: Path, extra: list[str],
                                               message: str) -> None:
    done = _cli(["read", "demo.events", "--to", "x", *extra], tmp_path)
    assert done.returncode == EXIT_USAGE
    assert done.stderr.count("\n") == 1, done.stderr
    assert "--remote" in done.stderr and message in done.stderr, done.stderr


@pytest.mark.parametrize("command", ["read", "stream"])
def test_no_server_at_the_remote_address_is_one_typed_line(tmp_path: Path,
                                                           command: str) -> None:
    """Nothing listens at the ``--remote`` address: the command fails at once with the
    engine's exit status and one line naming the address and the fix (PySpark's client
    alone retries for about a minute, then names no address), and writes nothing."""
    from icefloe.errors import EngineError
    from icefloe.seaweed import free_port

    url = f"sc://127.0.0.1:{free_port()}"
    target = ["--to", "out.parquet"] if command == "read" else [
        "--checkpoint", "ckpt", "--sink", "parquet:out", "--available-now"]
    done = _cli([command, "demo.events", *target, "--engine", "spark", "--remote", url],
                tmp_path)
    assert done.returncode == EXIT_ENGINE, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"no Spark Connect server answers at {url}" in done.stderr, done.stderr
    assert "start-connect-server.sh" in done.stderr
    assert not (tmp_path / "out.parquet").exists() and not (tmp_path / "out").exists()
    with pytest.raises(EngineError, match=f"no Spark Connect server answers at {url}"):
        icefloe.spark.session(remote=url)


def test_credentials_as_options_of_a_connect_read_warn_naming_the_keys(connect: Any) -> None:
    """A Connect plan carries its options to the server, which may log it whole: a read
    with credentials as options warns, naming the keys (never the values) and the fix;
    the catalog's name alone does not warn. Nothing runs: the plan is never sent."""
    from icefloe.spark.session import SecretInPlanWarning

    secret = {"catalog": "lake", "catalog.credential": "client:hunter2-value",
              "catalog.s3.secret-access-key": "hunter2-value", "catalog.s3.region": "x"}
    with pytest.warns(SecretInPlanWarning) as caught:
        icefloe.spark.read(connect, "db.events", options=secret)
    message = str(caught[0].message)
    assert message.startswith("options catalog.credential, catalog.s3.secret-access-key "), \
        message
    assert "hunter2" not in message and "configure the catalog on the server's hosts" in message
    icefloe.spark.read(connect, "db.events", catalog="lake")  # warnings are errors here
