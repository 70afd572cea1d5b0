"""Iceberg v3 row lineage at planning: each data file's ``first_row_id``. Runs on the enumerator.

PyIceberg 0.12 reads manifest lists and manifests with its v2 read schemas, which drop
the manifest's ``first_row_id`` (field 520) and the data file's (field 142). This module
reads those fields itself, with PyIceberg's v3 read schemas and Avro reader (generic
records), and applies the spec's inheritance ("First Row
ID Inheritance"): a data file whose ``first_row_id`` is null gets its manifest's
``first_row_id`` plus the ``record_count`` of the files before it in the manifest whose
``first_row_id`` was null too; a manifest without one (written before the upgrade to v3)
gives its files none, and their rows a null ``_row_id``.

:class:`RowLineagePlanner` wraps a split planner and stamps each split with its file's
``first_row_id``; it is used only when ``_row_id`` is requested of a v3 table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from pyiceberg.avro.file import AvroFile
from pyiceberg.io import FileIO
from pyiceberg.manifest import MANIFEST_ENTRY_SCHEMAS, MANIFEST_LIST_FILE_SCHEMAS
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.typedef import Record
from pyiceberg.types import StructType

from icefloe.enumerator.planner import SplitPlanner
from icefloe.splits.split import FileSplit

# PyIceberg's own v3 read schemas (its resolver cannot skip a nested list the read schema
# leaves out, so the read schemas are whole); fields are picked by position
_LIST_READ = MANIFEST_LIST_FILE_SCHEMAS[3]
_ENTRY_READ = MANIFEST_ENTRY_SCHEMAS[3]


def _position(struct: Schema | StructType, field_id: int) -> int:
    return next(i for i, f in enumerate(struct.fields) if f.field_id == field_id)


_LIST_PATH, _LIST_CONTENT, _LIST_FIRST = (_position(_LIST_READ, i) for i in (500, 517, 520))
_ENTRY_STATUS, _ENTRY_FILE = _position(_ENTRY_READ, 0), _position(_ENTRY_READ, 2)
_DATA_FILE = _ENTRY_READ.find_field(2).field_type
assert isinstance(_DATA_FILE, StructType)
_FILE_CONTENT, _FILE_PATH, _FILE_RECORDS, _FILE_FIRST = (
    _position(_DATA_FILE, i) for i in (134, 100, 103, 142))
_DELETED = 2


def manifest_first_row_ids(io: FileIO, snapshot: Snapshot) -> list[tuple[str, int | None]]:
    """``(manifest path, first_row_id)`` of the snapshot's data manifests, in list order."""
    out: list[tuple[str, int | None]] = []
    with AvroFile[Record](io.new_input(snapshot.manifest_list), _LIST_READ,
                          read_types={}, read_enums={}) as reader:
        for manifest in reader:
            if not manifest[_LIST_CONTENT]:  # content: 0 (or absent, v1) is data
                out.append((manifest[_LIST_PATH], manifest[_LIST_FIRST]))
    return out


def file_first_row_ids(io: FileIO, manifest_path: str,
                       manifest_first_row_id: int | None) -> dict[str, int | None]:
    """Live data file path -> its (inherited) ``first_row_id``, for one data manifest."""
    out: dict[str, int | None] = {}
    next_id = manifest_first_row_id
    with AvroFile[Record](io.new_input(manifest_path), _ENTRY_READ,
                          read_types={}, read_enums={}) as reader:
        for entry in reader:
            data_file = entry[_ENTRY_FILE]
            if data_file[_FILE_CONTENT]:  # a delete file (never in a data manifest)
                continue
            first = data_file[_FILE_FIRST]
            if first is None and next_id is not None:
                first = next_id
                next_id += data_file[_FILE_RECORDS]
            if entry[_ENTRY_STATUS] != _DELETED:
                out[data_file[_FILE_PATH]] = first
    return out


def first_row_ids(io: FileIO, snapshot: Snapshot) -> dict[str, int | None]:
    """Every live data file of ``snapshot`` -> its ``first_row_id`` (None: no lineage)."""
    out: dict[str, int | None] = {}
    for path, first in manifest_first_row_ids(io, snapshot):
        out.update(file_first_row_ids(io, path, first))
    return out


class RowLineagePlanner:
    """A :class:`SplitPlanner` whose splits carry their file's ``first_row_id``.

    Args:
        planner: the planner whose splits are stamped.
        io: the table's FileIO (the snapshot's manifest list and data manifests are read
            once per planned snapshot).
    """

    def __init__(self, planner: SplitPlanner, io: FileIO) -> None:
        self.planner = planner
        self.io = io

    def _stamp(self, snapshot: Snapshot, splits: Iterator[FileSplit]) -> Iterator[FileSplit]:
        ids: dict[str, int | None] | None = None
        for split in splits:
            if ids is None:
                ids = first_row_ids(self.io, snapshot)
            first = ids.get(split.file_path)
            yield split if first is None else dataclasses.replace(split, first_row_id=first)

    def plan_snapshot(self, snapshot: Snapshot, start_ordinal: int = 0) -> Iterator[FileSplit]:
        return self._stamp(snapshot, self.planner.plan_snapshot(snapshot, start_ordinal))

    def plan_added(self, snapshot: Snapshot) -> Iterator[FileSplit]:
        return self._stamp(snapshot, self.planner.plan_added(snapshot))


def with_row_lineage(planner: SplitPlanner, io: FileIO, metadata_columns: tuple[str, ...],
                     format_version: int) -> SplitPlanner:
    """``planner``, wrapped in a :class:`RowLineagePlanner` when ``_row_id`` is requested of
    a v3 (or later) table; as is otherwise (no manifest is read twice for nothing)."""
    if "_row_id" in metadata_columns and format_version >= 3:
        return RowLineagePlanner(planner, io)
    return planner
