"""Stage 4 of the read pipeline: apply deletes. Runs on a worker.

Position deletes (position delete files in Parquet, ORC or Avro, and Puffin deletion
vectors) become a sorted array of deleted row positions per data file; equality deletes
become a set of key values per equality-id group (:meth:`DeleteLoader.for_split`, once
per split; delete file contents are cached per reader: many data files of a partition
share them). :func:`keep_mask` applies them to one batch of the file (in the read
schema, which then holds the equality keys' columns).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema

from icefloe.errors import DataFileError
from icefloe.reader.files import FileOpener
from icefloe.reader.open_file import read_table
from icefloe.splits.split import CONTENT_EQUALITY_DELETES, DeleteFileRef, FileSplit


@dataclass(frozen=True, slots=True)
class SplitDeletes:
    """The deletes of one split's data file: sorted deleted positions (None: none) and
    ``(equality field ids, deleted keys with columns named by field id)`` groups."""

    positions: np.ndarray | None
    equality: tuple[tuple[tuple[int, ...], pa.Table], ...]

    @property
    def equality_ids(self) -> frozenset[int]:
        """Every field id an equality delete keys on (the read schema must hold them)."""
        return frozenset(i for ids, _ in self.equality for i in ids)

    @property
    def empty(self) -> bool:
        """Whether no delete touches the file (the batch processor's fast path applies)."""
        return self.positions is None and not self.equality


NO_DELETES = SplitDeletes(None, ())
"""The deletes of a split without delete files."""


def keep_mask(batch: pa.RecordBatch, read_schema: Schema, deletes: SplitDeletes,
              first_pos: int) -> np.ndarray | None:
    """Which rows of ``batch`` (rows of the data file from position ``first_pos`` on, in
    ``read_schema``) no delete removes; None when all are kept."""
    n = batch.num_rows
    keep: np.ndarray | None = None
    deleted = deletes.positions
    if deleted is not None:
        lo, hi = np.searchsorted(deleted, [first_pos, first_pos + n])
        if hi > lo:
            keep = np.ones(n, dtype=bool)
            keep[deleted[lo:hi] - first_pos] = False
    for ids, keys in deletes.equality:
        cols = [batch.column(read_schema.find_column_name(i)) for i in ids]
        mask = equality_keep_mask(cols, keys).to_numpy(zero_copy_only=False)
        keep = mask if keep is None else keep & mask
    return keep


class DeleteLoader:
    """Loads and caches delete files for one reader (not shared across threads).

    Args:
        io: the table's FileIO.
        max_cached: delete files kept (least recently used dropped first).
    """

    def __init__(self, io: FileIO, max_cached: int = 64) -> None:
        self.io = io
        self.max_cached = max_cached
        self._cache: OrderedDict[str, Any] = OrderedDict()

    def for_split(self, split: FileSplit) -> SplitDeletes:
        """The deletes of ``split``'s data file (equality sets loaded first).

        Raises:
            DataFileError: a delete file is missing, unreadable or malformed.
        """
        if not split.delete_files:
            return NO_DELETES
        equality = tuple(self.equality_sets(split))
        return SplitDeletes(self.deleted_positions(split), equality)

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
