"""Tuning sweep: read throughput over splitSize x batchSize x parallelism.

Reads the backfill table (``events_table``; 128k-row row groups, so small split
sizes cut files) with every combination, interleaved, median of ``reps`` runs, and
draws ``benchmarks/sweep.png`` with matplotlib (the ``tune`` extra): one heat map per
parallelism, rows = splitSize, columns = batchSize, each cell labelled with Mrows/s;
the shipped defaults (128 MiB, 65536) are outlined in red, the best cell in orange.

``python -m benchmarks.bench_sweep --replot`` redraws the figure from the table
recorded in RESULTS.md, without measuring.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from benchmarks.bench_backfill import _drain
from benchmarks.common import (
    MIB,
    ROOT,
    events_table,
    interleaved,
    md_table,
    median,
    pick,
)
from icefloe import IcebergSource

DEFAULTS = (128 * MIB, 65_536)


def draw(results: dict[tuple[int, int, int], float], splits: list[int], batches: list[int],
         pars: list[int], path: Path) -> None:
    """One heat map per parallelism (rows: splitSize, columns: batchSize, cells labelled
    with Mrows/s), drawn by matplotlib into ``path`` (PNG, written atomically)."""
    from matplotlib.figure import Figure

    values = [v / 1e6 for v in results.values()]
    best = max(results, key=lambda k: results[k])
    fig = Figure(figsize=(3.4 * len(pars) + 1.2, 3.6), layout="constrained")
    axes = fig.subplots(1, len(pars), squeeze=False)[0]
    image = None
    for ax, par in zip(axes, pars, strict=True):
        grid = [[results[(s, b, par)] / 1e6 for b in batches] for s in splits]
        image = ax.imshow(grid, cmap="Blues", vmin=min(values), vmax=max(values))
        for r, split in enumerate(splits):
            for c, batch in enumerate(batches):
                dark = grid[r][c] > (min(values) + max(values)) / 2
                ax.text(c, r, f"{grid[r][c]:.2f}", ha="center", va="center", fontsize=9,
                        color="white" if dark else "black")
                if (split, batch) == DEFAULTS and par == 2:
                    ax.add_patch(_frame(c, r, "red", 3))
                if (split, batch, par) == best:
                    ax.add_patch(_frame(c, r, "orange", 3, inset=0.08))
        ax.set_title(f"parallelism {par}")
        ax.set_xticks(range(len(batches)), [f"{b // 1024}k" for b in batches])
        ax.set_yticks(range(len(splits)), [f"{s // MIB} MiB" for s in splits])
        ax.set_xlabel("batchSize")
    axes[0].set_ylabel("splitSize")
    if image is not None:
        fig.colorbar(image, ax=list(axes), label="Mrows/s", shrink=0.8)
    temp = path.with_name(f".{path.name}.tmp")
    fig.savefig(temp, format="png", dpi=100)
    temp.replace(path)


def _frame(col: int, row: int, color: str, width: float, inset: float = 0.0) -> Any:
    from matplotlib.patches import Rectangle

    side = 1 - 2 * inset
    return Rectangle((col - 0.5 + inset, row - 0.5 + inset), side, side, fill=False,
                     edgecolor=color, linewidth=width)


def from_results(text: str) -> tuple[dict[tuple[int, int, int], float], list[int], list[int],
                                     list[int]]:
    """The recorded cells of RESULTS.md's "Tuning sweep" table (Mrows/s), to redraw the
    figure without measuring again."""
    section = text.split("## Tuning sweep", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("| ")]
    pars = [int(h.strip()[2:]) for h in lines[0].strip("|").split("|")[2:]]
    results: dict[tuple[int, int, int], float] = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        split = int(cells[0].split()[0]) * MIB
        batch = int(cells[1].replace(",", ""))
        for par, value in zip(pars, cells[2:], strict=True):
            results[(split, batch, par)] = float(value) * 1e6
    splits = sorted({k[0] for k in results})
    batches = sorted({k[1] for k in results})
    return results, splits, batches, pars


def run(scale: str) -> str:
    splits = [4 * MIB, 16 * MIB, 128 * MIB]
    batches = [16_384, 65_536, 262_144]
    pars = [1, 2, 4]
    reps = pick(scale, 2, 5)
    bt = events_table(scale)
    catalog = bt.catalog()

    def reader(split: int, batch: int, par: int):  # type: ignore[no-untyped-def]
        def go() -> tuple[int, int]:
            src = IcebergSource(bt.identifier, catalog=catalog,
                                options={"splitSize": str(split), "batchSize": str(batch)})
            return _drain(src.read(parallelism=par))
        return go

    grid = list(itertools.product(splits, batches, pars))
    res = interleaved({f"{s}/{b}/{p}": reader(s, b, p) for s, b, p in grid}, reps, warmup=False)
    rows_total = next(iter(res.values()))[0][1][0]
    rate = {(s, b, p): rows_total / median([x[0] for x in res[f"{s}/{b}/{p}"]])
            for s, b, p in grid}
    draw(rate, splits, batches, pars, ROOT / "sweep.png")
    best = max(rate, key=lambda k: rate[k])
    default = rate[(*DEFAULTS, 2)]
    table_rows = [[f"{s // MIB} MiB", f"{b:,}", *(f"{rate[(s, b, p)] / 1e6:.2f}" for p in pars)]
                  for s in splits for b in batches]
    return (
        f"{rows_total:,} rows, median of {reps} interleaved runs per cell, Mrows/s. "
        "![sweep](sweep.png) — panels: parallelism 1, 2, 4 (left to right); rows: splitSize "
        "4 / 16 / 128 MiB (top to bottom); columns: batchSize 16k / 64k / 256k; red frame: "
        "shipped defaults (128 MiB, 65536) at parallelism 2; orange frame: best cell.\n\n"
        f"- best: splitSize {best[0] // MIB} MiB, batchSize {best[1]:,}, parallelism "
        f"{best[2]}: {rate[best] / 1e6:.2f} Mrows/s; defaults at parallelism 2: "
        f"{default / 1e6:.2f} Mrows/s ({default / rate[best]:.2f}x of best)\n\n"
        + md_table(["splitSize", "batchSize", *(f"p={p}" for p in pars)], table_rows)
    )


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--replot"]:
        draw(*from_results((ROOT / "RESULTS.md").read_text()), ROOT / "sweep.png")
    else:
        print(run(sys.argv[1] if len(sys.argv) > 1 else "quick"))
