"""Tuning sweep: read throughput over splitSize x batchSize x parallelism.

Reads the backfill table (``events_table``; 128k-row row groups, so small split
sizes cut files) with every combination, interleaved, median of ``reps`` runs, and
draws ``benchmarks/sweep.png`` with a tiny pure-Python PNG writer (zlib + struct;
no matplotlib): one heat map per parallelism, rows = splitSize, columns = batchSize,
each cell labelled with Mrows/s; the shipped defaults (128 MiB, 65536) are outlined
in red, the best cell in black.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from pathlib import Path

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

# 3x5 digits font
_FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111",
    "3": "111001111001111", "4": "101101111001001", "5": "111100111001111",
    "6": "111100111101111", "7": "111001001001001", "8": "111101111101111",
    "9": "111101111001111", ".": "000000000000010",
}


class Canvas:
    def __init__(self, w: int, h: int) -> None:
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def rect(self, x: int, y: int, w: int, h: int, rgb: tuple[int, int, int]) -> None:
        for yy in range(max(0, y), min(self.h, y + h)):
            row = yy * self.w * 3
            for xx in range(max(0, x), min(self.w, x + w)):
                self.px[row + xx * 3: row + xx * 3 + 3] = bytes(rgb)

    def frame(self, x: int, y: int, w: int, h: int, rgb: tuple[int, int, int], t: int) -> None:
        self.rect(x, y, w, t, rgb)
        self.rect(x, y + h - t, w, t, rgb)
        self.rect(x, y, t, h, rgb)
        self.rect(x + w - t, y, t, h, rgb)

    def text(self, x: int, y: int, s: str, scale: int = 3,
             rgb: tuple[int, int, int] = (0, 0, 0)) -> None:
        for ch in s:
            bits = _FONT.get(ch)
            if bits:
                for i, b in enumerate(bits):
                    if b == "1":
                        self.rect(x + (i % 3) * scale, y + (i // 3) * scale, scale, scale, rgb)
            x += 4 * scale

    def png(self, path: Path) -> None:
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3])
                       for y in range(self.h))

        def chunk(tag: bytes, data: bytes) -> bytes:
            return (struct.pack(">I", len(data)) + tag + data
                    + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

        path.write_bytes(b"\x89PNG\r\n\x1a\n"
                         + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                         + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def draw(results: dict[tuple[int, int, int], float], splits: list[int], batches: list[int],
         pars: list[int], path: Path) -> None:
    cell, gap = 90, 40
    w = len(pars) * (len(batches) * cell + gap) + gap
    h = len(splits) * cell + 2 * gap
    c = Canvas(w, h)
    lo, hi = min(results.values()), max(results.values())
    best = max(results, key=lambda k: results[k])
    for p_i, par in enumerate(pars):
        x0 = gap + p_i * (len(batches) * cell + gap)
        c.text(x0, 8, str(par), 4)  # panel title: parallelism
        for r, split in enumerate(splits):
            for col, batch in enumerate(batches):
                v = results[(split, batch, par)]
                f = (v - lo) / (hi - lo) if hi > lo else 1.0
                rgb = (int(235 - 200 * f), int(240 - 150 * f), 255)
                x, y = x0 + col * cell, gap + r * cell
                c.rect(x, y, cell - 4, cell - 4, rgb)
                c.text(x + 12, y + 35, f"{v / 1e6:.1f}")
                if (split, batch) == DEFAULTS and par == 2:
                    c.frame(x, y, cell - 4, cell - 4, (220, 0, 0), 5)
                if (split, batch, par) == best:
                    c.frame(x + 6, y + 6, cell - 16, cell - 16, (0, 0, 0), 3)
    c.png(path)


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
        "shipped defaults (128 MiB, 65536) at parallelism 2; black frame: best cell.\n\n"
        f"- best: splitSize {best[0] // MIB} MiB, batchSize {best[1]:,}, parallelism "
        f"{best[2]}: {rate[best] / 1e6:.2f} Mrows/s; defaults at parallelism 2: "
        f"{default / 1e6:.2f} Mrows/s ({default / rate[best]:.2f}x of best)\n\n"
        + md_table(["splitSize", "batchSize", *(f"p={p}" for p in pars)], table_rows)
    )


if __name__ == "__main__":
    import sys

    print(run(sys.argv[1] if len(sys.argv) > 1 else "quick"))
