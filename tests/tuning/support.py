"""Shared by the tuner's tests on the local engine, Spark and Ray: a table whose best
setting differs from the baseline by design, and the read-back check of a recommendation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icefloe.options import SourceOptions
from icefloe.tuning import TuneResult
from icefloe.tuning.measure import interleaved, median
from tests.helpers.tables import make_table, rows

WRONG_BATCH = 16
"""The baseline's ``batchSize`` in the by-design tests: 16-row batches of 20,000-row files
cost every engine a hand-off per 16 rows (thousands per file), so 65,536 is many times
faster on any machine, however loaded."""

GOOD_BATCH = 65_536
FILES = 4
ROWS_PER_FILE = 20_000


def by_design_table(catalog: Catalog, identifier: str = "db.tune") -> Table:
    """``FILES`` appends of ``ROWS_PER_FILE`` rows (one file each)."""
    table = make_table(catalog, identifier)
    for i in range(FILES):
        table.append(rows(ROWS_PER_FILE, start=i * ROWS_PER_FILE))
    return table


def check_recommendation(result: TuneResult) -> dict[str, str]:
    """The result recommends ``batchSize`` 65536 and nothing else, as valid options."""
    assert result.verdict == "recommend", result.render()
    options = result.options()
    assert options == {"batchSize": str(GOOD_BATCH)}, result.render()
    assert SourceOptions.parse(options).batch_size == GOOD_BATCH
    assert result.ratio > 1.0 + result.noise
    return options


def assert_at_least_as_fast(read_baseline: Callable[[], Any],
                            read_recommended: Callable[[], Any], reps: int = 5,
                            tolerance: float = 1.10) -> tuple[float, float]:
    """Both reads, interleaved ``reps`` times after a warm-up each: the recommended one's
    median is at most ``tolerance`` times the baseline's. Returns both medians."""
    runs = interleaved({"baseline": read_baseline, "recommended": read_recommended}, reps)
    base = median([s for s, _ in runs["baseline"]])
    rec = median([s for s, _ in runs["recommended"]])
    assert rec <= base * tolerance, (rec, base, runs)
    return base, rec
