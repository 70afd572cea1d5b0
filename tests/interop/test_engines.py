"""The Spark adapter (icefloe on PySpark 4.3) and the Ray datasource on the Java-written
tables, against Spark 3.5's Iceberg reads: the head of every table, and every snapshot of
the merge-on-read and v3 tables."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tests.interop.conftest import assert_rows, identifier, oracle, params

pytestmark = pytest.mark.interop

ENGINE_SNAPSHOT_TABLES = {"mor", "v3dv", "upgraded", "compact"}


def engine_cases() -> list[Any]:
    return [p for p in params(("head", "snapshot"))
            if p.values[0] is None or p.values[0]["kind"] == "head"
            or p.values[0]["table"] in ENGINE_SNAPSHOT_TABLES]


@pytest.fixture(scope="module")
def spark() -> Any:
    pytest.importorskip("pyspark")
    import icefloe.spark

    session = icefloe.spark.session(
        "local[2]", "icefloe-interop",
        config={"spark.sql.session.timeZone": "UTC", "spark.python.worker.reuse": "true"})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def ray_local() -> Any:
    import os

    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, object_store_memory=200 * 1024 * 1024, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.mark.spark
@pytest.mark.parametrize("case", engine_cases())
def test_spark_adapter_matches_spark_iceberg(case: dict[str, Any] | None, catalog: Any,
                                             spark: Any) -> None:
    assert case is not None and "error" not in case
    import icefloe.spark

    df = icefloe.spark.read(spark, identifier(case), catalog=catalog, options=case["options"])
    assert_rows(case, df.toArrow(), oracle(case), what="icefloe on Spark")


@pytest.mark.ray
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("case", engine_cases())
def test_ray_datasource_matches_spark_iceberg(case: dict[str, Any] | None, catalog: Any,
                                              ray_local: Any) -> None:
    assert case is not None and "error" not in case
    import icefloe.ray

    ds = icefloe.ray.read(identifier(case), catalog=catalog, options=case["options"])
    blocks = ray_local.get(ds.to_arrow_refs())
    # the columns are Ray's own, also of an empty result (its empty blocks, or its schema)
    schema = blocks[0].schema if blocks else ds.schema().base_schema
    actual = pa.concat_tables([b for b in blocks if b.num_rows] or [schema.empty_table()])
    assert_rows(case, actual, oracle(case), what="icefloe on Ray")
