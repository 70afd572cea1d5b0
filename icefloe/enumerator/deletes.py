"""Which delete files apply to which data file (Iceberg spec, "Scan Planning").

A position delete file (or deletion vector) applies to a data file when the data
file's data sequence number is <= the delete's, and it is in the same partition of
the same spec (or names the data file). An equality delete file applies when the
data sequence number is strictly < the delete's, and it is in the same partition of
the same spec, or its spec is unpartitioned (a global delete). Runs on the enumerator.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntry

from icefloe.splits.split import DeleteFileRef

INITIAL_SEQUENCE_NUMBER = 0
PATH_FIELD_ID = 2147483546


def _referenced_path(delete_file: DataFile) -> str | None:
    ref = getattr(delete_file, "referenced_data_file", None)
    if ref:
        return str(ref)
    lower, upper = delete_file.lower_bounds or {}, delete_file.upper_bounds or {}
    lo, hi = lower.get(PATH_FIELD_ID), upper.get(PATH_FIELD_ID)
    if lo is not None and lo == hi:
        try:
            return bytes(lo).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def delete_ref(entry: ManifestEntry) -> DeleteFileRef:
    """A picklable reference to the delete file of ``entry``."""
    df = entry.data_file
    return DeleteFileRef(
        path=df.file_path,
        content=int(df.content),
        file_format=str(df.file_format.name if hasattr(df.file_format, "name") else df.file_format),
        sequence_number=entry.sequence_number or INITIAL_SEQUENCE_NUMBER,
        record_count=df.record_count,
        file_size=df.file_size_in_bytes,
        equality_ids=tuple(df.equality_ids or ()),
        referenced_data_file=_referenced_path(df),
        content_offset=getattr(df, "content_offset", None),
        content_size=getattr(df, "content_size_in_bytes", None),
    )


def partition_tuple(partition: Any) -> tuple[Any, ...]:
    """Partition values of a PyIceberg Record as a plain tuple."""
    if partition is None:
        return ()
    return tuple(partition[i] for i in range(len(partition)))


class DeleteIndex:
    """Delete files of a snapshot, indexed for lookup by data file."""

    def __init__(self, unpartitioned_specs: frozenset[int]) -> None:
        self._unpartitioned = unpartitioned_specs
        self._by_path: dict[str, list[DeleteFileRef]] = defaultdict(list)
        self._positional: dict[tuple[int, tuple[Any, ...]], list[DeleteFileRef]] = defaultdict(list)
        self._equality: dict[tuple[int, tuple[Any, ...]], list[DeleteFileRef]] = defaultdict(list)
        self._global_equality: list[DeleteFileRef] = []
        self.count = 0

    def add(self, entry: ManifestEntry) -> None:
        df = entry.data_file
        ref = delete_ref(entry)
        key = (df.spec_id, partition_tuple(df.partition))
        self.count += 1
        if df.content == DataFileContent.POSITION_DELETES:
            if ref.referenced_data_file is not None:
                self._by_path[ref.referenced_data_file].append(ref)
            else:
                self._positional[key].append(ref)
        elif df.content == DataFileContent.EQUALITY_DELETES:
            if df.spec_id in self._unpartitioned:
                self._global_equality.append(ref)
            else:
                self._equality[key].append(ref)

    def for_data_file(
        self, sequence_number: int, path: str, spec_id: int, partition: tuple[Any, ...]
    ) -> tuple[DeleteFileRef, ...]:
        """Delete files that apply to the data file, in a deterministic order."""
        if self.count == 0:
            return ()
        key = (spec_id, partition)
        found = [d for d in self._by_path.get(path, ()) if d.sequence_number >= sequence_number]
        found += [d for d in self._positional.get(key, ()) if d.sequence_number >= sequence_number]
        found += [d for d in self._equality.get(key, ()) if d.sequence_number > sequence_number]
        found += [d for d in self._global_equality if d.sequence_number > sequence_number]
        return tuple(sorted(set(found), key=lambda d: (d.sequence_number, d.path)))
