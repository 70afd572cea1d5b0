"""spark.read.format("icefloe") over ORC and Avro data files (read tasks use the same reader)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyspark.sql import SparkSession

from tests.helpers.formats import append_files, write_avro, write_orc
from tests.helpers.tables import EVENTS_SCHEMA, add_position_deletes, make_table, rows
from tests.spark.support import assert_same_rows, read

pytestmark = pytest.mark.spark


def test_orc_and_avro_files_with_deletes(spark: SparkSession, catalog: SqlCatalog) -> None:
    """Oracle: the rows written (minus the deleted positions); not PyIceberg, which cannot
    read Avro data files."""
    table = make_table(catalog)
    orc_rows, avro_rows = rows(60), rows(50, start=100)
    orc = write_orc(table, orc_rows)
    avro = write_avro(table, avro_rows, rows_per_block=7)
    append_files(table, [orc, avro])
    table.append(rows(30, start=200))
    add_position_deletes(table, {avro.file_path: [0, 13, 49]})
    df = read(spark, catalog, filter="id >= 2", metadataColumns="_pos")
    assert sorted(r["_pos"] for r in df.filter("id >= 100 and id < 200").collect()) == \
        [p for p in range(50) if p not in (0, 13, 49)]
    kept_avro = avro_rows.filter(pa.array([p not in (0, 13, 49) for p in range(50)]))
    expected = pa.concat_tables([orc_rows, kept_avro, rows(30, start=200)]) \
        .cast(schema_to_pyarrow(EVENTS_SCHEMA, include_field_ids=False))
    expected = expected.filter(pa.compute.greater_equal(expected["id"], 2))
    assert_same_rows(df.drop("_pos"), expected)
