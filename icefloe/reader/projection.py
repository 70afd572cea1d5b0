"""Stage 5 of the read pipeline: a file's batch projected onto the read schema, by field id.

Runs on a worker. :class:`Projector` takes a raw batch (the file's columns a
:class:`~icefloe.reader.plan.FilePlan` names) to the read schema: renamed, added,
promoted and reordered fields, missing columns filled from identity-partition values,
initial defaults or nulls. Where the projection turns out to be a relabel (the file's
columns are the read schema's, in order), it learns that on a plan's first batch, and
later batches of that schema are only relabelled (and, when nothing else applies, cast to
the output in the same step: :meth:`Projector.fast`). The cast to the output schema is
:mod:`icefloe.reader.casts`.

PyIceberg's ``_to_requested_schema`` does the work, except for one thing it gets wrong: a
list whose elements are structs, and a map whose values are structs, are rebuilt from
their offsets alone and lose their validity bitmap, so a NULL ``array<struct<...>>`` or
``map<k, struct<...>>`` reads as an empty one (apache/iceberg-python#3833).
:func:`to_requested_schema` is the same projection with the list and map steps done
here, keeping every null as written (lists of lists, maps of lists, structs in lists in
structs: each level keeps its own bitmap).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io.pyarrow import ArrowAccessor, ArrowProjectionVisitor
from pyiceberg.schema import Schema, visit_with_partner
from pyiceberg.types import ListType, MapType

from icefloe.reader.casts import Cast, OutputCaster, cast_for
from icefloe.reader.context import ReadContext
from icefloe.reader.plan import FilePlan


def _mask(array: pa.Array) -> pa.Array | None:
    """The null mask of ``array`` (True where null), None when it has no nulls."""
    return array.is_null() if array.null_count else None


def _zero_based(offsets: pa.Array, *children: pa.Array) -> tuple[pa.Array, list[pa.Array]]:
    """``offsets`` rebased to start at 0 and ``children`` (the unsliced child arrays the
    offsets point into) cut to the range they cover.

    A sliced list or map array (an ORC stripe's batch, a slice of a bigger batch) has
    offsets that start past 0, or offsets that are a slice themselves (a slice past leading
    NULL or empty collections starts at 0 all the same); Arrow builds such an array back
    with a null mask only from zero-based, unsliced offsets ("Null bitmap with offsets
    slice not supported").
    """
    if len(offsets) == 0:
        return offsets, list(children)
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    if start == 0 and offsets.offset == 0 and all(len(c) == end for c in children):
        return offsets, list(children)
    rebased = pc.subtract(offsets, pa.scalar(start, offsets.type))
    return rebased, [c.slice(start, end - start) for c in children]


class _NullKeepingProjection(ArrowProjectionVisitor):
    """PyIceberg's projection visitor with list and map steps that keep the validity bitmap."""

    def list(self, list_type: ListType, list_array: pa.Array | None,
             value_array: pa.Array | None) -> pa.Array | None:
        if not isinstance(list_array, pa.ListArray | pa.LargeListArray | pa.FixedSizeListArray) \
                or value_array is None:
            return None
        value_array = self._cast_if_needed(list_type.element_field, value_array)
        element = self._construct_field(list_type.element_field, value_array.type)
        if isinstance(list_array, pa.FixedSizeListArray):
            list_array = list_array.cast(pa.list_(list_array.type.value_field))
        offsets, (value_array,) = _zero_based(list_array.offsets, value_array)
        if isinstance(list_array, pa.LargeListArray):
            return pa.LargeListArray.from_arrays(offsets, value_array, pa.large_list(element),
                                                 mask=_mask(list_array))
        return pa.ListArray.from_arrays(offsets, value_array, pa.list_(element),
                                        mask=_mask(list_array))

    def map(self, map_type: MapType, map_array: pa.Array | None, key_result: pa.Array | None,
            value_result: pa.Array | None) -> pa.Array | None:
        if not isinstance(map_array, pa.MapArray) or key_result is None or value_result is None:
            return None
        key_result = self._cast_if_needed(map_type.key_field, key_result)
        value_result = self._cast_if_needed(map_type.value_field, value_result)
        map_type_arrow = pa.map_(
            self._construct_field(map_type.key_field, key_result.type),
            self._construct_field(map_type.value_field, value_result.type),
        )
        offsets, (key_result, value_result) = _zero_based(map_array.offsets, key_result,
                                                          value_result)
        return pa.MapArray.from_arrays(offsets, key_result, value_result,
                                       type=map_type_arrow, mask=_mask(map_array))


def to_requested_schema(requested_schema: Schema, file_schema: Schema, batch: pa.RecordBatch,
                        *, downcast_ns_timestamp_to_us: bool,
                        projected_missing_fields: dict[int, Any]) -> pa.RecordBatch:
    """``batch`` (a file's batch, of ``file_schema``) projected onto ``requested_schema``.

    What PyIceberg's ``_to_requested_schema`` returns (timestamptz read as timestamp where
    the read schema says so, as Spark does), with NULL and empty nested collections kept
    apart at every level.

    Raises:
        pyiceberg.exceptions.ResolveError: a required field the file lacks and that has no
            initial default.
        ValueError: a type the file's column cannot be projected to.
    """
    visitor = _NullKeepingProjection(
        file_schema, downcast_ns_timestamp_to_us,
        projected_missing_fields=projected_missing_fields,
        allow_timestamp_tz_mismatch=True,
    )
    struct_array = visit_with_partner(requested_schema, batch, visitor, ArrowAccessor(file_schema))
    return pa.RecordBatch.from_struct_array(struct_array)


class Projector:
    """Projects the raw batches of a read context's files. One per reader thread (it
    writes what it learns into the plans it is given).

    Args:
        context: the read's context.
        caster: the reader's cast to the output schema (for :meth:`fast`).
        filtered: whether the read has a residual row filter (no fast path then).
    """

    def __init__(self, context: ReadContext, caster: OutputCaster, filtered: bool) -> None:
        self.context = context
        self.caster = caster
        self.filtered = filtered
        self.out_names = [f.name for f in context.projected_schema.fields]
        """The output's data columns, in order (the read schema may hold more: equality
        delete keys, filter columns)."""

    def project(self, raw: pa.RecordBatch, plan: FilePlan,
                missing: dict[int, Any]) -> pa.RecordBatch:
        """``raw`` in the read schema (``missing``: values of fields the file lacks, by
        field id); a relabel only when the projection is the identity. The first batch
        of a plan without missing fields teaches the plan whether it is one."""
        if plan.direct_schema is not None and not missing \
                and raw.schema.equals(plan.direct_source):
            return pa.RecordBatch.from_arrays(raw.columns, schema=plan.direct_schema)
        batch = to_requested_schema(
            plan.read_schema, plan.file_project, raw,
            downcast_ns_timestamp_to_us=self.context.format_version <= 2,
            projected_missing_fields=missing,
        )
        if not plan.direct_checked and not plan.missing_ids:
            plan.direct_checked = True
            if batch.schema.equals(raw.schema, check_metadata=False):
                plan.direct_schema, plan.direct_source = batch.schema, raw.schema
                plan.fast = self._fast_output(batch.schema)
        return batch

    def fast(self, raw: pa.RecordBatch, plan: FilePlan) -> pa.RecordBatch:
        """``raw`` (of schema ``plan.direct_source``) relabelled and cast in one step to the
        output: what the whole processing ends with when ``plan.fast`` applies (no
        deletes, filter, metadata columns or missing columns).

        Raises:
            ValueError: nulls in a column the output forbids them.
        """
        assert plan.fast is not None
        out_schema, casts = plan.fast
        arrays = raw.columns
        if casts is not None:
            arrays = self.caster.cast_columns(arrays, casts)
        return pa.RecordBatch.from_arrays(arrays, schema=out_schema)

    def _fast_output(self, direct: pa.Schema) -> tuple[pa.Schema, list[Cast] | None] | None:
        """For a plan whose projection is a relabel to ``direct``: the output schema and
        casts of its batches when nothing but the relabel and the final cast applies (no
        filter, no metadata columns, the output's columns in file order); else None."""
        ctx = self.context
        if self.filtered or ctx.metadata_columns or direct.names != self.out_names:
            return None
        target = ctx.arrow_schema
        if direct.equals(target):
            return direct, None  # what the general path returns (its own metadata kept)
        return target, [cast_for(have.type, want.type)
                        for have, want in zip(direct, target, strict=True)]
