"""One local SparkSession (``local[2]``, 1 GiB driver, no UI) for the whole Spark suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402

import icefloe.spark  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The suite's SparkSession, its Python workers on this interpreter, icefloe registered."""
    session = icefloe.spark.session(
        "local[2]", "icefloe-tests",
        config={"spark.sql.session.timeZone": "UTC", "spark.python.worker.reuse": "true"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()

