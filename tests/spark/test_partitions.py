"""How many Spark partitions a read gets: every core is used even on a small table."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

import icefloe.spark
from tests.conftest import sorted_rows
from tests.helpers.tables import make_table, rows

pytestmark = pytest.mark.spark


def test_small_table_spreads_over_default_parallelism(spark: SparkSession,
                                                      catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    for i in range(4):
        table.append(rows(50, start=50 * i))  # 4 files, far below splitSize together
    df = icefloe.spark.read(spark, "db.events", catalog=catalog)
    assert df.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism == 2
    got = sorted(r["id"] for r in df.collect())
    assert got == [r["id"] for r in sorted_rows(table.scan().to_arrow().select(["id"]))]


def test_min_partitions_option(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    for i in range(4):
        table.append(rows(50, start=50 * i))
    reader = spark.read.format("icefloe").options(**icefloe.spark.catalog_options(catalog))
    assert reader.option("minPartitions", "4").load("db.events").rdd.getNumPartitions() == 4
    assert reader.option("minPartitions", "1").load("db.events").rdd.getNumPartitions() == 1
    assert reader.option("minPartitions", "4").option("splitSize", str(1 << 30)) \
        .load("db.events").count() == 200
