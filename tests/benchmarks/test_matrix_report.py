"""The defaults matrix's verdicts, table and figure from recorded cells (no measuring: the
matrix itself runs with ``python -m benchmarks.bench_matrix``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.bench_matrix import MB, cell_files, draw, ratios, report


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
    assert "**missed** (pyarrow, tuned)" in lines[2]
    assert "**1 of 2 cells meet every target.**" in text
    assert cell_files(MB, 1) == (64, 40_000) and cell_files(1_000 * MB, 16)[0] == 1
    target = tmp_path / "matrix.png"
    draw(recorded, target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["matrix.png"]  # no temporary left
