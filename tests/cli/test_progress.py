"""``icefloe read``'s progress line (drawn by rich): on a terminal it shows the splits done
out of the total and the rows; in a pipe nothing is drawn."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from icefloe import IcebergSource
from tests.cli.support import warehouse


def _read_with_stderr_on(terminal: bool, home: Path, tmp_path: Path) -> tuple[int, bytes]:
    env = {**os.environ, "ICEFLOE_HOME": str(home)}
    argv = [sys.executable, "-m", "icefloe.cli", "read", "db.events", "--to",
            str(tmp_path / "out.parquet")]
    if not terminal:
        proc = subprocess.run(argv, env=env, capture_output=True, timeout=120, check=False)
        return proc.returncode, proc.stderr
    leader, follower = pty.openpty()
    with subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=follower) as proc:
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        code = proc.wait(timeout=120)
    os.close(leader)
    return code, out


def test_progress_on_a_terminal_and_none_in_a_pipe(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "wh"
    catalog, table = warehouse(home, monkeypatch)
    splits = len(list(IcebergSource("db.events", catalog=catalog).plan()))
    rows = len(table.scan().to_arrow())

    code, shown = _read_with_stderr_on(True, home, tmp_path)
    assert code == 0, shown
    text = shown.decode(errors="replace")
    assert f"{splits}/{splits}" in text
    assert f"rows {rows:,}" in text

    (tmp_path / "out.parquet").unlink()
    code, piped = _read_with_stderr_on(False, home, tmp_path)
    assert code == 0, piped
    assert piped == b""
