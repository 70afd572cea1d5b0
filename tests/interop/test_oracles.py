"""The two oracles against each other (Spark 3.5's Iceberg reader and DuckDB's
``iceberg_scan``): every head, snapshot and timestamp case.

Where DuckDB 1.5.5 cannot read a case the writer recorded its error; those cases skip
with that error as the reason (``pytest -rs`` lists them)."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.interop.conftest import HOME, assert_rows, oracle, params

pytestmark = pytest.mark.interop

KINDS = ("head", "snapshot", "timestamp")


def duckdb_rows(case: dict[str, Any]) -> Any:
    if "duckdb_error" in case:
        pytest.skip(f"DuckDB cannot read {case['id']}: {case['duckdb_error']}")
    if "duckdb" not in case:
        pytest.skip(f"{case['id']}: Spark refused it, so DuckDB was not asked")
    return pq.read_table(HOME / case["duckdb"])


def spark_only(case: dict[str, Any]) -> bool:
    return "error" not in case


@pytest.mark.parametrize("case", [p for p in params(KINDS)
                                  if p.values[0] is None or spark_only(p.values[0])])
def test_duckdb_agrees_with_spark(case: dict[str, Any] | None, catalog: Any) -> None:
    assert case is not None
    expected = oracle(case)
    actual = duckdb_rows(case)
    assert_rows(case, actual, expected, what="DuckDB")
