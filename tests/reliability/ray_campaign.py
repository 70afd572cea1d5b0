"""The Ray kill campaign: every Ray scenario several times; one RELIABILITY.md row each.

Usage::

    RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 uv run python -m tests.reliability.ray_campaign \\
        --rows 200000 --files 40 --batch 500 --runs 2

starts a local Ray (2 CPUs, small object store; the driver processes join it as jobs of
their own), runs :data:`~tests.reliability.ray_scenarios.RAY_SCENARIOS` and prints the
table: scenario, runs, kills (reader actors + drivers), rows checked, rows lost,
duplicates (unacked), duplicates of acked rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.reliability.campaign import Row
from tests.reliability.ray_scenarios import RAY_SCENARIOS, Plan
from tests.reliability.scenarios import Size

CAMPAIGN_SIZE = Size(rows=200_000, files=40, batch=500)
CAMPAIGN_PLAN = Plan(kill_every=3.0, driver_kills=3, reader_kills_before=3, commits=40,
                     commit_interval=1.0, sink_delay=0.05)


@dataclass
class RayRow(Row):
    """A :class:`~tests.reliability.campaign.Row` that also counts what was killed
    (``processes`` stays unused: the driver runs are ``driver_kills + runs``)."""

    reader_kills: int = 0
    driver_kills: int = 0


def run_campaign(root: Path, address: str, size: Size = CAMPAIGN_SIZE,
                 plan: Plan = CAMPAIGN_PLAN, runs_per_scenario: int = 2, seed: int = 0,
                 log: bool = False) -> list[RayRow]:
    """Run every Ray scenario ``runs_per_scenario`` times on the Ray at ``address``."""
    rng = random.Random(seed)
    out: list[RayRow] = []
    for name, scenario in RAY_SCENARIOS.items():
        row = RayRow(name)
        for i in range(runs_per_scenario):
            work = root / f"ray-{len(out)}-{i}"
            work.mkdir(parents=True)
            result = scenario(work, size, rng, address, plan)
            v = result.verdict
            row.runs += 1
            row.reader_kills += result.reader_kills
            row.driver_kills += result.driver_kills
            row.rows_expected += v.expected
            row.lost += v.lost
            row.extra += v.extra
            row.duplicates += v.duplicates
            row.bad_duplicates += v.bad_duplicates
            row.seconds += result.seconds
            if v.ok:
                shutil.rmtree(work, ignore_errors=True)
            elif log:
                print(f"  kept {work} for inspection", flush=True)
            if log:
                print(f"  {name} #{i + 1}: {result}", flush=True)
        out.append(row)
    return out


def table(rows: list[RayRow]) -> str:
    """The markdown table of RELIABILITY.md's Ray section."""
    lines = ["| scenario | runs | kills (reader actors + drivers) | rows checked | rows lost "
             "| duplicates (unacked) | duplicates of acked rows |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.scenario} | {r.runs} | {r.reader_kills + r.driver_kills} "
                     f"({r.reader_kills} + {r.driver_kills}) | {r.rows_expected:,} | "
                     f"{r.lost} | {r.duplicates:,} | {r.bad_duplicates} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=CAMPAIGN_SIZE.rows)
    parser.add_argument("--files", type=int, default=CAMPAIGN_SIZE.files)
    parser.add_argument("--batch", type=int, default=CAMPAIGN_SIZE.batch)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--driver-kills", type=int, default=CAMPAIGN_PLAN.driver_kills)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import ray

    from tests.reliability.ray_scenarios import ray_address

    ray.init(num_cpus=2, object_store_memory=200 * 1024 * 1024, include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    plan = dataclasses.replace(CAMPAIGN_PLAN, driver_kills=args.driver_kills)
    try:
        with tempfile.TemporaryDirectory(prefix="icefloe-ray-campaign-") as tmp:
            started = time.monotonic()
            rows = run_campaign(Path(tmp), ray_address(),
                                Size(args.rows, args.files, args.batch), plan, args.runs,
                                args.seed, log=True)
    finally:
        ray.shutdown()
    print(table(rows))
    print(f"\n{args.rows:,} rows per table in {args.files} files (+ {plan.commits} appended "
          f"commits of {args.batch:,} rows), batches of {args.batch:,}; "
          f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
