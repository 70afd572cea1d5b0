"""Stage 2 of the read pipeline: plan a file's columns against the read schema. Runs on a worker.

A data file's Arrow schema (its own column names and types, Iceberg field ids as field
metadata, or a name mapping for files without them) is matched to the read schema by
field id: which of the file's columns to decode, which read-schema fields the file lacks
(filled from identity-partition values, defaults or nulls by the projection), and which
row lineage columns the file stores. All files of one write job share a schema, so
:class:`FilePlanner` plans each schema once (field ids included in the key).

Type promotion (int -> long, float -> double, decimal precision) and renames are the
projection's (:mod:`icefloe.reader.projection`): the plan only says what the file has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyarrow._parquet import ParquetReader
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema, prune_columns
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import ListType, MapType

from icefloe.reader.context import ROW_LINEAGE_FIELD_IDS, ReadContext
from icefloe.splits.split import FileSplit

if TYPE_CHECKING:
    from icefloe.reader.casts import Cast

CACHE_SIZE = 64
"""File schemas whose plans a :class:`FilePlanner` keeps (then it starts over)."""


@dataclass
class FilePlan:
    """How to read and project the files of one Arrow schema (see :class:`FilePlanner`).

    ``direct_schema`` is learned on the first batch, by the projection
    (:meth:`icefloe.reader.projection.Projector.project`): the schema
    ``to_requested_schema`` produced when that equalled the batch's own schema (then later
    batches of the same raw schema, ``direct_source``, only relabel their columns with it),
    else None (always convert). ``fast`` then holds the output schema and per-column casts
    that take such a batch straight to the reader's output when the read needs nothing
    else (no deletes, filter, metadata columns or partition values): see
    :meth:`icefloe.reader.process.BatchProcessor.process`. A plan belongs to one reader
    thread (these fields are written while reading).
    """

    read_schema: Schema
    file_project: Schema
    columns: list[str]
    missing_ids: frozenset[int]
    all_columns: bool
    direct_schema: pa.Schema | None = None
    direct_source: pa.Schema | None = None
    direct_checked: bool = False
    fast: tuple[pa.Schema, list[Cast] | None] | None = None
    lineage: dict[str, str] | None = None
    """Row lineage metadata column -> the file's column storing it (v3 files rewritten
    with their lineage), when requested and present."""


def column_indices(pf: ParquetReader, plan: FilePlan) -> list[int] | None:
    """Leaf column indices of ``plan.columns`` (top-level names), None for every column
    (what ``ParquetFile.iter_batches(columns=...)`` resolves)."""
    if plan.all_columns:
        return None
    wanted = set(plan.columns)
    return [i for i, path in enumerate(pf.column_paths) if path[0] in wanted]


class FilePlanner:
    """Plans the files of one read context. One per reader thread (it caches plans; not
    thread-safe).

    Args:
        context: the read's context (read schema, name mapping, format version,
            partition specs, metadata columns).
    """

    def __init__(self, context: ReadContext) -> None:
        self.context = context
        self._plans: dict[tuple[bytes, frozenset[int]], FilePlan] = {}
        self._last: tuple[pa.Schema, frozenset[int], FilePlan] | None = None
        self._lineage = [n for n in context.metadata_columns if n in ROW_LINEAGE_FIELD_IDS]

    def plan(self, arrow_schema: pa.Schema, eq_ids: frozenset[int]) -> FilePlan:
        """The plan of files with ``arrow_schema`` whose read also needs the fields
        ``eq_ids`` (the equality deletes' key columns), cached."""
        last = self._last
        if last is not None and last[1] == eq_ids and last[0].equals(arrow_schema, True):
            return last[2]  # the previous file's schema (field metadata included): most files
        key = (arrow_schema.serialize().to_pybytes(), eq_ids)
        plan = self._plans.get(key)
        if plan is not None:
            self._last = (arrow_schema, eq_ids, plan)
            return plan
        ctx = self.context
        file_schema = pyarrow_to_schema(
            arrow_schema, ctx.name_mapping,
            downcast_ns_timestamp_to_us=ctx.format_version <= 2,
            format_version=ctx.format_version,  # type: ignore[arg-type]
        )
        read_schema = ctx.read_schema(eq_ids)
        read_ids = {
            fid for fid in read_schema.field_ids
            if not isinstance(read_schema.find_type(fid), MapType | ListType)
        }
        file_project = prune_columns(file_schema, read_ids, select_full_types=False)
        columns = [c.name for c in file_project.columns]
        lineage = self._stored_lineage(arrow_schema)
        columns += [name for name in lineage.values() if name not in columns]
        plan = FilePlan(
            read_schema=read_schema, file_project=file_project, columns=columns,
            missing_ids=frozenset(set(read_schema.field_ids) - set(file_schema.field_ids)),
            all_columns=columns == arrow_schema.names, lineage=lineage or None,
        )
        if len(self._plans) >= CACHE_SIZE:
            self._plans.clear()
        self._plans[key] = plan
        self._last = (arrow_schema, eq_ids, plan)
        return plan

    def _stored_lineage(self, arrow_schema: pa.Schema) -> dict[str, str]:
        """Requested row lineage columns the file stores: metadata name -> file column."""
        out: dict[str, str] = {}
        for name in self._lineage:
            field_id = str(ROW_LINEAGE_FIELD_IDS[name]).encode()
            for field in arrow_schema:
                if field.metadata and field.metadata.get(b"PARQUET:field_id") == field_id:
                    out[name] = field.name
        return out

    def missing_values(self, split: FileSplit, missing: frozenset[int]) -> dict[int, Any]:
        """Identity-partition values of ``split`` for the read-schema fields ``missing``
        from its file (a plan's ``missing_ids``): field id -> value. Once per split."""
        spec = self.context.specs.get(split.spec_id)
        if not missing or spec is None:
            return {}
        values: dict[int, Any] = {}
        for index, field in enumerate(spec.fields):
            if field.source_id in missing and isinstance(field.transform, IdentityTransform) \
                    and index < len(split.partition) and split.partition[index] is not None:
                values[field.source_id] = split.partition[index]
        return values
