"""Finding 3 of issue 17: ``read --to`` never leaves a partial output; ``--mode`` decides what
happens to an existing target, the same on every engine; counts are what this run wrote."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pyarrow.parquet as pq
import pytest

from icefloe.cli.failures import EXIT_DATA, EXIT_OUTPUT
from tests.cli.support import assert_one_line, run, warehouse
from tests.helpers.parallelism import record_parallelism


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    return warehouse(tmp_path / "wh", monkeypatch)


def _ids(path: Path) -> list[int]:
    return sorted(pq.read_table(path).column("id").to_pylist())


def _oracle(table) -> list[int]:
    return sorted(table.refresh().scan().to_arrow().column("id").to_pylist())


def test_failed_read_leaves_no_file(home, capsys, tmp_path: Path) -> None:
    _, table = home
    files = sorted(t.file.file_path for t in table.scan().plan_files())
    Path(urlparse(files[-1]).path).unlink()  # read after other files were written
    out = tmp_path / "out.parquet"
    result = run(capsys, "read", "db.events", "--to", str(out), "-o", "maxAttempts=1",
                 "--parallelism", "1")
    assert result.code == EXIT_DATA
    assert_one_line(result, "DataFileError")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wh"]  # no file, no temp


def test_file_target_modes(home, capsys, tmp_path: Path) -> None:
    _, table = home
    out = tmp_path / "out.parquet"
    assert run(capsys, "read", "db.events", "--to", str(out)).code == 0
    assert _ids(out) == _oracle(table)
    before = out.stat().st_mtime_ns
    refused = run(capsys, "read", "db.events", "--to", str(out))
    assert refused.code == EXIT_OUTPUT
    assert_one_line(refused, "already exists", "--mode overwrite")
    assert out.stat().st_mtime_ns == before
    appended = run(capsys, "read", "db.events", "--to", str(out), "--mode", "append")
    assert appended.code == EXIT_OUTPUT
    table.append(__import__("tests.helpers.tables", fromlist=["rows"]).rows(5, start=500))
    result = run(capsys, "read", "db.events", "--to", str(out), "--mode", "overwrite")
    assert result.code == 0 and "wrote 65 rows in 1 file" in result.out
    assert _ids(out) == _oracle(table)


def test_directory_target_append_counts_this_run(home, capsys, tmp_path: Path) -> None:
    _, table = home
    out = tmp_path / "outdir"
    first = run(capsys, "read", "db.events", "--to", str(out) + "/")
    assert first.code == 0 and "wrote 60 rows in 1 file" in first.out
    again = run(capsys, "read", "db.events", "--to", str(out) + "/")
    assert again.code == EXIT_OUTPUT
    second = run(capsys, "read", "db.events", "--to", str(out), "--mode", "append",
                 "-o", "columns=id")
    assert second.code == 0 and "wrote 60 rows in 1 file" in second.out  # not 120
    files = sorted(out.glob("*.parquet"))
    assert len(files) == 2
    assert sum(pq.ParquetFile(f).metadata.num_rows for f in files) == 120
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outdir", "wh"]  # no temp left
    replaced = run(capsys, "read", "db.events", "--to", str(out), "--mode", "overwrite")
    assert replaced.code == 0
    assert len(list(out.glob("*.parquet"))) == 1 and _ids(out) == _oracle(table)


@pytest.mark.ray
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")
def test_ray_refuses_an_existing_directory_and_appends_only_with_mode(
        home, capsys, tmp_path: Path) -> None:
    _, table = home
    out = tmp_path / "rayout"
    out.mkdir()
    (out / "old.parquet").write_bytes(Path(next(iter(
        urlparse(t.file.file_path).path for t in table.scan().plan_files()))).read_bytes())
    refused = run(capsys, "read", "db.events", "--engine", "ray", "--to", str(out))
    assert refused.code == EXIT_OUTPUT
    result = run(capsys, "read", "db.events", "--engine", "ray", "--to", str(out),
                 "--mode", "append")
    assert result.code == 0, result.err
    assert "wrote 60 rows" in result.out  # this run's rows, not the directory's
    assert "INFO" not in result.err and "\r" not in result.err  # quiet: no Ray progress
    new = [f for f in out.glob("*.parquet") if f.name != "old.parquet"]
    assert sorted(i for f in new for i in pq.read_table(f).column("id").to_pylist()) \
        == _oracle(table)


def test_read_parallelism_defaults_as_the_librarys(home, capsys, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``icefloe read`` without ``--parallelism`` reads a local table on
    ``LOCAL_PARALLELISM`` threads, as ``IcebergSource.read()``; a given one is kept."""
    import icefloe.local.engine as engine
    from icefloe.source import LOCAL_PARALLELISM

    _, table = home
    threads = record_parallelism(monkeypatch, engine)
    for name, extra in (("a.parquet", []), ("b.parquet", ["--parallelism", "3"])):
        assert run(capsys, "read", "db.events", "--to", str(tmp_path / name), *extra).code == 0
        assert _ids(tmp_path / name) == _oracle(table)
    assert threads == [LOCAL_PARALLELISM, 3]
