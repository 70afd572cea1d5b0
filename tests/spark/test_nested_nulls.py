"""The Spark adapter keeps NULL and empty nested collections apart, and ``columns``' order.

Table and oracle: :mod:`tests.helpers.nested` (``pyarrow.parquet`` reads of the files;
PyIceberg's scan reads NULL lists of structs as empty, see tests/reader/test_nested_nulls.py).
"""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from tests.helpers.nested import expected_rows, make_nested_table, null_rows
from tests.helpers.tables import make_table, rows
from tests.spark.support import assert_same_rows, normalized, read


@pytest.fixture(scope="module")
def nested(module_catalog: SqlCatalog) -> Table:
    return make_nested_table(module_catalog)


def test_batch_read_keeps_null_and_empty_collections(spark: SparkSession,
                                                     module_catalog: SqlCatalog,
                                                     nested: Table) -> None:
    expected = expected_rows(nested)
    actual = read(spark, module_catalog, "db.nested").toArrow()
    assert null_rows(actual, "items") == null_rows(expected, "items") != []
    assert null_rows(actual, "attrs") == null_rows(expected, "attrs") != []
    assert_same_rows(read(spark, module_catalog, "db.nested"), expected)


def test_small_files_packed_in_one_task_keep_nulls(spark: SparkSession,
                                                   module_catalog: SqlCatalog,
                                                   nested: Table) -> None:
    df = read(spark, module_catalog, "db.nested", columns="nested,id,items", minPartitions="1")
    assert df.rdd.getNumPartitions() == 1  # six small files: one task, read as a run
    assert_same_rows(df, expected_rows(nested).select(["nested", "id", "items"]))


def test_columns_in_the_order_asked(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(20))
    df = read(spark, catalog, columns="ts,id,kind", metadataColumns="_pos")
    assert df.columns == ["ts", "id", "kind", "_pos"]
    expected = table.scan(selected_fields=("ts", "id", "kind")).to_arrow()
    assert sorted(map(tuple, df.drop("_pos").toArrow().to_pylist()), key=str) == \
        sorted(map(tuple, normalized(expected.select(["ts", "id", "kind"])).to_pylist()), key=str)
