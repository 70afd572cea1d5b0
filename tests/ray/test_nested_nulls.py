"""The Ray datasource keeps NULL and empty nested collections apart, and ``columns``' order.

Table and oracle: :mod:`tests.helpers.nested` (``pyarrow.parquet`` reads of the files).
"""

from __future__ import annotations

import pyarrow as pa
import pytest
import ray
from pyiceberg.catalog.sql import SqlCatalog

import icefloe.ray
from tests.conftest import assert_same_rows
from tests.helpers.nested import expected_rows, make_nested_table, null_rows
from tests.helpers.tables import make_table, rows
from tests.ray.conftest import RAY_WARNINGS

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]


def _collect(ds: ray.data.Dataset) -> pa.Table:
    tables = [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]
    return pa.concat_tables(tables)


def test_null_and_empty_collections(catalog: SqlCatalog) -> None:
    table = make_nested_table(catalog)
    expected = expected_rows(table)
    for options in ({}, {"splitSize": "1"}):  # one task reading a run; a task per file
        actual = _collect(icefloe.ray.read("db.nested", catalog=catalog, options=options))
        assert null_rows(actual, "items") == null_rows(expected, "items") != []
        assert_same_rows(actual, expected)


def test_columns_in_the_order_asked(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(20))
    ds = icefloe.ray.read("db.events", catalog=catalog,
                          options={"columns": "ts,id", "metadataColumns": "_pos"})
    actual = _collect(ds)
    assert actual.column_names == ["ts", "id", "_pos"]
    expected = table.scan(selected_fields=("id", "ts")).to_arrow().select(["ts", "id"])
    assert_same_rows(actual.drop_columns(["_pos"]), expected)
    assert _collect(ds.select_columns(["_pos", "id"])).column_names == ["_pos", "id"]
