"""The kill campaign: every scenario several times, random kill points, one table row each.

Usage::

    uv run python -m tests.reliability.campaign --rows 1000000 --files 100 \\
        --batch 5000 --random-points 50 --runs 3

prints the RELIABILITY.md table (scenario, runs, rows lost, duplicates, duplicates of
acknowledged rows). ``runs`` counts scenario repetitions; the process starts and kills
inside one repetition are the scenario's (see :mod:`tests.reliability.scenarios`).
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.reliability.scenarios import SCENARIOS, Size, random_kill

RANDOM = "SIGKILL at a random point (backfill)"


@dataclass
class Row:
    """One line of the table: totals over ``runs`` repetitions of ``scenario``."""

    scenario: str
    runs: int = 0
    processes: int = 0
    rows_expected: int = 0
    lost: int = 0
    extra: int = 0
    duplicates: int = 0
    bad_duplicates: int = 0
    seconds: float = 0.0


def run_campaign(root: Path, size: Size, random_points: int, runs_per_scenario: int,
                 seed: int = 0, log: bool = False) -> list[Row]:
    """Run every scenario ``runs_per_scenario`` times and the random-kill scenario
    ``random_points`` times; return the totals per scenario."""
    rng = random.Random(seed)
    out: list[Row] = []
    for name, scenario in SCENARIOS.items():
        row = Row(name)
        count = random_points if name == RANDOM else runs_per_scenario
        for i in range(count):
            work = root / f"{len(out)}-{i}"
            work.mkdir(parents=True)
            started = time.monotonic()
            verdict = scenario(work, size, rng) if name != RANDOM else random_kill(work, size, rng)
            row.seconds += time.monotonic() - started
            row.runs += 1
            row.processes += verdict.runs
            row.rows_expected += verdict.expected
            row.lost += verdict.lost
            row.extra += verdict.extra
            row.duplicates += verdict.duplicates
            row.bad_duplicates += verdict.bad_duplicates
            shutil.rmtree(work, ignore_errors=True)
            if log:
                print(f"  {name} #{i + 1}: {verdict}", flush=True)
        out.append(row)
    return out


def table(rows: list[Row]) -> str:
    """The markdown table of RELIABILITY.md."""
    lines = ["| scenario | runs | processes | rows checked | rows lost | duplicates "
             "(unacked tail) | duplicates of acked rows |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.scenario} | {r.runs} | {r.processes} | {r.rows_expected:,} | "
                     f"{r.lost} | {r.duplicates:,} | {r.bad_duplicates} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--random-points", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="icefloe-campaign-") as tmp:
        started = time.monotonic()
        rows = run_campaign(Path(tmp), Size(args.rows, args.files, args.batch),
                            args.random_points, args.runs, args.seed, log=True)
    print(table(rows))
    print(f"\n{args.rows:,} rows per table, {args.files} files, batches of {args.batch:,}; "
          f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
