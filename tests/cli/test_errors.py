"""Finding 4 and 6 of issue 17: every user error is one line naming the value and what to
do, with its own exit status, no traceback, nothing created; advice that works."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from icefloe.cli.failures import (
    EXIT_CATALOG,
    EXIT_CHECKPOINT,
    EXIT_OUTPUT,
    EXIT_SNAPSHOT,
    EXIT_USAGE,
    describe,
)
from icefloe.errors import InvalidOptionError, SnapshotNotFoundError
from tests.cli.support import assert_one_line, run, warehouse


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    return warehouse(tmp_path / "wh", monkeypatch)


def test_to_in_a_missing_directory(home, capsys, tmp_path: Path) -> None:
    result = run(capsys, "read", "db.events", "--to", str(tmp_path / "nope" / "x.parquet"))
    assert result.code == EXIT_OUTPUT
    assert_one_line(result, "nope", "does not exist")
    assert not (tmp_path / "nope").exists()


def test_parallelism_zero_creates_no_checkpoint(home, capsys, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    result = run(capsys, "stream", "db.events", "--checkpoint", str(ckpt), "--parallelism", "0",
                 "--available-now")
    assert result.code == EXIT_USAGE
    assert_one_line(result, "--parallelism", "0")
    assert not ckpt.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_checkpoint_directory_is_a_checkpoint_error(home, capsys,
                                                              tmp_path: Path) -> None:
    ckpt = tmp_path / "ro"
    ckpt.mkdir()
    ckpt.chmod(0o500)
    try:
        result = run(capsys, "stream", "db.events", "--checkpoint", str(ckpt),
                     "--available-now", "--sink", f"parquet:{tmp_path / 'out'}")
    finally:
        ckpt.chmod(0o700)
    assert result.code == EXIT_CHECKPOINT
    assert_one_line(result, "CheckpointError", str(ckpt), "not writable")


def test_parquet_sink_on_an_existing_file(home, capsys, tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x")
    result = run(capsys, "stream", "db.events", "--checkpoint", str(tmp_path / "c"),
                 "--sink", f"parquet:{target}", "--available-now")
    assert result.code == EXIT_OUTPUT
    assert_one_line(result, str(target), "is a file")
    assert not (tmp_path / "c").exists()


def test_unknown_sink(home, capsys, tmp_path: Path) -> None:
    result = run(capsys, "stream", "db.events", "--checkpoint", str(tmp_path / "c"),
                 "--sink", "kafka:x")
    assert result.code == EXIT_USAGE
    assert_one_line(result, "kafka:x", "console | parquet:DIR")


def test_usage_error_masks_property_values(home, capsys, tmp_path: Path) -> None:
    # `checkpoint show` takes no -o: argparse echoes them, credentials included
    result = run(capsys, "checkpoint", "show", str(tmp_path / "c"),
                 "-o", "catalog.s3.secret-access-key=hunter2-secret",
                 "-o", "checkpoint.s3.session-token=tok-secret", "-o", "batchSize=10")
    assert result.code == EXIT_USAGE
    assert_one_line(result, "unrecognized arguments", "catalog.s3.secret-access-key=***",
                    "checkpoint.s3.session-token=***", "batchSize=10")
    assert "secret" not in result.err.replace("secret-access-key", "")


@pytest.mark.parametrize("engine", ["spark", "ray"])
def test_engine_read_without_to_fails_before_starting_the_engine(
        home, capsys, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    # the engine and icefloe's adapter cannot be imported here: reaching them would fail
    # with an ImportError, not the usage error; and no module of theirs is loaded
    blocked = ["pyspark", "ray", f"icefloe.{engine}"]
    for name in blocked:
        monkeypatch.setitem(sys.modules, name, None)
    before = set(sys.modules)
    result = run(capsys, "read", "db.events", "--engine", engine)
    assert result.code == EXIT_USAGE
    assert_one_line(result, "--to")
    loaded = [m for m in set(sys.modules) - before if m.split(".")[0] in ("pyspark", "ray")
              or m.startswith(f"icefloe.{engine}.")]
    assert loaded == []  # no Spark / Ray start-up


def test_bad_option_value_is_usage(home, capsys) -> None:
    result = run(capsys, "plan", "db.events", "-o", "snapshotId=abc")
    assert result.code == EXIT_USAGE
    assert_one_line(result, "InvalidOptionError", "snapshotId", "'abc'")


def test_missing_snapshot_points_at_icefloe_snapshots(home, capsys) -> None:
    result = run(capsys, "plan", "db.events", "-o", "snapshotId=42")
    assert result.code == EXIT_SNAPSHOT
    assert_one_line(result, "42", "icefloe snapshots db.events")
    assert run(capsys, "snapshots", "db.events").code == 0


def test_reversed_range_does_not_advise_a_stream_option(home, capsys) -> None:
    _, table = home
    first, second = (s.snapshot_id for s in table.snapshots())
    result = run(capsys, "plan", "db.events", "-o", f"startSnapshotId={second}",
                 "-o", f"endSnapshotId={first}")
    assert result.code == EXIT_SNAPSHOT
    assert_one_line(result, str(second), "before the end")
    assert "onLineageBreak" not in result.err


def test_table_without_namespace(home, capsys) -> None:
    result = run(capsys, "plan", "t")
    assert result.code == EXIT_USAGE
    assert_one_line(result, "'t'", "namespace.table")


def test_unconfigured_catalog_names_icefloe_flags(home, capsys) -> None:
    result = run(capsys, "plan", "db.events", "--catalog", "prod")
    assert result.code == EXIT_CATALOG
    assert_one_line(result, "'prod'", "-o catalog.uri=")
    assert "--uri" not in result.err


def test_verbose_after_the_subcommand_shows_the_traceback(home, capsys) -> None:
    result = run(capsys, "plan", "db.events", "-o", "snapshotId=42", "-v")
    assert result.code == EXIT_SNAPSHOT
    assert "Traceback" in result.err and "SnapshotNotFoundError" in result.err


def test_wrapped_errors_keep_their_type_and_status() -> None:
    """What Spark prints when a Python worker raised icefloe's error (text of a real
    AnalysisException, abridged): the innermost icefloe error is reported."""
    text = ("[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: "
            "Traceback (most recent call last):\n  File \"...\", line 5\n"
            "icefloe.errors.InvalidOptionError: option 'columns': 'nope' is not a column of "
            "db.events; columns are id, kind SQLSTATE: 38000")
    line, code = describe(RuntimeError(text)) or ("", 0)
    assert code == EXIT_USAGE
    assert line == ("InvalidOptionError: option 'columns': 'nope' is not a column of "
                    "db.events; columns are id, kind")
    direct = describe(SnapshotNotFoundError("no snapshot 1"))
    assert direct == ("SnapshotNotFoundError: no snapshot 1", EXIT_SNAPSHOT)
    assert describe(ValueError("x")) is None
    assert describe(InvalidOptionError("a", "b")) == ("InvalidOptionError: option 'a': b",
                                                      EXIT_USAGE)


def test_unwritable_checkpoint_location_is_a_checkpoint_error(home, capsys,
                                                              tmp_path: Path) -> None:
    """A checkpoint path under a regular file (not writable as a directory, even by root)."""
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    ckpt = blocker / "ckpt"
    result = run(capsys, "stream", "db.events", "--checkpoint", str(ckpt), "--available-now",
                 "--sink", f"parquet:{tmp_path / 'out'}")
    assert result.code == EXIT_CHECKPOINT
    assert_one_line(result, "CheckpointError", str(ckpt), "not writable")


def test_an_engine_failure_is_an_engine_error_not_a_bug() -> None:
    pyspark_errors = pytest.importorskip("pyspark.errors")
    exc = pyspark_errors.PySparkRuntimeError("Python worker failed to connect back.")
    line, code = describe(exc) or ("", 0)
    assert code == 7 and line.startswith("EngineError: PySparkRuntimeError: Python worker")
