"""Shared fixtures: a real SQLite catalog per test, and the row-multiset oracle comparison."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import ParquetFormatModel, schema_to_pyarrow
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import partition_record_value
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot
from pyiceberg.typedef import Record

from tests.helpers.seaweed import SeaweedFS, running_or_skip
from tests.helpers.tables import _commit, make_catalog
from tests.helpers.xdist_groups import (  # noqa: F401  (the hook: registered from here)
    pytest_collection_modifyitems,
)


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    """A fresh SQLite catalog with a local warehouse under ``tmp_path``."""
    return make_catalog(tmp_path)


@pytest.fixture(scope="module")
def module_catalog(tmp_path_factory: pytest.TempPathFactory) -> SqlCatalog:
    """A catalog shared by one test module, for tables its tests only read."""
    return make_catalog(tmp_path_factory.mktemp("catalog"))


def _orderable(value: Any) -> tuple[Any, ...]:
    """A sort key for one value: nulls first; structs, maps and lists compared element-wise
    (values of one column share a type, so the comparison is total)."""
    if value is None:
        return (0,)
    if isinstance(value, dict):
        return (1, tuple((k, _orderable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (1, tuple(_orderable(v) for v in value))
    return (1, value)


def _sort_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(_orderable(value) for value in row.values())


def sorted_rows(table: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows of ``table`` as a sorted list of dicts (a multiset, comparable with ==)."""
    return sorted(table.to_pylist(), key=_sort_key)


def assert_same_rows(actual: pa.Table, expected: pa.Table) -> None:
    """Assert both tables hold the same columns (by name, in order) and the same multiset of rows.

    ``expected`` comes from an oracle icefloe did not write (PyIceberg's scans, or rows built
    by hand from the delete semantics).
    """
    assert actual.schema.names == expected.schema.names
    assert actual.num_rows == expected.num_rows
    assert sorted_rows(actual) == sorted_rows(expected)


def append_partitioned(table: Table, data: pa.Table) -> Snapshot:
    """Append ``data`` to ``table`` in its default spec, one file per partition; one snapshot.

    PyIceberg's own ``append`` needs the optional ``pyiceberg-core`` package for bucket and
    time transforms; this computes the partition values with PyIceberg's pure-Python
    transforms instead, writes each partition with PyIceberg's Parquet writer (so statistics
    and split offsets are PyIceberg's) and commits an ``append`` through the test helpers.
    """
    spec, schema = table.spec(), table.schema()
    transforms = [
        (schema.find_field(f.source_id).name, f.transform.transform(
            schema.find_field(f.source_id).field_type), f) for f in spec.fields
    ]
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, row in enumerate(data.to_pylist()):
        key = tuple(
            fn(partition_record_value(field, row[name], schema)) for name, fn, field in transforms
        )
        groups.setdefault(key, []).append(index)
    files = []
    for key, indices in groups.items():
        part = Record(*key)
        name = f"{uuid.uuid4()}.parquet"
        if not spec.is_unpartitioned():
            name = f"{spec.partition_to_path(part, schema)}/{name}"
        path = table.location_provider().new_data_location(name)
        output = table.io.new_output(path)
        chunk = data.take(indices).cast(schema_to_pyarrow(schema))
        with ParquetFormatModel().create_writer(output, schema, table.properties) as writer:
            writer.write(chunk)
        data_file = DataFile.from_args(
            content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
            partition=part, file_size_in_bytes=len(output), sort_order_id=None,
            equality_ids=None, key_metadata=None, **writer.result().to_serialized_dict(),
        )
        data_file.spec_id = spec.spec_id  # not a struct field: from_args() drops it
        files.append(data_file)
    return _commit(table, Operation.APPEND, add=files)



@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real Spark Connect server for the test session (:mod:`tests.spark.connect_server`;
    stopped at the end, also when a test fails), shared by the README's Connect blocks and
    the Connect suite: each start costs a JVM and ~35 s here. Skips where PySpark's Connect
    client is not installed."""
    pytest.importorskip("pyspark.sql.connect.session", reason="needs pyspark[connect]")
    from tests.spark.connect_server import ConnectServer

    with ConnectServer(tmp_path_factory.mktemp("connect")) as running:
        yield running


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """A real SeaweedFS (S3 + Iceberg REST catalog) on loopback for the whole test session.

    Skips (with the reason) only where the ``weed`` binary cannot start.
    """
    yield from running_or_skip(tmp_path_factory.mktemp("seaweed"))
