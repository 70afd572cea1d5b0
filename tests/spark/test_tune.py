"""``icefloe.tune`` on a real local Spark: the recommendation for a table whose best
``batchSize`` differs from the baseline by design, read back through the ``icefloe``
format and checked to be at least as fast (medians of interleaved reads)."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

import icefloe.spark
from icefloe import tune
from tests.tuning.support import (
    GOOD_BATCH,
    WRONG_BATCH,
    assert_at_least_as_fast,
    by_design_table,
    check_recommendation,
)

pytestmark = pytest.mark.spark


def test_recommendation_is_read_back_at_least_as_fast(spark: SparkSession,
                                                      catalog: SqlCatalog) -> None:
    table = by_design_table(catalog)
    base = {"batchSize": str(WRONG_BATCH)}
    result = tune("db.tune", catalog=catalog, options=base, engine="spark", budget="20s",
                  sweep={"batchSize": [WRONG_BATCH, GOOD_BATCH]})
    options = check_recommendation(result)
    assert result.engine == "spark"
    assert result.baseline["parallelism"] == spark.sparkContext.defaultParallelism
    assert spark.sparkContext._jsc is not None  # the running session was used, not stopped

    def frame(opts: dict[str, str]):  # type: ignore[no-untyped-def]
        return icefloe.spark.read(spark, "db.tune", catalog=catalog, options=opts)

    assert frame({**base, **options}).count() == len(table.scan().to_arrow())
    assert_at_least_as_fast(
        lambda: frame(base).write.format("noop").mode("overwrite").save(),
        lambda: frame({**base, **options}).write.format("noop").mode("overwrite").save(),
        reps=3)
