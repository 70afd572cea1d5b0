"""The tuning sweep's figure is drawn by matplotlib from the recorded cells of RESULTS.md."""

from __future__ import annotations

from pathlib import Path

from benchmarks.bench_sweep import MIB, draw, from_results
from benchmarks.common import ROOT


def test_recorded_cells_redraw_as_a_png(tmp_path: Path) -> None:
    results, splits, batches, pars = from_results((ROOT / "RESULTS.md").read_text())
    assert (splits, batches, pars) == ([4 * MIB, 16 * MIB, 128 * MIB],
                                       [16_384, 65_536, 262_144], [1, 2, 4])
    assert len(results) == 27 and all(v > 0 for v in results.values())
    target = tmp_path / "sweep.png"
    draw(results, splits, batches, pars, target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.png"]  # no temporary left
    from PIL import Image

    with Image.open(target) as image:
        assert image.width > 600 and image.height > 200
