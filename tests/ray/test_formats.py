"""icefloe.ray.read over ORC and Avro data files (read tasks use the same reader)."""

from __future__ import annotations

import pyarrow as pa
import pytest
import ray
from pyiceberg.catalog.sql import SqlCatalog

import icefloe.ray
from tests.conftest import assert_same_rows
from tests.helpers.formats import append_files, write_avro, write_orc
from tests.helpers.tables import add_equality_deletes, make_table, rows
from tests.ray.conftest import RAY_WARNINGS

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]


def test_orc_and_avro_files_with_equality_deletes(catalog: SqlCatalog) -> None:
    """Oracle: the rows written, minus the equality-deleted ids."""
    table = make_table(catalog)
    parts = [rows(40), rows(40, start=100), rows(40, start=200)]
    append_files(table, [write_orc(table, parts[0]), write_avro(table, parts[1]),
                         write_orc(table, parts[2], field_ids=True)])
    add_equality_deletes(table, pa.table({"id": [3, 105, 239]}), ["id"])
    ds = icefloe.ray.read("db.events", catalog=catalog)
    tables = [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]
    got = pa.concat_tables(tables)
    expected = pa.concat_tables(parts)
    expected = expected.filter(pa.array([i not in (3, 105, 239)
                                         for i in expected["id"].to_pylist()]))
    assert_same_rows(got, expected.cast(got.schema))
