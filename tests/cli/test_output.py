"""Findings 10 and 11 of issue 17: quiet, readable output; Ctrl-C says where the checkpoint
stands and exits 130."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icefloe.cli import build_parser
from icefloe.cli.failures import EXIT_INTERRUPTED
from icefloe.state import open_store
from tests.cli.support import ROOT, run, warehouse


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    return warehouse(tmp_path / "wh", monkeypatch)


def test_no_progress_frames_off_a_terminal(home, capsys, tmp_path: Path) -> None:
    result = run(capsys, "read", "db.events", "--to", str(tmp_path / "o.parquet"))
    assert result.code == 0
    assert "\r" not in result.err and result.err == ""


def test_help_line_is_plain_text() -> None:
    text = build_parser().format_help()
    assert "``" not in text and ":class:" not in text
    assert "Apache Iceberg" in text


def test_partitions_print_as_dates(home, capsys) -> None:
    result = run(capsys, "plan", "db.events")
    assert result.code == 0
    days = {part.split("day=")[1] for part in result.out.split() if part.startswith("day=")}
    assert days == {"2024-01-01", "2024-01-02", "2024-01-03"}


def test_snapshots_lists_ids_parents_iso_times(home, capsys) -> None:
    _, table = home
    result = run(capsys, "snapshots", "db.events", "--json")
    assert result.code == 0
    listed = [json.loads(line) for line in result.out.splitlines()]
    oracle = table.snapshots()
    assert [r["snapshot_id"] for r in listed] == [str(s.snapshot_id) for s in oracle]
    assert [r["parent_id"] for r in listed] == [None, str(oracle[0].snapshot_id)]
    assert all(r["time"].endswith("Z") and "T" in r["time"] for r in listed)
    assert [r["added_records"] for r in listed] == [30, 30]
    branch = run(capsys, "snapshots", "db.events", "--ref", "nope")
    assert branch.code == 3 and "nope" in branch.err


def test_snapshots_of_a_ref_list_its_lineage_oldest_first(home, capsys) -> None:
    from pyiceberg.table.snapshots import ancestors_of

    _, table = home
    first = table.snapshots()[0].snapshot_id
    table.manage_snapshots().create_branch(first, "old").commit()
    table = table.refresh()
    for ref in ("main", "old"):
        result = run(capsys, "snapshots", "db.events", "--ref", ref, "--json")
        assert result.code == 0
        oracle = list(ancestors_of(table.snapshot_by_name(ref), table.metadata))[::-1]
        assert [r["snapshot_id"] for r in map(json.loads, result.out.splitlines())] == \
            [str(s.snapshot_id) for s in oracle]
    assert len(oracle) == 1  # "old": only the first snapshot


def test_console_sink_prints_rows(home, capsys, tmp_path: Path) -> None:
    result = run(capsys, "stream", "db.events", "--checkpoint", str(tmp_path / "c"),
                 "--available-now", "-o", "batchSize=100")
    assert result.code == 0, result.err
    header = [line for line in result.out.splitlines() if line.startswith("id ")]
    assert header and header[0].split() == ["id", "kind", "ts", "day", "value"]
    values = {line.split()[0] for line in result.out.splitlines() if line[:1].isdigit()}
    assert {"0", "29", "59"} <= values


def test_checkpoint_show_is_readable(home, capsys, tmp_path: Path) -> None:
    _, table = home
    ckpt = tmp_path / "c"
    assert run(capsys, "stream", "db.events", "--checkpoint", str(ckpt), "--available-now",
               "--sink", f"parquet:{tmp_path / 'out'}").code == 0
    shown = run(capsys, "checkpoint", "show", str(ckpt))
    assert shown.code == 0
    assert "{" not in shown.out
    head = str(table.current_snapshot().snapshot_id)
    assert f"last complete snapshot  {head}" in shown.out
    assert "Z by icefloe" in shown.out
    missing = run(capsys, "checkpoint", "show", str(tmp_path / "none"))
    assert missing.code == 5 and "no checkpoint" in missing.err


def test_ctrl_c_reports_the_checkpoint_and_exits_130(home, tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    proc = subprocess.Popen(
        [sys.executable, "-m", "icefloe.cli", "stream", "db.events", "--checkpoint", str(ckpt),
         "--sink", f"parquet:{tmp_path / 'out'}", "-o", "pollIntervalMs=100"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while open_store(str(ckpt)).read() is None or \
                len(list((tmp_path / "out").glob("*.parquet"))) < 1:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(1.5)  # the acks of every batch are checkpointed at least once per second
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED, err
    stored = open_store(str(ckpt)).read()
    assert stored is not None
    assert f"checkpoint {ckpt} written" in err
    assert stored.position.describe() in err
    assert "Traceback" not in err
