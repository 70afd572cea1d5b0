"""Spark batch and Structured Streaming reads of tables in S3, behind the REST catalog and a
SQL catalog, configured by ``catalog.<prop>`` options as a Spark user does; checked against
PyIceberg's scans."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import DataFrameReader, SparkSession

from tests.conftest import sorted_rows
from tests.objectstore.conftest import History, S3Catalog, oracle
from tests.spark.conftest import spark  # noqa: F401 - the suite's session
from tests.spark.support import assert_same_rows

pytestmark = pytest.mark.spark


def _with_options(reader: DataFrameReader, options: dict[str, object]) -> DataFrameReader:
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader


def test_batch_head_and_time_travel(spark: SparkSession, s3_catalog: S3Catalog,  # noqa: F811
                                    history: History) -> None:
    head = _with_options(spark.read.format("icefloe"), s3_catalog.options())
    assert_same_rows(head.load(history.identifier), oracle(history))
    at_s3 = _with_options(spark.read.format("icefloe"),
                          s3_catalog.options(snapshotId=history.s["s3"]))
    assert_same_rows(at_s3.load(history.identifier), oracle(history, history.s["s3"]))


def test_structured_streaming_available_now(spark: SparkSession,  # noqa: F811
                                            s3_catalog: S3Catalog, history: History,
                                            tmp_path: Path) -> None:
    reader = _with_options(spark.readStream.format("icefloe"),
                           s3_catalog.options(maxFilesPerTrigger=4))
    query = (reader.load(history.identifier).writeStream.format("parquet")
             .option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    got = pq.read_table(tmp_path / "out", schema=None)
    expected = oracle(history)
    assert sorted(got.column("id").to_pylist()) == sorted(expected.column("id").to_pylist())
    assert len(sorted_rows(got.select(["id"]))) == expected.num_rows
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) > 1  # maxFilesPerTrigger split the scan into micro-batches
