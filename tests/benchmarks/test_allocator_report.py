"""``benchmarks.bench_allocator``'s report and pooling from recorded runs (no measuring:
the benchmark itself runs with ``python -m benchmarks.bench_allocator``), and a contender
process taking the environment it is given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_allocator
from benchmarks.bench_allocator import CONTENDERS, SETTINGS, firsts, laters, pooled, report
from benchmarks.bench_matrix import Contender


def _run(cell: str, scale: dict[str, float], first: float = 9.0) -> dict[str, Any]:
    """A run's cell: every contender's reads under a setting are ``first`` then 1, 2, 3
    seconds times the setting's and contender's scale."""
    def reads(s: str, c: str) -> list[float]:
        return [first] + [r * scale.get(s, 1.0) * scale.get(c, 1.0) for r in (1, 2, 3)]

    return {"cell": cell, "rows": 10,
            "seconds": {s: {c: reads(s, c) for c in CONTENDERS} for s in SETTINGS},
            "cpu": {s: {c: reads(s, c) for c in CONTENDERS} for s in SETTINGS},
            "memory": "mimalloc, huge pages madvise"}


def test_report_keeps_the_first_read_apart_and_pairs_the_later_ones() -> None:
    cell = _run("32:1:s3-10-ms", {"MIMALLOC_ALLOW_THP=2": 0.5, "pyiceberg": 2.0})
    text = report([cell])
    # the first read is not in the later reads' median or range
    assert "| 32:1:s3-10-ms | icefloe (defaults) | mimalloc's default | 9.00 s | " \
        "2.00 s (1.00-3.00) |" in text
    # PyIceberg twice icefloe's time in every round; icefloe at the default twice its time
    # at allow_thp=2
    assert "| 32:1:s3-10-ms | MIMALLOC_ALLOW_THP=2 | 1.00x | 2.00x | 2.00x |" in text
    assert "| 32:1:s3-10-ms | mimalloc's default | 1.00x | 2.00x | 1.00x |" in text


def test_pooling_puts_every_runs_first_read_first_and_keeps_the_rounds_paired() -> None:
    one = _run("256:16:s3-10-ms", {}, first=8.0)
    two = _run("256:16:s3-10-ms", {"pyarrow dataset": 3.0}, first=6.0)
    both = pooled([[one], [two]])[0]
    s, c = next(iter(SETTINGS)), "pyarrow dataset"
    assert firsts(both, "seconds", s, c) == [8.0, 6.0]
    assert laters(both, "seconds", s, c) == [1.0, 2.0, 3.0, 3.0, 6.0, 9.0]
    assert laters(both, "seconds", s, "icefloe (defaults)") == [1.0, 2.0, 3.0] * 2
    # paired per round: 1x in the first run's rounds, 3x in the second's: median 2x
    assert "| 256:16:s3-10-ms | mimalloc's default | 2.00x |" in report([both])
    with pytest.raises(ValueError, match="different cells"):
        pooled([[one], [_run("1:1:local-disk", {})]])


def test_pool_command_reports_files_and_names_a_missing_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps([_run("1:1:local-disk", {})]))
    assert bench_allocator.main(["--pool", str(path)]) == 0
    assert "| 1:1:local-disk | icefloe (defaults) |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        bench_allocator.main(["--pool", str(tmp_path / "absent.json")])
    assert exc.value.code == 2
    assert "absent.json" in capsys.readouterr().err


def test_a_contender_process_gets_the_environment_it_is_given() -> None:
    """``Contender(env=...)``: the variables are added to the child's environment (the
    rest inherited)."""
    script = ("import json, os; print(json.dumps({k: os.environ.get(k) for k in "
              "('MIMALLOC_ALLOW_THP', 'PATH')}), flush=True)")
    child = Contender({}, argv=[sys.executable, "-c", script],
                      env=SETTINGS["MIMALLOC_ALLOW_THP=0"])
    try:
        got = child._line()
    finally:
        child.close()
    assert got == {"MIMALLOC_ALLOW_THP": "0", "PATH": os.environ["PATH"]}


def test_pyarrows_allocator_takes_the_setting_from_the_environment() -> None:
    """The benchmark's premise: PyArrow's mimalloc reads ``MIMALLOC_ALLOW_THP`` when it
    loads (its own report of its options, ``MIMALLOC_VERBOSE``)."""
    out = subprocess.run([sys.executable, "-c", "import pyarrow as pa; pa.allocate_buffer(1)"],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, **SETTINGS["MIMALLOC_ALLOW_THP=2"],
                              "MIMALLOC_VERBOSE": "1"})
    assert out.returncode == 0, out.stderr
    assert "option 'allow_thp': 2" in out.stderr


@pytest.mark.parametrize("cell", ["256:16:s3-10ms", "x", "256:x:local-disk"])
def test_a_misspelled_cell_is_refused_before_anything_starts(
        cell: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench_allocator.main(["--cells", cell])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert repr(cell) in err and "s3-10-ms" in err
