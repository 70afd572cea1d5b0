"""The backfill section's verdict: a target is held only when every separate run meets it."""

from __future__ import annotations

from typing import Any

from benchmarks.bench_backfill import report


def _run(big: float, small: float) -> dict[str, Any]:
    def table(ratio: float) -> dict[str, Any]:
        def reader(seconds: float) -> dict[str, Any]:
            return {"seconds": seconds, "rows": 10, "bytes": 100, "rows_s": 10 / seconds,
                    "mb_s": 1.0, "cpu": seconds, "all": [seconds], "io_mb": [0.0],
                    "minflt": [0], "steal": [0.0], "others": [0.1]}
        return {"icefloe": reader(1.0), "pyarrow": reader(ratio), "_files": 1, "_reps": 1}
    return {"load_start": 1.0, "load_end": 1.0, "ref_start": 15.0, "ref_end": 15.0,
            "pool": "mimalloc", "arrow_cpu": 2, "arrow_io": 8,
            "tables": {"big table": table(big), "small files": table(small)}}


def test_held_only_when_every_run_meets_the_target() -> None:
    text = report([_run(0.96, 1.4), _run(0.97, 1.29), _run(1.0, 1.5)])
    big = next(ln for ln in text.splitlines() if ln.startswith("- big table"))
    small = next(ln for ln in text.splitlines() if ln.startswith("- small files"))
    assert "**held across 3 runs**" in big
    assert "0.96x, 0.97x, 1.00x" in big and "min 0.96x / median 0.97x / max 1.00x" in big
    assert "**missed**" in small and "held" not in small


def test_fewer_than_three_runs_never_held() -> None:
    text = report([_run(1.2, 2.0)])
    assert "held across" not in text and "**met**" in text
