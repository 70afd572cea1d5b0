"""icefloe.ray.read(materialize=True): plain Ray tasks into a MaterializedDataset, checked
against PyIceberg's scans."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
import ray
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from ray.data.dataset import MaterializedDataset

import icefloe.ray
from icefloe.errors import DataFileError, InvalidOptionError
from tests.conftest import assert_same_rows
from tests.helpers.tables import add_position_deletes, live_data_files, make_table
from tests.ray.conftest import RAY_WARNINGS

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]



def _collect(ds: ray.data.Dataset) -> pa.Table:
    tables = [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]
    return pa.concat_tables(tables)



def test_matches_pyiceberg_and_is_materialized(catalog: SqlCatalog, partitioned: Table) -> None:
    ds = icefloe.ray.read("db.events", catalog=catalog, materialize=True,
                          options={"splitSize": "1"})
    assert isinstance(ds, MaterializedDataset)
    # one block per split (9 files, splitSize 1: one split per task), none sliced or merged
    assert ds.num_blocks() == len(live_data_files(partitioned)) == 9
    assert_same_rows(_collect(ds), partitioned.scan().to_arrow())
    assert ds.count() == 150


def test_same_rows_as_the_lazy_read_with_deletes_and_options(catalog: SqlCatalog,
                                                             partitioned: Table) -> None:
    path = sorted(live_data_files(partitioned))[0]
    add_position_deletes(partitioned, {path: [0, 2]})
    options = {"columns": "id,value", "filter": "id >= 20"}
    ds = icefloe.ray.read("db.events", catalog=catalog, options=options, materialize=True,
                          override_num_blocks=3, ray_remote_args={"num_cpus": 0.5})
    expected = partitioned.scan(row_filter="id >= 20", selected_fields=("id", "value"))
    assert_same_rows(_collect(ds), expected.to_arrow())
    lazy = icefloe.ray.read("db.events", catalog=catalog, options=options)
    assert_same_rows(_collect(ds), _collect(lazy))


def test_nothing_to_read_keeps_the_schema(catalog: SqlCatalog, partitioned: Table) -> None:
    ds = icefloe.ray.read("db.events", catalog=catalog, materialize=True,
                          options={"filter": "id > 100000", "columns": "id,kind"})
    assert ds.count() == 0
    assert ds.schema().names == ["id", "kind"]
    make_table(catalog, identifier="db.empty")
    assert icefloe.ray.read("db.empty", catalog=catalog, materialize=True).count() == 0


def test_unsupported_ray_arguments_are_refused(catalog: SqlCatalog, partitioned: Table) -> None:
    with pytest.raises(InvalidOptionError, match="concurrency"):
        icefloe.ray.read("db.events", catalog=catalog, materialize=True, concurrency=2)


def test_a_missing_data_file_raises_the_typed_error(catalog: SqlCatalog,
                                                   partitioned: Table) -> None:
    os.remove(sorted(live_data_files(partitioned))[1].removeprefix("file://"))
    with pytest.raises(DataFileError, match="cannot read data file"):
        icefloe.ray.read("db.events", catalog=catalog, materialize=True,
                         options={"splitSize": "1"})
