"""``icefloe read --changelog`` and ``icefloe stream --changelog``: the same change rows as
the Python API, judged by the multiset oracle; mistakes are one line."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.cli.support import assert_one_line, run, warehouse
from tests.helpers.changelog import check_every_snapshot


def test_read_and_stream_changelog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    catalog, table = warehouse(tmp_path / "home", monkeypatch)
    table.delete("id < 5")
    table = catalog.load_table("db.events")
    out = tmp_path / "changes.parquet"
    result = run(capsys, "read", "db.events", "--changelog", "--to", str(out))
    assert result.code == 0, result.err
    assert check_every_snapshot(table, pq.read_table(out)) == 3
    ckpt = str(tmp_path / "ckpt")
    sink = tmp_path / "sink"
    result = run(capsys, "stream", "db.events", "--changelog", "--checkpoint", ckpt,
                 "--available-now", "--sink", f"parquet:{sink}",
                 "-o", "startingVersion=earliest")
    assert result.code == 0, result.err
    got = [r for f in sorted(sink.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert check_every_snapshot(table, got) == 3


def test_changelog_mistakes_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    warehouse(tmp_path / "home", monkeypatch)
    result = run(capsys, "read", "db.events", "-o", "changelg=true")
    assert_one_line(result, "changelg", "did you mean 'changelog'")
    result = run(capsys, "read", "db.events", "--changelog", "-o", "computeUpdates=true",
                 "-o", "identifierColumns=idd")
    assert_one_line(result, "identifierColumns", "idd")
    result = run(capsys, "stream", "db.events", "--changelog", "--checkpoint",
                 str(tmp_path / "c"), "--available-now", "-o", "netChanges=true")
    assert_one_line(result, "netChanges", "bounded read")
    assert not (tmp_path / "c").exists()
