"""A changelog stream SIGKILLed mid-read and restarted from its checkpoint, again and again
(real processes, ``tests.reliability.child``): every change of the oracle (PyIceberg's
reads of each snapshot and its parent) is delivered, none that is not, and none that was
acknowledged is delivered again."""

from __future__ import annotations

import random
from pathlib import Path

from pyiceberg.table import Table

from tests.helpers.changelog import rows_at
from tests.helpers.tables import (
    add_position_deletes,
    live_data_files,
    make_catalog,
    make_table,
    rows,
)
from tests.reliability.harness import Runner, judge


def _expected(table: Table) -> list[str]:
    """``id:type:commit`` of every change of every snapshot (ids are unique per side)."""
    out: list[str] = []
    for snapshot in table.snapshots():
        before = rows_at(table, snapshot.parent_snapshot_id)
        after = rows_at(table, snapshot.snapshot_id)
        out += [f"{key[0]}:DELETE:{snapshot.snapshot_id}" for key in (before - after).elements()]
        out += [f"{key[0]}:INSERT:{snapshot.snapshot_id}" for key in (after - before).elements()]
    return out


def test_killed_changelog_stream_loses_and_repeats_nothing_acknowledged(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    table = make_table(catalog)
    for i in range(12):
        table.append(rows(1000, start=i * 1000))
    table.delete("id < 2500")                    # copy-on-write: whole files and a rewrite
    table = catalog.load_table("db.events")
    files = sorted(live_data_files(table))
    add_position_deletes(table, {files[0]: list(range(0, 1000, 3))})   # merge-on-read
    table = catalog.load_table("db.events")
    table.append(rows(3000, start=50_000))
    table = catalog.load_table("db.events")
    expected = _expected(table)
    assert len(expected) > 15_000

    rng = random.Random()
    runner = Runner(tmp_path, batch_size=200)
    options = ("changelog=true", "startingVersion=earliest")
    killed = 0
    for _ in range(3):
        proc = runner.start(parallelism=2, available_now=True, options=options)
        killed += runner.kill_after(proc, rng.randint(5, 40))
    assert runner.run(options=options) == 0
    assert killed >= 2, "the runs ended before they could be killed"
    verdict = judge(runner.out, expected, runner.runs)
    assert verdict.lost == 0, verdict
    assert verdict.extra == 0, verdict
    assert verdict.bad_duplicates == 0, verdict
