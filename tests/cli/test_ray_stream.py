"""``icefloe stream --engine ray`` runs the same loop, sink grammar and status line as the
local engine (issue 16, item 5) and writes a checkpoint ``checkpoint show`` reads."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.cli.support import run, warehouse

pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")]


def test_ray_stream_available_now_into_parquet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    _, table = warehouse(tmp_path / "wh", monkeypatch)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    result = run(capsys, "stream", "db.events", "--engine", "ray", "--checkpoint", str(ckpt),
                 "--sink", f"parquet:{out}", "--available-now", "--parallelism", "1")
    assert result.code == 0, result.err
    got = sorted(i for f in out.glob("*.parquet")
                 for i in pq.read_table(f).column("id").to_pylist())
    assert got == sorted(table.scan().to_arrow().column("id").to_pylist())
    assert "# committed:" in result.err and "INFO" not in result.err
    shown = run(capsys, "checkpoint", "show", str(ckpt))
    assert shown.code == 0
    assert f"last complete snapshot  {table.current_snapshot().snapshot_id}" in shown.out
