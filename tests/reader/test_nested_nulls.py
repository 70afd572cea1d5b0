"""NULL and empty nested collections read exactly as written, on every local read path.

The table (:mod:`tests.helpers.nested`) holds NULL and empty ``array<struct>``,
``map<k, struct>``, lists of lists and maps of lists, at the top level and inside structs,
in files written before and after fields were added to the nested structs. The oracle is
``pyarrow.parquet`` reading the files; PyIceberg's own scan is not one: it reads a NULL list
or map of structs as an empty one (apache/iceberg-python#3833), asserted here so the day
PyIceberg is fixed this test says so.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from icefloe import IcebergSource
from icefloe.reader import SplitReader
from tests.conftest import assert_same_rows
from tests.helpers.nested import expected_rows, make_nested_table, null_rows


@pytest.fixture(scope="module")
def nested(module_catalog: SqlCatalog) -> Table:
    return make_nested_table(module_catalog)


def _source(catalog: SqlCatalog, **options: str) -> IcebergSource:
    return IcebergSource("db.nested", catalog=catalog, options=options)


def test_pyiceberg_scan_reads_null_lists_of_structs_as_empty(nested: Table) -> None:
    expected = expected_rows(nested)
    theirs = nested.scan().to_arrow()
    assert null_rows(expected, "items")  # the table holds NULL lists of structs...
    assert null_rows(theirs, "items") == []  # ...which PyIceberg reads as []
    assert null_rows(theirs, "attrs") == [] != null_rows(expected, "attrs")


def test_single_split_reads_keep_nulls(module_catalog: SqlCatalog, nested: Table) -> None:
    plan = _source(module_catalog).bounded_plan()
    reader = SplitReader(plan.context)
    batches = [b for split in plan.splits() for b in reader.read(split)]
    actual = pa.Table.from_batches(batches, schema=plan.context.arrow_schema)
    assert_same_rows(actual, expected_rows(nested))


@pytest.fixture(params=[False, True], ids=["groups", "scan"])
def run_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    before = SplitReader.scan_runs
    SplitReader.scan_runs = request.param
    yield
    SplitReader.scan_runs = before


def test_runs_of_small_files_keep_nulls(module_catalog: SqlCatalog, nested: Table,
                                        run_mode: None) -> None:
    plan = _source(module_catalog).bounded_plan()
    splits = list(plan.splits())
    reader = SplitReader(plan.context)
    assert len(splits) == 6 and all(reader.can_batch(s) for s in splits)
    batches = [batch for _, batch, _ in reader.read_run(splits)]
    actual = pa.Table.from_batches(batches, schema=plan.context.arrow_schema)
    assert_same_rows(actual, expected_rows(nested))


def test_to_arrow_and_stream_keep_nulls(module_catalog: SqlCatalog, nested: Table,
                                        tmp_path: object) -> None:
    expected = expected_rows(nested)
    assert_same_rows(_source(module_catalog).to_arrow(), expected)
    got = []
    with _source(module_catalog, pollIntervalMs="10").stream(
            checkpoint=str(tmp_path), parallelism=2) as stream:
        for item in stream:
            got.append(item.batch)
            item.ack()
            if sum(b.num_rows for b in got) >= expected.num_rows:
                break
    assert_same_rows(pa.Table.from_batches(got), expected)


def test_projected_nested_columns_keep_nulls(module_catalog: SqlCatalog, nested: Table) -> None:
    expected = expected_rows(nested).select(["mol", "id", "nested"])
    actual = _source(module_catalog, columns="mol,id,nested").to_arrow()
    assert_same_rows(actual, expected)


def test_columns_in_the_order_asked_on_every_local_path(module_catalog: SqlCatalog,
                                                        nested: Table, tmp_path: object) -> None:
    """``columns`` orders as Spark's select (metadata columns after them); PyIceberg's
    ``selected_fields`` alias keeps PyIceberg's own order, the table's."""
    expected = expected_rows(nested).select(["lol", "id"])
    options = {"columns": "lol,id", "metadataColumns": "_pos,_file"}
    plan = _source(module_catalog, **options).bounded_plan()
    assert plan.context.arrow_schema.names == ["lol", "id", "_pos", "_file"]
    reader = SplitReader(plan.context)
    for batches in ([b for s in plan.splits() for b in reader.read(s)],
                    list(_source(module_catalog, **options).read(parallelism=2))):
        got = pa.Table.from_batches(batches)
        assert got.column_names == ["lol", "id", "_pos", "_file"]
        assert_same_rows(got.select(["lol", "id"]), expected)
    with _source(module_catalog, pollIntervalMs="10", **options).stream(
            checkpoint=str(tmp_path), parallelism=2) as stream:
        item = next(iter(stream))
        assert item.batch.schema.names == ["lol", "id", "_pos", "_file"]
    theirs = nested.scan(selected_fields=("lol", "id")).to_arrow()
    ours = _source(module_catalog, selected_fields="lol,id").to_arrow()
    assert ours.column_names == theirs.column_names == ["id", "lol"]
    # the filter's column read but not returned; nested names keep their struct's place
    got = _source(module_catalog, columns="nested.inner,id", filter="id >= 300").to_arrow()
    assert got.column_names == ["nested", "id"]
    assert sorted(got.column("id").to_pylist()) == sorted(
        i for i in expected.column("id").to_pylist() if i >= 300)


def test_projection_of_a_sliced_batch_keeps_nulls() -> None:
    """A batch that is a slice (an ORC stripe's batch, part of a bigger batch) has list and
    map offsets that start past 0; the projection rebases them and keeps every null."""
    from pyiceberg.io.pyarrow import pyarrow_to_schema
    from pyiceberg.table.name_mapping import MappedField, NameMapping

    from icefloe.reader.projection import to_requested_schema

    point = pa.struct([("x", pa.int32())])
    data = pa.table({
        "l": pa.array([[{"x": 1}], None, [], [{"x": 2}, None], None], pa.list_(point)),
        "m": pa.array([[("a", {"x": 1})], None, [], [("b", None)], None],
                      pa.map_(pa.string(), point)),
    })
    mapping = NameMapping([
        MappedField(field_id=1, names=["l"], fields=[
            MappedField(field_id=3, names=["element"], fields=[
                MappedField(field_id=4, names=["x"])])]),
        MappedField(field_id=2, names=["m"], fields=[
            MappedField(field_id=5, names=["key"]),
            MappedField(field_id=6, names=["value"], fields=[
                MappedField(field_id=7, names=["x"])])]),
    ])
    schema = pyarrow_to_schema(data.schema, name_mapping=mapping)
    batch = data.to_batches()[0].slice(1, 4)  # offsets of both columns start past 0
    out = to_requested_schema(schema, schema, batch, downcast_ns_timestamp_to_us=True,
                              projected_missing_fields={})
    assert out.to_pylist() == batch.to_pylist()
    assert out.column("l").null_count == 2 and out.column("m").null_count == 2
    # a slice past leading NULL / empty collections: its offsets still start at 0, but they
    # are a slice too (a resumed ORC split, or rows after a changelog's first change)
    lead = pa.table({
        "l": pa.array([None, [], [{"x": 3}], None], pa.list_(point)),
        "m": pa.array([[], None, [("c", {"x": 3})], []], pa.map_(pa.string(), point)),
    })
    batch = lead.to_batches()[0].slice(1, 3)
    assert batch.column("l").offsets[0].as_py() == 0 and batch.column("l").offsets.offset
    out = to_requested_schema(schema, schema, batch, downcast_ns_timestamp_to_us=True,
                              projected_missing_fields={})
    assert out.to_pylist() == batch.to_pylist()
    assert out.column("l").null_count == 1 and out.column("m").null_count == 1
