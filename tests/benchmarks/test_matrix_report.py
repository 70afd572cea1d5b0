"""The defaults matrix's verdicts, table and figure from recorded cells (no measuring: the
matrix itself runs with ``python -m benchmarks.bench_matrix``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_matrix
from benchmarks.bench_matrix import MB, cell_files, draw, ratios, report, undecided


def _cell(size: int, groups: int, link: str, defaults: float, pyarrow: float,
          pyiceberg: float, tuned: float) -> dict[str, Any]:
    files, rows = cell_files(size, groups)
    return {"size": size, "row_groups": groups, "link": link, "files": files, "rows": rows,
            "bytes": files * size, "tune": "within-noise: parallelism=4 (1.01x)",
            "tuned": {"parallelism": 4}, "load": ["3.1 2.0 1.0", "3.5 2.1 1.0"],
            "seconds": {"icefloe (defaults)": [defaults] * 3, "icefloe (tuned)": [tuned] * 3,
                        "pyarrow dataset": [pyarrow] * 3, "pyiceberg": [pyiceberg] * 3}}


def test_verdicts_table_and_figure(tmp_path: Path) -> None:
    recorded = {
        "1:1:local-disk": _cell(MB, 1, "local disk", 1.0, 1.2, 1.6, 0.95),
        "32:4:s3-10-ms": _cell(32 * MB, 4, "s3 10 ms", 1.0, 0.9, 1.6, 0.8),
    }
    assert ratios(recorded["32:4:s3-10-ms"]) == {
        "pyarrow dataset": 0.9, "pyiceberg": 1.6, "icefloe (tuned)": 0.8}
    text = report("quick", recorded, None)
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    assert len(lines) == 3  # header and one row per cell
    assert "| **met** |" in lines[1]
    assert "**missed** (pyarrow, tuned) |" in lines[2]  # no spread: a real miss
    assert "**1 of 2 cells meet every target.**" in text
    assert cell_files(MB, 1) == (64, 40_000) and cell_files(1_000 * MB, 16)[0] == 1
    target = tmp_path / "matrix.png"
    draw(recorded, target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["matrix.png"]  # no temporary left


def test_a_missed_target_with_its_ceiling_shown(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """A target a profile showed out of reach reads "ceiling: <reason>" when missed; a
    cell missing another target too stays "missed" for that one."""
    monkeypatch.setattr(bench_matrix, "CEILINGS", {
        ("32:1:local-disk", "pyiceberg"): "CPU, decode 0.26 s of PyIceberg's 0.30 s",
        ("32:4:s3-10-ms", "pyiceberg"): "CPU"})
    recorded = {
        "32:1:local-disk": _cell(32 * MB, 1, "local disk", 1.0, 1.2, 1.2, 0.95),
        "32:4:s3-10-ms": _cell(32 * MB, 4, "s3 10 ms", 1.0, 0.9, 1.2, 1.0),
        "1:1:local-disk": _cell(MB, 1, "local disk", 1.0, 1.2, 1.6, 0.95),
    }
    text = report("quick", recorded, None)
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    by_size = {ln.split(" | ")[0]: ln for ln in lines[1:]}
    assert "| ceiling (pyiceberg): CPU, decode 0.26 s of PyIceberg's 0.30 s |" in \
        next(ln for ln in lines if "local disk" in ln and "32 MB" in ln)
    assert "| **missed** (pyarrow); ceiling (pyiceberg): CPU |" in \
        next(ln for ln in lines if "s3 10 ms" in ln)
    assert "| **met** |" in by_size["| 1 MB"]
    assert "**1 of 3 cells meet every target; 1 more miss only targets a profile shows " \
        "out of reach" in text
    draw(recorded, tmp_path / "matrix.png")
    assert (tmp_path / "matrix.png").stat().st_size > 0



def test_the_tuned_target_is_judged_on_the_tuned_pairs_reads() -> None:
    """Where the tuned pair was read 5 times, its ratio and verdict come from those reads
    (the other peers' from the cell's 3); "within noise" only where the pair's spread
    covers the difference, else "missed"."""
    cell = _cell(MB, 1, "s3 10 ms", 1.0, 0.9, 1.6, 0.8)
    cell["tuned_pair"] = {"icefloe (defaults)": [1.0, 1.3, 0.8, 1.1, 0.9],
                          "icefloe (tuned)": [0.85, 1.2, 0.8, 0.95, 0.75]}
    r = ratios(cell)
    assert r["icefloe (tuned)"] == pytest.approx(0.85 / 1.0)
    assert r["pyarrow dataset"] == pytest.approx(0.9)
    text = report("quick", {"1:1:s3-10-ms": cell}, None)
    assert "**missed** (pyarrow, tuned within noise)" in text  # spread 0.3 > gain 0.18
    cell["tuned_pair"] = {"icefloe (defaults)": [1.0, 1.02, 0.99, 1.01, 1.5],
                          "icefloe (tuned)": [0.8, 0.81, 0.79, 0.8, 0.82]}
    assert "**missed** (pyarrow, tuned) |" in report("quick", {"1:1:s3-10-ms": cell}, None)
    # which 3-read results ask for the tuned pair's 5: the ratio within the noise of 0.9
    assert undecided([1.0, 1.2, 0.9], [0.95, 1.0, 1.1])  # 0.95x, spread 0.3
    assert not undecided([1.0, 1.01, 0.99], [0.7, 0.71, 0.69])  # 0.70x, spread 0.03
    assert not undecided([1.0, 1.01, 0.99], [1.1, 1.11, 1.09])  # 1.10x


def test_a_cpu_ceiling_from_the_cells_own_figures() -> None:
    """PyIceberg's 1.5x is out of reach where the least CPU any process of the cell spent
    on a read, spread over every core, is longer than 1.5x PyIceberg allows; not where it
    fits, nor for PyArrow's target, nor without the decode's figure."""
    cell = _cell(MB, 1, "local disk", 0.20, 0.15, 0.24, 0.20)
    cell["cores"] = 2
    cell["cpu"] = {"icefloe (defaults)": [0.36] * 3, "icefloe (tuned)": [0.37] * 3,
                   "pyarrow dataset": [0.33, 0.34, 0.50], "pyiceberg": [0.4] * 3,
                   bench_matrix.DECODE: [0.35] * 3}
    # floor: PyArrow's 0.34 s / 2 cores = 0.17 s > 0.24 / 1.5 = 0.16 s
    why = bench_matrix.cpu_ceiling(cell, "pyiceberg")
    assert why is not None and "pyarrow dataset's 0.34 s" in why and "0.17 s" in why
    assert bench_matrix.cpu_ceiling(cell, "pyarrow dataset") is None
    row = report("quick", {"1:1:local-disk": cell}, None)
    assert "**missed** (pyarrow); ceiling (pyiceberg): CPU: the least CPU" in row
    cell["cores"] = 4  # 0.34 / 4 = 0.085 s: within reach
    assert bench_matrix.cpu_ceiling(cell, "pyiceberg") is None
    cell["cores"] = 2
    cell["seconds"]["pyiceberg"] = [0.27] * 3  # needs 0.18 s >= 0.17 s: within reach
    assert bench_matrix.cpu_ceiling(cell, "pyiceberg") is None
    del cell["cpu"][bench_matrix.DECODE]  # recorded before the decode was measured
    cell["seconds"]["pyiceberg"] = [0.24] * 3
    assert bench_matrix.cpu_ceiling(cell, "pyiceberg") is None
    # such a cell keeps session 11's profiled ceiling
    assert "decoding the files alone takes 0.32 s" in report(
        "quick", {"1:1:local-disk": cell}, None)
