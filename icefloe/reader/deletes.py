"""Reading delete files and applying them to batches of a data file.

Runs on a worker. Position deletes (position delete files in Parquet, ORC or Avro, and
Puffin deletion vectors) become a sorted array of deleted row positions per data
file; equality deletes become a set of key values per equality-id group. Delete
file contents are cached per reader (many data files of a partition share them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema

from icefloe.errors import DataFileError
from icefloe.splits.split import CONTENT_EQUALITY_DELETES, DeleteFileRef, FileSplit


class DeleteLoader:
    """Loads and caches delete files for one reader (not shared across threads)."""

    def __init__(self, io: FileIO, max_cached: int = 64) -> None:
        self.io = io
        self.max_cached = max_cached
        self._cache: OrderedDict[str, Any] = OrderedDict()

    def _cached(self, key: str, load: Any) -> Any:
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        value = load()
        self._cache[key] = value
        if len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)
        return value

    def _open_parquet(self, ref: DeleteFileRef, split: FileSplit) -> pa.Table:
        if ref.file_format in ("ORC", "AVRO"):  # Java writes delete files in every format
            from icefloe.reader.files import FileOpener
            from icefloe.reader.formats import read_table

            return read_table(FileOpener(self.io), ref.path, ref.file_format,
                              f"delete file {ref.path} (applies to {split.file_path}, "
                              f"snapshot {split.snapshot_id})")
        try:
            with self.io.new_input(ref.path).open() as f:
                return pq.read_table(f)
        except Exception as exc:
            raise DataFileError(
                f"cannot read delete file {ref.path} (applies to {split.file_path}, snapshot "
                f"{split.snapshot_id}): {type(exc).__name__}: {exc}"
            ) from exc

    def deleted_positions(self, split: FileSplit) -> np.ndarray | None:
        """Sorted unique deleted row positions of the split's data file, or None."""
        arrays: list[np.ndarray] = []
        for ref in split.delete_files:
            if ref.content == CONTENT_EQUALITY_DELETES:
                continue
            if ref.file_format == "PUFFIN":
                vectors = self._cached(ref.path, lambda r=ref, s=split: self._load_puffin(r, s))
                vec = vectors.get(split.file_path)
                if vec is not None:
                    arrays.append(vec)
                continue
            by_file = self._cached(ref.path, lambda r=ref, s=split: self._load_positions(r, s))
            vec = by_file.get(split.file_path)
            if vec is not None:
                arrays.append(vec)
        if not arrays:
            return None
        return np.unique(np.concatenate(arrays))

    def _load_positions(self, ref: DeleteFileRef, split: FileSplit) -> dict[str, np.ndarray]:
        table = self._open_parquet(ref, split)
        paths = table.column("file_path").to_numpy(zero_copy_only=False)
        positions = table.column("pos").to_numpy()
        out: dict[str, np.ndarray] = {}
        for path in np.unique(paths):
            out[str(path)] = positions[paths == path]
        return out

    def _load_puffin(self, ref: DeleteFileRef, split: FileSplit) -> dict[str, np.ndarray]:
        from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
        from pyiceberg.table.puffin import PuffinFile

        try:
            with self.io.new_input(ref.path).open() as f:
                payload = f.read()
            vectors = deletion_vectors_from_puffin_file(PuffinFile(payload))
        except Exception as exc:
            raise DataFileError(
                f"cannot read deletion vector {ref.path} (applies to {split.file_path}): {exc}"
            ) from exc
        return {dv.referenced_data_file: dv.to_vector().to_numpy() for dv in vectors}

    def equality_sets(self, split: FileSplit) -> list[tuple[tuple[int, ...], pa.Table]]:
        """(equality field ids, table of deleted keys with columns named by field id)."""
        groups: dict[tuple[int, ...], list[pa.Table]] = {}
        for ref in split.delete_files:
            if ref.content != CONTENT_EQUALITY_DELETES:
                continue
            keys = self._cached(ref.path, lambda r=ref, s=split: self._load_equality(r, s))
            groups.setdefault(ref.equality_ids, []).append(keys)
        return [(ids, pa.concat_tables(tables)) for ids, tables in groups.items()]

    def _load_equality(self, ref: DeleteFileRef, split: FileSplit) -> pa.Table:
        table = self._open_parquet(ref, split)
        file_schema: Schema = pyarrow_to_schema(table.schema)
        columns = {}
        for field_id in ref.equality_ids:
            name = file_schema.find_column_name(field_id)
            if name is None:
                raise DataFileError(
                    f"equality delete file {ref.path} has no column with field id {field_id}"
                )
            columns[str(field_id)] = table.column(name)
        return pa.table(columns)


def equality_keep_mask(batch_columns: Sequence[pa.Array], deleted: pa.Table) -> pa.Array:
    """True for rows whose key is NOT in ``deleted`` (nulls equal nulls, per the spec)."""
    if len(batch_columns) == 1:
        col = deleted.column(0)
        if not col.type.equals(batch_columns[0].type):
            col = col.cast(batch_columns[0].type)
        return pc.invert(pc.is_in(batch_columns[0], value_set=col, skip_nulls=False))
    deleted_keys = set(zip(*(c.to_pylist() for c in deleted.columns), strict=True))
    rows = zip(*(c.to_pylist() for c in batch_columns), strict=True)
    return pa.array([key not in deleted_keys for key in rows], type=pa.bool_())
