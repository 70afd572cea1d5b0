"""The Spark adapter on Iceberg v3: row lineage metadata columns (nullable ``_row_id``).

Table and oracle: tests/reader/test_row_lineage.py (the spec's inheritance applied to
PyIceberg's manifest reads and ``pyarrow.parquet`` reads of the files).
"""

from __future__ import annotations

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from tests.helpers.v3 import as_v3
from tests.reader.test_row_lineage import COLUMNS, _oracle, v2  # noqa: F401 - the fixture
from tests.spark.support import read


def test_row_lineage_columns(spark: SparkSession, module_catalog: SqlCatalog,
                             v2: Table) -> None:  # noqa: F811
    lineage = as_v3(module_catalog, v2, "db.spark_lineage", row_lineage=True)
    upgraded = as_v3(module_catalog, v2, "db.spark_upgraded")
    for table, name in ((lineage, "db.spark_lineage"), (upgraded, "db.spark_upgraded")):
        df = read(spark, module_catalog, name, metadataColumns=COLUMNS, columns="v,id")
        assert df.columns == ["v", "id", *COLUMNS.split(",")]
        got = {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"])
               for r in df.collect()}
        assert got == _oracle(table)
    assert any(r is None for r, _ in _oracle(upgraded).values())  # nullable in Spark too
