"""SplitReader: projection, metadata columns, deletes, resume, errors (one split at a time)."""

from __future__ import annotations

import dataclasses
import os
import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import IntegerType, ListType, LongType, NestedField, StringType, StructType

from icefloe import DataFileError, FileSplit, IcebergSource
from icefloe.enumerator.bounded import BoundedPlan
from icefloe.reader import SplitReader
from tests.conftest import assert_same_rows, sorted_rows
from tests.helpers.tables import add_equality_deletes, add_position_deletes, make_table, rows


def _plan(catalog: SqlCatalog, **options: object) -> BoundedPlan:
    return IcebergSource("db.events", catalog=catalog, options=options).bounded_plan()


def _file_ids(split: FileSplit) -> list[int]:
    """Ids of the split's data file in file order (read by PyArrow, not icefloe)."""
    path = split.file_path.removeprefix("file://")
    return pq.read_table(path, columns=["id"]).column("id").to_pylist()


def _read(reader: SplitReader, split: FileSplit) -> pa.Table:
    return pa.Table.from_batches(list(reader.read(split)), schema=reader.context.arrow_schema)


def _make_big(catalog: SqlCatalog) -> Table:
    """One data file of 250 rows in row groups of 40, ids shuffled so position != id."""
    table = make_table(catalog)
    table.transaction().set_properties(**{"write.parquet.row-group-limit": "40"}) \
        .commit_transaction()
    data = rows(250)
    order = sorted(range(250), key=lambda i: (i * 37) % 250)
    table.append(data.take(order))
    return table


@pytest.fixture(scope="module")
def shared(module_catalog: SqlCatalog) -> tuple[SqlCatalog, Table]:
    """The big table in a module-wide catalog: for tests that only read it."""
    return module_catalog, _make_big(module_catalog)


@pytest.fixture
def big(catalog: SqlCatalog) -> Table:
    """The big table in the test's own catalog: for tests that change it."""
    return _make_big(catalog)


def test_reads_the_whole_file(shared: tuple[SqlCatalog, Table]) -> None:
    catalog, big = shared
    plan = _plan(catalog, batchSize="32")
    (split,) = list(plan.splits())
    batches = list(SplitReader(plan.context).read(split))
    assert all(0 < b.num_rows <= 32 for b in batches)
    got = pa.Table.from_batches(batches)
    assert got.column("id").to_pylist() == _file_ids(split)  # file order within a split
    assert_same_rows(got, big.scan().to_arrow())


def test_columns_projection(shared: tuple[SqlCatalog, Table]) -> None:
    catalog, big = shared
    plan = _plan(catalog, columns="value,id")
    (split,) = list(plan.splits())
    got = _read(SplitReader(plan.context), split)
    assert got.schema.names == ["value", "id"]  # the order asked, as Spark's select
    theirs = big.scan(selected_fields=("value", "id")).to_arrow()  # PyIceberg: table order
    assert theirs.schema.names == ["id", "value"]
    assert_same_rows(got, theirs.select(["value", "id"]))


def test_metadata_columns(shared: tuple[SqlCatalog, Table]) -> None:
    catalog, big = shared
    plan = _plan(catalog, metadataColumns="_pos,_file,_snapshot_id,_sequence_number",
                 columns="id", batchSize="33")
    (split,) = list(plan.splits())
    got = _read(SplitReader(plan.context), split)
    assert got.schema.names == ["id", "_pos", "_file", "_snapshot_id", "_sequence_number"]
    ids = _file_ids(split)
    assert got.column("_pos").to_pylist() == list(range(len(ids)))
    assert [ids[p] for p in got.column("_pos").to_pylist()] == got.column("id").to_pylist()
    assert set(got.column("_file").to_pylist()) == {split.file_path}
    head = big.current_snapshot()
    assert head is not None
    assert set(got.column("_snapshot_id").to_pylist()) == {head.snapshot_id}
    assert set(got.column("_sequence_number").to_pylist()) == {head.sequence_number}


def test_pos_with_deletes_and_filter(catalog: SqlCatalog, big: Table) -> None:
    (split,) = list(_plan(catalog).splits())
    ids = _file_ids(split)
    deleted = [0, 1, 39, 40, 41, 100, 249]
    add_position_deletes(big, {split.file_path: deleted})
    plan = _plan(catalog, metadataColumns="_pos", filter="id >= 50", batchSize="16")
    (split,) = list(plan.splits())
    assert len(split.delete_files) == 1
    got = _read(SplitReader(plan.context), split)
    expected_pos = [p for p in range(250) if p not in deleted and ids[p] >= 50]
    assert got.column("_pos").to_pylist() == expected_pos
    assert got.column("id").to_pylist() == [ids[p] for p in expected_pos]
    assert_same_rows(got.drop_columns(["_pos"]), big.scan(row_filter="id >= 50").to_arrow())


