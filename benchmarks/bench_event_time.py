"""Event time: throughput with ``watermarkColumn`` against the same read without it.

The option decodes the files' column statistics while planning (the filtered-scan
decoder), plans each unit whole and sorts it, and the stream computes a watermark per item.
Contenders, each measured with and without ``watermarkColumn=ts`` in the same process,
interleaved (round-robin, rotating who goes first), medians:

- bounded read (``IcebergSource.read``, parallelism 2) of the big table (quick: 2M rows
  in 4 files; full: 20M rows in 20 files) and of the small-files table (quick 1,000,
  full 10,000 files of 500 rows: planning weighs most there);
- the local stream, ``available_now``, over the small-files table's initial scan, every
  item acknowledged (checkpoint every second), so the watermark bookkeeping is in the
  loop.

Target (issue 28): each with the option >= 0.9x the same read without it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import (
    BenchTable,
    events_table,
    interleaved,
    md_table,
    pick,
    ratio_rows,
    small_files_table,
    verdict,
)
from icefloe import IcebergSource

WATERMARK = {"watermarkColumn": "ts"}


def _read(bt: BenchTable, options: dict[str, str]) -> Callable[[], int]:
    def go() -> int:
        src = IcebergSource(bt.identifier, catalog=bt.catalog(), options=options)
        return sum(b.num_rows for b in src.read(parallelism=2))
    return go


def _stream(bt: BenchTable, options: dict[str, str], tmp: Path) -> Callable[[], int]:
    def go() -> int:
        src = IcebergSource(bt.identifier, catalog=bt.catalog(),
                            options={"pollIntervalMs": "100", **options})
        rows = 0
        with src.stream(checkpoint=tempfile.mkdtemp(dir=tmp), parallelism=2,
                        available_now=True) as stream:
            for item in stream:
                rows += item.batch.num_rows
                item.ack()
        return rows
    return go


def run(scale: str, only: str | None = None, reps: int | None = None) -> str:
    """The section's table; ``only``: the cases whose name contains it."""
    reps = reps or pick(scale, 5, 7)
    big, small = events_table(scale), small_files_table(scale)
    out: list[list[str]] = []
    verdicts: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("bounded read, big table", _read(big, {}), _read(big, WATERMARK)),
            ("bounded read, small files", _read(small, {}), _read(small, WATERMARK)),
            ("local stream, small files", _stream(small, {}, Path(tmp)),
             _stream(small, WATERMARK, Path(tmp))),
        ]
        for what, plain, ordered in cases:
            if only is not None and only not in what:
                continue
            results = interleaved({"without": plain, "watermarkColumn=ts": ordered}, reps)
            rows = results["without"][0][1]
            assert all(r == rows for runs in results.values() for _, r in runs), \
                "both reads must deliver the same rows"
            medians, table_rows = ratio_rows(results, rows, "without")
            ratio = medians["without"] / medians["watermarkColumn=ts"]
            secs = sorted(s for s, _ in results["watermarkColumn=ts"])
            spread = f"{secs[0]:.2f}-{secs[-1]:.2f} s"
            verdicts.append(f"{what}: {ratio:.2f}x ({verdict(ratio >= 0.9)})")
            out += [[what, *row, spread if row[0] != "without" else ""]
                    for row in table_rows]
    return (
        md_table(["case", "read", "median", "rows/s", "vs without", "runs",
                  "spread (with)"], out)
        + f"\n\n{reps} interleaved runs each, medians. Target: >= 0.9x the read without "
        "the option. " + "; ".join(verdicts) + "."
    )


if __name__ == "__main__":
    import sys

    # python -m benchmarks.bench_event_time [quick|full] [case substring] [reps]
    args = sys.argv[1:]
    print(run(args[0] if args else "quick", args[1] if len(args) > 1 else None,
              int(args[2]) if len(args) > 2 else None))
