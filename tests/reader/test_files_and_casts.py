"""Opening data files (pre-buffer only off local disks) and the offset-widening cast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow.fs import LocalFileSystem, SubTreeFileSystem
from pyiceberg.io.pyarrow import PyArrowFileIO

from icefloe.reader.casts import Widen, cast_for, widen_offsets
from icefloe.reader.files import FileOpener


def test_local_files_are_not_pre_buffered(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), path)
    opener = FileOpener(PyArrowFileIO())
    stream, pre_buffer = opener.open_for_parquet(path.as_uri())
    try:
        assert pre_buffer is False
        assert pq.read_table(stream).column("x").to_pylist() == [1, 2, 3]
    finally:
        stream.close()


def test_other_filesystems_are_pre_buffered(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A filesystem that is not the local one (an object store in production; here a
    local subtree wrapped so it is not a LocalFileSystem) keeps pre-buffering on."""
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": [1]}), path)
    io = PyArrowFileIO()
    wrapped = SubTreeFileSystem("/", LocalFileSystem())
    monkeypatch.setattr(io, "fs_by_scheme", lambda scheme, netloc: wrapped)
    stream, pre_buffer = FileOpener(io).open_for_parquet(path.as_uri())
    stream.close()
    assert pre_buffer is True


def test_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        FileOpener(PyArrowFileIO()).open_for_parquet((tmp_path / "nope.parquet").as_uri())


@pytest.mark.parametrize("array", [
    pa.array(["a", None, "ccc", ""]),
    pa.array([f"v{i}" for i in range(10)]).slice(3, 4),
    pa.array(["é", "ü", None]).slice(1),
    pa.array([], pa.string()),
    pa.array([None, None], pa.string()),
    pa.array([b"\x00\x01", None, b""], pa.binary()),
    pa.array([b"xy"] * 5, pa.binary()).slice(2),
], ids=["nulls", "sliced", "utf8-sliced", "empty", "all-null", "binary", "binary-sliced"])
def testwiden_offsets_equals_arrow_cast(array: pa.Array) -> None:
    large = pa.large_string() if array.type == pa.string() else pa.large_binary()
    widened = widen_offsets(array, large)
    widened.validate(full=True)
    assert widened.type == large
    assert widened.equals(array.cast(large))


@pytest.mark.parametrize(("have", "want", "kind"), [
    (pa.string(), pa.large_string(), Widen),
    (pa.binary(), pa.large_binary(), Widen),
    (pa.int32(), pa.int64(), pa.compute.CastOptions),
    (pa.string(), pa.string(), type(None)),
])
def testcast_for_picks_widening_only_for_offset_pairs(have: pa.DataType, want: pa.DataType,
                                                       kind: Any) -> None:
    assert isinstance(cast_for(have, want), kind)


@pytest.mark.parametrize("stored_schema", [False, True])
def test_strings_and_lists_decode_as_large_types_unless_the_file_stores_an_arrow_schema(
        catalog: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        stored_schema: bool) -> None:
    """A file without a stored Arrow schema (as Java Iceberg, Spark and Flink write them)
    decodes its string, binary and list columns straight to the output's
    ``large_string`` / ``large_binary`` / ``large_list`` (``open_file.BINARY_TYPE``,
    ``LIST_TYPE``): no cast after the decode. A file that stores its Arrow schema
    (PyArrow's writers) keeps ``string`` and ``list`` and is cast. Either way the rows are
    PyIceberg's and the schema the source's."""
    from icefloe import IcebergSource
    from icefloe.reader import casts
    from tests.helpers.tables import make_table

    rows = pa.table({"id": pa.array(range(500), pa.int64()),
                     "name": [f"n{i}" if i % 7 else None for i in range(500)],
                     "blob": [bytes([i % 256]) * (i % 5) for i in range(500)],
                     "tags": [[f"t{j}" for j in range(i % 4)] if i % 9 else None
                              for i in range(500)],
                     "attrs": pa.array([[(f"k{j}", j) for j in range(i % 3)] for i in range(500)],
                                       pa.map_(pa.string(), pa.int64()))})
    path = tmp_path / "part.parquet"
    pq.write_table(rows, path, store_schema=stored_schema, row_group_size=200)
    assert (b"ARROW:schema" in (pq.read_metadata(path).metadata or {})) is stored_schema
    table = make_table(catalog, "db.strings", schema=_ids(rows.schema))
    table.add_files([path.as_uri()])

    cast: list[tuple[pa.DataType, pa.DataType]] = []
    real = casts.cast_for

    def spy(have: pa.DataType, want: pa.DataType) -> casts.Cast:
        if not have.equals(want):
            cast.append((have, want))
        return real(have, want)

    monkeypatch.setattr(casts, "cast_for", spy)
    source = IcebergSource("db.strings", catalog=catalog)
    got = source.to_arrow()
    assert got.schema == source.schema()
    assert [got.schema.field(n).type for n in ("name", "blob")] == \
        [pa.large_string(), pa.large_binary()]
    assert pa.types.is_large_list(got.schema.field("tags").type)
    assert got.schema.field("attrs").type.key_type == pa.large_string()
    expected = catalog.load_table("db.strings").scan().to_arrow()
    assert got.sort_by("id").equals(expected.cast(got.schema).sort_by("id"))
    if stored_schema:
        assert {have for have, _ in cast} >= {pa.string(), pa.binary()}
        assert any(pa.types.is_list(have) for have, _ in cast)
    else:
        assert cast == []


def _ids(schema: pa.Schema) -> Any:
    """An Iceberg schema for ``schema``'s fields (add_files maps by name)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        IcebergType,
        ListType,
        LongType,
        MapType,
        NestedField,
        StringType,
    )

    def iceberg(i: int, t: pa.DataType) -> IcebergType:
        if pa.types.is_map(t):
            return MapType(100 + i, StringType(), 200 + i, LongType(), value_required=False)
        if pa.types.is_list(t):
            return ListType(100 + i, StringType(), element_required=False)
        return {pa.int64(): LongType(), pa.string(): StringType(),
                pa.binary(): BinaryType()}[t]

    return Schema(*(NestedField(i + 1, f.name, iceberg(i, f.type), required=False)
                    for i, f in enumerate(schema)))
