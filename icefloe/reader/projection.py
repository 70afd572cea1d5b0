"""Projection of a file's Arrow batch onto the read schema, by Iceberg field id. Runs on a worker.

PyIceberg's ``_to_requested_schema`` does the work (renamed, added, promoted and
reordered fields, missing columns null- or default-filled), except for one thing it
gets wrong: a list whose elements are structs, and a map whose values are structs, are
rebuilt from their offsets alone and lose their validity bitmap, so a NULL
``array<struct<...>>`` or ``map<k, struct<...>>`` reads as an empty one
(apache/iceberg-python#3833). :func:`to_requested_schema` is the same projection with
the list and map steps done here, keeping every null as written (lists of lists, maps
of lists, structs in lists in structs: each level keeps its own bitmap).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io.pyarrow import ArrowAccessor, ArrowProjectionVisitor
from pyiceberg.schema import Schema, visit_with_partner
from pyiceberg.types import ListType, MapType


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
