"""Conform icefloe's Arrow batches to the Arrow layout Spark expects. Runs on executors.

PySpark checks every batch a Python data source yields against
``to_arrow_schema(spark_schema)`` (plain ``string`` / ``binary`` / ``list``, ``time64[ns]``,
timestamps in UTC) and rejects any other layout. icefloe's reader emits PyIceberg's layout
(``large_string``, ``large_binary``, ``large_list``, ``time64[us]``, ``arrow.uuid``
extension arrays, ``fixed_size_binary``): :class:`BatchConformer` converts column by column.
The conversion plan is made once per (source schema, target schema) pair, not per batch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Converter = Callable[[pa.Array], pa.Array]

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_HEX_PAIRS = np.stack([_HEX[np.arange(256) >> 4], _HEX[np.arange(256) & 15]], axis=1)
# where the 32 hex digits go in the 36-character text form (dashes at 8, 13, 18, 23)
_DIGIT_SLOTS = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])


def uuid_strings(array: pa.Array) -> pa.Array:
    """16-byte uuids (``arrow.uuid`` or ``fixed_size_binary[16]``) -> canonical lowercase text."""
    storage = array.storage if isinstance(array, pa.ExtensionArray) else array
    n = len(storage)
    if n == 0:
        return pa.array([], type=pa.string())
    data = storage.buffers()[1]
    raw = np.frombuffer(data, dtype=np.uint8)[storage.offset * 16:(storage.offset + n) * 16]
    text = np.full((n, 36), ord("-"), dtype=np.uint8)
    text[:, _DIGIT_SLOTS] = _HEX_PAIRS[raw.reshape(n, 16)].reshape(n, 32)
    offsets = np.arange(0, 36 * (n + 1), 36, dtype=np.int32)
    out = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text.tobytes()))
    if storage.null_count:
        out = pc.if_else(storage.is_valid(), out, pa.scalar(None, pa.string()))
    return out


def _has_uuid(data_type: pa.DataType) -> bool:
    if isinstance(data_type, pa.UuidType):
        return True
    return any(_has_uuid(data_type.field(i).type) for i in range(data_type.num_fields))


def _is_nanos(data_type: pa.DataType) -> bool:
    return pa.types.is_timestamp(data_type) and data_type.unit == "ns"


def converter(source: pa.DataType, target: pa.DataType) -> Converter:
    """A function turning arrays of type ``source`` into arrays of type ``target``."""
    if source.equals(target):
        return lambda array: array
    if isinstance(source, pa.UuidType) or (
        pa.types.is_fixed_size_binary(source) and pa.types.is_string(target)
    ):
        return uuid_strings
    if _has_uuid(source):
        return _nested_converter(source, target)
    if isinstance(source, pa.ExtensionType):
        inner = converter(source.storage_type, target)
        return lambda array: inner(array.storage)
    safe = not (_is_nanos(source) and pa.types.is_timestamp(target))  # ns -> us truncates
    return lambda array: array.cast(target, safe=safe)


def _nested_converter(source: pa.DataType, target: pa.DataType) -> Converter:
    """Rebuild a struct / list / map around a uuid child (casts cannot produce uuid text)."""
    if pa.types.is_struct(source):
        children = [converter(source.field(i).type, target.field(i).type)
                    for i in range(source.num_fields)]

        def struct(array: pa.Array) -> pa.Array:
            arrays = [convert(array.field(i)) for i, convert in enumerate(children)]
            mask = array.is_null() if array.null_count else None
            return pa.StructArray.from_arrays(arrays, fields=list(target), mask=mask)

        return struct
    if pa.types.is_map(source):
        keys = converter(source.key_type, target.key_type)
        items = converter(source.item_type, target.item_type)

        def map_(array: pa.Array) -> pa.Array:
            offsets = array.offsets.cast(pa.int32())
            mask = array.is_null() if array.null_count else None
            return pa.MapArray.from_arrays(offsets, keys(array.keys), items(array.items),
                                           type=target, mask=mask)

        return map_
    values = converter(source.value_type, target.value_type)

    def list_(array: pa.Array) -> pa.Array:
        offsets = array.offsets.cast(pa.int32())
        mask = array.is_null() if array.null_count else None
        return pa.ListArray.from_arrays(offsets, values(array.values), type=target, mask=mask)

    return list_


class BatchConformer:
    """Converts batches of one source schema to one target schema (by column name).

    Args:
        source: the schema of the batches icefloe's reader yields.
        target: the Arrow schema Spark expects (``to_arrow_schema`` of the DataFrame schema).

    Raises:
        KeyError: a target column the source does not have.
    """

    def __init__(self, source: pa.Schema, target: pa.Schema) -> None:
        self.target = target
        self._identity = source.equals(target)
        self._plan = [
            (source.get_field_index(field.name), converter(source.field(field.name).type,
                                                           field.type))
            for field in target
        ]

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self._identity:
            return batch
        arrays = [convert(batch.column(index)) for index, convert in self._plan]
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)
