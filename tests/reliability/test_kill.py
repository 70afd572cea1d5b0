"""Kill tests: SIGKILL real stream processes at every named crash point and at random
points, restart them, and check the sink against PyIceberg's scan (the oracle).

Default run: one quick (~50k rows) run of each scenario. ``-m slow``: the campaign
(1M rows, 50 random kill points, several runs of every scenario), the same code as
``python -m tests.reliability.campaign``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.reliability.campaign import run_campaign
from tests.reliability.scenarios import SCENARIOS, Size


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_kill_scenario(name: str, tmp_path: Path) -> None:
    rng = random.Random(f"{name}:{random.randrange(1 << 30)}")
    verdict = SCENARIOS[name](tmp_path, Size(), rng)
    assert verdict.lost == 0, verdict
    assert verdict.extra == 0, verdict
    assert verdict.bad_duplicates == 0, verdict  # only unacknowledged batches repeat


@pytest.mark.slow
def test_kill_campaign(tmp_path: Path) -> None:
    results = run_campaign(tmp_path, Size(rows=1_000_000, files=100, batch=5_000),
                           random_points=50, runs_per_scenario=3, seed=9)
    for row in results:
        assert row.lost == 0 and row.extra == 0 and row.bad_duplicates == 0, row