@pytest.mark.parametrize("k", [0, 1, 31, 32, 39, 40, 41, 100, 249, 250])
def test_resume_after_k_source_rows(shared: tuple[SqlCatalog, Table], k: int) -> None:
    catalog, _ = shared
    plan = _plan(catalog, batchSize="32", metadataColumns="_pos")
    (split,) = list(plan.splits())
    ids = _file_ids(split)
    reader = SplitReader(plan.context)
    pairs = list(reader.read_progress(split.with_position(k)))
    got = [i for batch, _ in pairs for i in batch.column("id").to_pylist()]
    assert got == ids[k:]
    positions = [p for batch, _ in pairs for p in batch.column("_pos").to_pylist()]
    assert positions == list(range(k, 250))
    consumed = [c for _, c in pairs]
    assert consumed == sorted(consumed)
    assert all(c > k for c in consumed)
    if k < 250:
        assert consumed[-1] == 250
    else:
        assert pairs == []


def test_resume_from_every_reported_position(catalog: SqlCatalog, big: Table) -> None:
    """Resuming at each ``consumed`` a reader reported yields exactly the remaining rows."""
    (split,) = list(_plan(catalog).splits())
    add_position_deletes(big, {split.file_path: [5, 80, 81, 200]})
    plan = _plan(catalog, batchSize="30")
    (split,) = list(plan.splits())
    reader = SplitReader(plan.context)
    pairs = list(reader.read_progress(split))
    everything = [i for b, _ in pairs for i in b.column("id").to_pylist()]
    assert len(everything) == 246
    seen = 0
    for batch, consumed in pairs:
        seen += batch.num_rows
        rest = [i for b in reader.read(split.with_position(consumed))
                for i in b.column("id").to_pylist()]
        assert rest == everything[seen:]


def test_resume_in_a_split_of_a_cut_file(shared: tuple[SqlCatalog, Table]) -> None:
    catalog, _ = shared
    plan = _plan(catalog, splitSize="1", batchSize="7")
    splits = list(plan.splits())
    assert len(splits) > 2
    reader = SplitReader(plan.context)
    second = splits[1]
    whole = [i for b in reader.read(second) for i in b.column("id").to_pylist()]
    assert len(whole) == 40
    resumed = [i for b in reader.read(second.with_position(13)) for i in b.column("id").to_pylist()]
    assert resumed == whole[13:]


def test_position_and_equality_deletes(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(20))
    plan = _plan(catalog)
    (split,) = list(plan.splits())
    ids = _file_ids(split)
    add_position_deletes(table, {split.file_path: [0, 5]})
    add_equality_deletes(table, pa.table({"kind": ["b"], "id": [4]}), ["kind", "id"])
    add_equality_deletes(table, rows(20).filter(pa.compute.greater(pa.compute.field("id"), 17)),
                         ["id"])
    plan = _plan(catalog, columns="value")  # equality columns are read although not selected
    (split,) = list(plan.splits())
    assert sorted(d.content for d in split.delete_files) == [1, 2, 2]
    got = _read(SplitReader(plan.context), split)
    assert got.schema.names == ["value"]
    gone = {ids[0], ids[5], 4, 18, 19}
    expected = [i / 2 for i in range(20) if i not in gone]
    assert sorted(got.column("value").to_pylist()) == expected


