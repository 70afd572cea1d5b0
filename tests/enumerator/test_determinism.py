"""Planning is deterministic across processes: two Python processes with different hash
seeds plan the same splits, byte for byte, for a bounded read and for continuous
enumeration (Spark re-plans ``(start, end]`` on a restarted driver and checkpoints
name split ids: a set or dict order leaking into planning would break both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog

from tests.helpers.tables import EVENTS_SPEC_BY_DAY, make_table, rows

PLAN = r"""
import hashlib, json, sys
from pyiceberg.catalog.sql import SqlCatalog
from icefloe import IcebergSource, serialize_split
from icefloe.enumerator import ContinuousEnumerator, Limits
from icefloe.state import Position

catalog = SqlCatalog("test", uri=sys.argv[1], warehouse=sys.argv[2])
src = IcebergSource("db.events", catalog=catalog, options={"splitSize": "4096"})
bounded = [serialize_split(s).hex() for s in src.plan()]
opts = src.options.for_mode("continuous")
enumerator = ContinuousEnumerator(src.handle, opts)
position = Position.beginning()
continuous = []
for _ in range(50):
    result = enumerator.enumerate(position, Limits(max_files=2))
    continuous.append([position.describe(), result.to_position.describe(),
                       [serialize_split(s).hex() for s in result.splits]])
    if result.to_position == position:
        break
    position = result.to_position
print(json.dumps({"bounded": bounded, "continuous": continuous}))
"""


def _plan(catalog: SqlCatalog, seed: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", PLAN, catalog.properties["uri"], catalog.properties["warehouse"]],
        env=env, capture_output=True, text=True, timeout=240, check=True,
        cwd=str(Path(__file__).resolve().parents[2]))
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_two_processes_with_different_hash_seeds_plan_the_same_splits(
        catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY)
    for i in range(4):
        table.append(rows(300, start=1000 * i))
    first = _plan(catalog, "1")
    second = _plan(catalog, "4242")
    assert first["bounded"], "nothing planned"
    assert len(first["continuous"]) > 2  # type: ignore[arg-type]
    assert first == second
