"""Finding 2 of issue 17: after ``icefloe demo`` the README's next commands work as printed,
and a failed look-up names where it looked and creates nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefloe.catalog.loader import embedded_catalog
from icefloe.cli.failures import EXIT_CATALOG
from tests.cli.support import ROOT, assert_one_line, run


def test_demo_then_the_printed_commands_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ICEFLOE_HOME", raising=False)
    demo = run(capsys, "demo", "--no-spark", "--no-stream")
    assert demo.code == 0, demo.err
    assert "next: icefloe snapshots demo.events" in demo.out
    plan = run(capsys, "plan", "demo.events", "--json")
    assert plan.code == 0, plan.err
    oracle = embedded_catalog(tmp_path / "icefloe-warehouse").load_table("demo.events")
    live = {t.file.file_path for t in oracle.scan().plan_files()}
    assert {__import__("json").loads(line)["file"] for line in plan.out.splitlines()} == live
    read = run(capsys, "read", "demo.events", "--to", "events.parquet")
    assert read.code == 0
    assert f"wrote {oracle.scan().to_arrow().num_rows:,} rows" in read.out
    again = run(capsys, "demo", "--no-spark", "--no-stream")  # a second run replaces the table
    assert again.code == 0
    assert (tmp_path / "events.parquet").exists()  # the user's files are left alone


def test_failed_lookup_names_the_place_and_creates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ICEFLOE_HOME", raising=False)
    result = run(capsys, "plan", "demo.events")
    assert result.code == EXIT_CATALOG
    assert_one_line(result, str(tmp_path / "icefloe-warehouse"), "icefloe demo")
    assert list(tmp_path.iterdir()) == []


def test_the_default_home_is_git_ignored() -> None:
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "/icefloe-warehouse/" in ignored
