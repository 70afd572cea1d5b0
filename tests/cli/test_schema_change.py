"""``icefloe stream`` across a schema change: the console sink's line for ``evolve``, and a
restart after ``fail`` that needs ``allowColumnRename`` (one typed line, exit status 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefloe.catalog.loader import embedded_catalog
from tests.cli.support import assert_one_line, run
from tests.helpers.schema_changes import CHANGES, append_in_current_schema, make_sc_table


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ICEFLOE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def stream(capsys: pytest.CaptureFixture[str], ckpt: Path, *options: str) -> object:
    args = ["stream", "db.sc", "--checkpoint", str(ckpt), "--available-now"]
    for option in options:
        args += ["-o", option]
    return run(capsys, *args)


def test_console_sink_announces_an_evolved_schema(home: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    tbl = make_sc_table(embedded_catalog(home))
    append_in_current_schema(tbl, range(3))
    ckpt = tmp_path / "ckpt"
    first = stream(capsys, ckpt)
    assert first.code == 0 and "schema" not in first.out.split("# committed")[0]
    CHANGES["add"](tbl)
    b = append_in_current_schema(tbl, range(3, 6))
    second = stream(capsys, ckpt)
    assert second.code == 0, second.err
    assert f"-- schema 0 -> 1 at snapshot {b}: added 'extra'" in second.out
    assert "extra" in second.out.split(f"snapshot {b}")[-1]


def test_restart_after_fail_needs_allow_column_rename(home: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    tbl = make_sc_table(embedded_catalog(home))
    append_in_current_schema(tbl, range(3))
    ckpt = tmp_path / "ckpt"
    assert stream(capsys, ckpt, "onSchemaChange=fail").code == 0
    CHANGES["rename"](tbl)
    append_in_current_schema(tbl, range(3, 6))
    refused = stream(capsys, ckpt, "onSchemaChange=fail")
    assert refused.code == 4
    assert_one_line(refused, "SchemaChangedError", "renamed 'name' to 'label'",
                    "allowColumnRename=true")
    passed = stream(capsys, ckpt, "onSchemaChange=fail", "allowColumnRename=true")
    assert passed.code == 0, passed.err
    assert "label" in passed.out and "n5" in passed.out
