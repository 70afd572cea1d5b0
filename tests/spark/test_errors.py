"""Errors reach the user as icefloe's, with the option named, not as executor stack traces."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark import cloudpickle
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import datasource as ds

from icefloe.errors import InvalidOptionError
from icefloe.spark import IcefloeDataSource
from icefloe.spark.session import catalog_options
from tests.helpers.tables import make_table, rows
from tests.spark.support import read

pytestmark = pytest.mark.spark

BAD_OPTIONS = [
    ({"snapshotIdd": "1"}, "snapshotIdd"),
    ({"snapshotId": "abc"}, "snapshotId"),
    ({"snapshotId": "1", "asOfTimestamp": "2024-01-01T00:00:00"}, "asOfTimestamp"),
    ({"batchSize": "0"}, "batchSize"),
    ({"filter": "id >>> 3"}, "filter"),
    ({"pushFilters": "maybe"}, "pushFilters"),
]


@pytest.mark.parametrize(("options", "name"), BAD_OPTIONS, ids=[n for _, n in BAD_OPTIONS])
def test_bad_option_is_rejected_when_the_source_is_created(
        catalog: SqlCatalog, options: dict[str, str], name: str) -> None:
    """What Spark's driver-side worker runs at ``load()`` (a failing worker is not reused, so
    each Spark-level case costs a worker start: those are kept to a few below)."""
    spark_options = ds.CaseInsensitiveDict({"path": "db.events", **options,
                                            **catalog_options(catalog)})
    with pytest.raises(InvalidOptionError) as caught:
        IcefloeDataSource(spark_options)
    # Spark lower-cases keys: known ones get icefloe's spelling back, unknown ones cannot
    assert caught.value.option == (name if name != "snapshotIdd" else "snapshotidd")


def test_bad_option_fails_load_with_invalid_option_error(
        spark: SparkSession, catalog: SqlCatalog) -> None:
    make_table(catalog)
    with pytest.raises(AnalysisException) as caught:
        read(spark, catalog, snapshotId="12x")
    message = str(caught.value)
    assert "InvalidOptionError" in message and "option 'snapshotId'" in message


def test_stream_only_option_fails_a_batch_read_on_the_driver(
        spark: SparkSession, catalog: SqlCatalog) -> None:
    """``load()`` cannot tell a batch read from a stream: ``reader()`` (planning) refuses it."""
    make_table(catalog)
    with pytest.raises(AnalysisException) as caught:
        read(spark, catalog, maxFilesPerTrigger=10).collect()
    message = str(caught.value)
    assert "InvalidOptionError" in message and "option 'maxFilesPerTrigger'" in message


def test_unknown_column_fails_at_schema_time(spark: SparkSession, catalog: SqlCatalog) -> None:
    make_table(catalog).append(rows(3))
    with pytest.raises(AnalysisException, match=r"(?s)InvalidOptionError.*option 'columns'"):
        read(spark, catalog, columns="id,nope")


def test_load_without_a_table_is_rejected() -> None:
    with pytest.raises(InvalidOptionError, match="no table given") as caught:
        IcefloeDataSource(ds.CaseInsensitiveDict({"snapshotId": "1"}))
    assert caught.value.option == "path"


def test_options_are_checked_on_the_driver_without_spark(catalog: SqlCatalog) -> None:
    options = ds.CaseInsensitiveDict({"path": "db.events", "SNAPSHOTID": "-1",
                                      **catalog_options(catalog)})
    with pytest.raises(InvalidOptionError) as caught:
        IcefloeDataSource(options)
    assert caught.value.option == "snapshotId"  # Spark lower-cased it; icefloe's name is back


_BLOCK_ICEFLOE = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "icefloe" or name.startswith("icefloe."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, Block())
"""


def test_executor_without_icefloe_gets_engine_error(catalog: SqlCatalog, tmp_path: Path) -> None:
    """The pickled reader loads where icefloe is absent, and ``read`` says what to install."""
    make_table(catalog).append(rows(3))
    source = IcefloeDataSource(ds.CaseInsensitiveDict(
        {"path": "db.events", **catalog_options(catalog)}))
    reader = source.reader(source.schema())
    (partition,) = reader.partitions()
    task = tmp_path / "task.pkl"
    task.write_bytes(cloudpickle.dumps((source, reader, partition)))  # as PySpark ships it

    script = _BLOCK_ICEFLOE + textwrap.dedent(f"""
        import pickle
        source, reader, partition = pickle.loads(open({str(task)!r}, "rb").read())
        assert source.name() == "icefloe"
        try:
            list(reader.read(partition))
        except ImportError as exc:
            print(f"{{type(exc).__name__}}: {{exc}}")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert "EngineError" in done.stdout
    assert "pip install 'icefloe[spark]'" in done.stdout and sys.executable in done.stdout


def test_icefloe_imports_without_pyspark() -> None:
    script = textwrap.dedent("""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "pyspark" or name.startswith("pyspark."):
                    raise ModuleNotFoundError(f"No module named {name!r}")
                return None
        sys.meta_path.insert(0, Block())
        import icefloe
        try:
            import icefloe.spark
        except ImportError as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert "pip install 'icefloe[spark]'" in done.stdout
