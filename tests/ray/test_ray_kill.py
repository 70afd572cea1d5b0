"""Kill tests on Ray: reader actors ``ray.kill``ed every few seconds and the driver process
SIGKILLed while a writer process appends; the sink is checked against PyIceberg's scan.

Criteria (:func:`tests.reliability.harness.judge`): every row of the table reached the
sink (no loss), nothing else did, and a row whose batch was acknowledged (its ack line
written after the enumerator recorded the ack and wrote the checkpoint) is never
delivered again; the only duplicates come from batches not acknowledged before a kill.

Default run: one quick scenario (sink in the reader actors, one driver kill). ``-m
slow``: the campaign (:mod:`tests.reliability.ray_campaign`, both scenarios, a bigger
table, three driver kills per run), the figures of RELIABILITY.md's Ray section.
The driver processes join the suite's local Ray as jobs of their own.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.ray.conftest import RAY_WARNINGS
from tests.reliability.ray_campaign import run_campaign
from tests.reliability.ray_scenarios import Plan, kills_with_writer, ray_address
from tests.reliability.scenarios import Size

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]

QUICK_SIZE = Size(rows=10_000, files=5, batch=100)
QUICK_PLAN = Plan(kill_every=3.0, driver_kills=1, reader_kills_before=2, commits=10,
                  commit_interval=1.0, sink_delay=0.1)


def test_ray_kills_quick(tmp_path: Path) -> None:
    rng = random.Random(random.randrange(1 << 30))
    result = kills_with_writer(tmp_path, QUICK_SIZE, rng, ray_address(), "sink", QUICK_PLAN)
    verdict = result.verdict
    assert verdict.lost == 0, result
    assert verdict.extra == 0, result
    assert verdict.bad_duplicates == 0, result  # only unacknowledged batches repeat
    assert result.driver_kills == 1, result
    assert result.reader_kills >= QUICK_PLAN.reader_kills_before, result


@pytest.mark.slow
def test_ray_kill_campaign(tmp_path: Path) -> None:
    rows = run_campaign(tmp_path, ray_address(), seed=9)
    for row in rows:
        assert row.lost == 0 and row.extra == 0 and row.bad_duplicates == 0, row
        assert row.driver_kills == 3 * row.runs and row.reader_kills > row.driver_kills, row