def test_equality_delete_with_nulls(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    data = rows(6)
    data = data.set_column(1, "kind", pa.array(["a", None, "b", None, "c", "a"]))
    table.append(data)
    add_equality_deletes(table, pa.table({"kind": pa.array([None, "c"], pa.string())}), ["kind"])
    plan = _plan(catalog)
    (split,) = list(plan.splits())
    got = _read(SplitReader(plan.context), split)
    # the spec: a null in an equality delete matches null values
    assert sorted(got.column("id").to_pylist()) == [0, 2, 5]


def test_all_rows_deleted(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table.append(rows(4))
    (split,) = list(_plan(catalog).splits())
    add_position_deletes(table, {split.file_path: [0, 1, 2, 3]})
    plan = _plan(catalog)
    (split,) = list(plan.splits())
    reader = SplitReader(plan.context)
    assert list(reader.read(split)) == []
    pairs = list(reader.read_progress(split))
    assert pairs[-1][1] == 4
    assert sum(b.num_rows for b, _ in pairs) == 0
    assert table.scan().to_arrow().num_rows == 0


def test_context_ships_to_a_worker(shared: tuple[SqlCatalog, Table]) -> None:
    catalog, big = shared
    plan = _plan(catalog, columns="id,kind", filter="kind = 'a'")
    (split,) = list(plan.splits())
    context = pickle.loads(pickle.dumps(plan.context))
    assert context == plan.context
    got = _read(SplitReader(context), pickle.loads(pickle.dumps(split)))
    assert sorted_rows(got) == sorted_rows(
        big.scan(selected_fields=("id", "kind"), row_filter="kind = 'a'").to_arrow())


def test_context_repr_hides_io_properties(shared: tuple[SqlCatalog, Table]) -> None:
    catalog, _ = shared
    plan = _plan(catalog)
    context = dataclasses.replace(plan.context,
                                  io_properties=(("s3.secret-access-key", "very-secret"),))
    assert "very-secret" not in repr(context)


def test_missing_data_file(catalog: SqlCatalog, big: Table) -> None:
    plan = _plan(catalog)
    (split,) = list(plan.splits())
    os.remove(split.file_path.removeprefix("file://"))
    with pytest.raises(DataFileError) as info:
        list(SplitReader(plan.context).read(split))
    assert split.file_path in str(info.value)
    assert str(split.snapshot_id) in str(info.value)


def test_missing_delete_file(catalog: SqlCatalog, big: Table) -> None:
    (split,) = list(_plan(catalog).splits())
    add_position_deletes(big, {split.file_path: [3]})
    plan = _plan(catalog)
    (split,) = list(plan.splits())
    (ref,) = split.delete_files
    os.remove(ref.path.removeprefix("file://"))
    with pytest.raises(DataFileError) as info:
        list(SplitReader(plan.context).read(split))
    assert ref.path in str(info.value)
    assert split.file_path in str(info.value)


def test_corrupt_data_file(catalog: SqlCatalog, big: Table) -> None:
    plan = _plan(catalog)
    (split,) = list(plan.splits())
    with open(split.file_path.removeprefix("file://"), "r+b") as f:
        f.truncate(100)
    with pytest.raises(DataFileError, match="corrupt"):
        list(SplitReader(plan.context).read(split))


def test_split_of_another_format_than_its_file(shared: tuple[SqlCatalog, Table]) -> None:
    """A Parquet file its split calls ORC: a typed error naming the format."""
    catalog, _ = shared
    plan = _plan(catalog)
    (split,) = list(plan.splits())
    with pytest.raises(DataFileError, match="ORC"):
        list(SplitReader(plan.context).read(dataclasses.replace(split, file_format="ORC")))


NESTED = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "s", StructType(NestedField(3, "a", IntegerType(), required=False),
                                   NestedField(4, "b", StringType(), required=False)),
                required=False),
    NestedField(5, "l", ListType(6, LongType(), element_required=False), required=False),
)


@pytest.mark.parametrize(
    ("columns", "row_filter"),
    [(None, "s.a > 3"), ("id", "s.b = 's4'"), ("s.a", "s.b = 's4' OR s.a < 2"), ("s.b,l", None),
     ("l", "s IS NULL")],
)
def test_nested_columns_and_filters(catalog: SqlCatalog, columns: str | None,
                                    row_filter: str | None) -> None:
    table = make_table(catalog, identifier="db.nested", schema=NESTED)
    table.append(pa.table({
        "id": list(range(10)),
        "s": [{"a": i, "b": f"s{i}"} if i % 3 else None for i in range(10)],
        "l": [[i] * (i % 3) for i in range(10)],
    }, schema=schema_to_pyarrow(table.schema())))
    options = {"columns": columns, "filter": row_filter}
    got = IcebergSource("db.nested", catalog=catalog, options=options).to_arrow()
    scan_args: dict[str, object] = {}
    if columns is not None:
        scan_args["selected_fields"] = tuple(columns.split(","))
    if row_filter is not None:
        scan_args["row_filter"] = row_filter
    expected = table.scan(**scan_args).to_arrow()  # type: ignore[arg-type]
    assert expected.num_rows > 0
    assert_same_rows(got, expected)
