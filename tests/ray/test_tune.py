"""``icefloe.tune`` on a real local Ray: the recommendation for a table whose best
``batchSize`` differs from the baseline by design, read back through ``icefloe.ray.read``
and checked to be at least as fast (medians of interleaved reads)."""

from __future__ import annotations

import pytest
import ray
from pyiceberg.catalog.sql import SqlCatalog

import icefloe.ray
from icefloe import tune
from tests.ray.conftest import RAY_WARNINGS
from tests.tuning.support import (
    GOOD_BATCH,
    WRONG_BATCH,
    assert_at_least_as_fast,
    by_design_table,
    check_recommendation,
)

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]


def _rows(options: dict[str, str], catalog: SqlCatalog) -> int:
    dataset = icefloe.ray.read("db.tune", catalog=catalog, options=options)
    return sum(b.num_rows for b in dataset.iter_batches(batch_size=None,
                                                        batch_format="pyarrow"))


def test_recommendation_is_read_back_at_least_as_fast(catalog: SqlCatalog) -> None:
    table = by_design_table(catalog)
    base = {"batchSize": str(WRONG_BATCH)}
    result = tune("db.tune", catalog=catalog, options=base, engine="ray", budget="20s",
                  sweep={"batchSize": [WRONG_BATCH, GOOD_BATCH]})
    options = check_recommendation(result)
    assert result.baseline["parallelism"] == 2 * int(ray.cluster_resources()["CPU"])
    assert ray.is_initialized()  # the running Ray was used, not shut down
    recommended = {**base, **options}
    assert _rows(recommended, catalog) == len(table.scan().to_arrow())
    assert_at_least_as_fast(lambda: _rows(base, catalog), lambda: _rows(recommended, catalog),
                            reps=3)
