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
