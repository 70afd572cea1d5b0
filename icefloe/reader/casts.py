"""Stage 5 of the read pipeline, second half: cast a batch to the output schema. Runs on a worker.

A projected batch (:mod:`icefloe.reader.projection`) has the read schema's columns in the
file's Arrow types (``string`` where the output is ``large_string``, a file's own
nullability, ...). :class:`OutputCaster` casts it to the context's Arrow schema as
``RecordBatch.cast`` would, with the per-column casts of each batch schema worked out
once, and the most common cast of all (a string or binary column to its 64-bit-offset
type) done without a compute-kernel call (:func:`widen_offsets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CACHE_SIZE = 64
"""Batch schemas whose casts an :class:`OutputCaster` keeps (then it starts over)."""

_WIDEN = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}


@dataclass(frozen=True, slots=True)
class Widen:
    """A cast that only widens 32-bit offsets to 64-bit (string -> large_string, binary
    -> large_binary), done by :func:`widen_offsets` without a compute-kernel call."""

    to_type: pa.DataType


Cast: TypeAlias = "pc.CastOptions | Widen | None"
"""How one column becomes its output type: None (as is), :class:`Widen`, or an Arrow cast."""


def cast_for(have: pa.DataType, want: pa.DataType) -> Cast:
    """How a column of type ``have`` becomes ``want``: None (as is), an offset widening
    (:class:`Widen`), or a safe Arrow cast."""
    if have.equals(want):
        return None
    if _WIDEN.get(have) == want:
        return Widen(want)
    return pc.CastOptions.safe(want)


def widen_offsets(column: pa.Array, large: pa.DataType) -> pa.Array:
    """``column`` (string or binary) as ``large`` (large_string / large_binary): its
    offsets widened to int64 by numpy into a buffer of Arrow's memory pool, validity and
    data buffers shared (no copy).

    What ``pc.cast`` does for this pair, for a fraction of the per-call cost (which,
    with thousands of one-batch files, is paid once per column per file). The new
    offsets come from Arrow's pool, not numpy's ``malloc``: glibc serves a 64k-row
    batch's 512 KiB from fresh ``mmap``/trimmed pages, and faulting them in cost ~8x
    the copy (measured; it also made the cost depend on what the process did before)."""
    validity, offsets, data = column.buffers()
    if offsets is None:  # an empty array may have no buffers
        return pc.call_function("cast", [column], pc.CastOptions.safe(large))
    n, start = len(column), column.offset
    if validity is None or start == 0:
        # only the slice's own offsets (a slice of a decoded batch, see batches.sliced):
        # the array starts at 0, its offsets still point into the shared data buffer
        wide = pa.allocate_buffer((n + 1) * 8)
        np.copyto(np.frombuffer(wide, dtype=np.int64),
                  np.frombuffer(offsets, dtype=np.int32, count=n + 1, offset=start * 4))
        return pa.Array.from_buffers(large, n, [validity, wide, data], column.null_count, 0)
    count = start + n + 1  # the validity bitmap is shared: keep the array's offset
    wide = pa.allocate_buffer(count * 8)
    np.copyto(np.frombuffer(wide, dtype=np.int64),
              np.frombuffer(offsets, dtype=np.int32, count=count))
    return pa.Array.from_buffers(large, n, [validity, wide, data], column.null_count, start)


class OutputCaster:
    """Casts batches to one output schema. One per reader thread (it caches casts per
    batch schema; not thread-safe).

    Args:
        target: the output's Arrow schema (the read context's ``arrow_schema``).
    """

    def __init__(self, target: pa.Schema) -> None:
        self.target = target
        self._by_schema: list[tuple[pa.Schema, list[Cast]]] = []
        # (index, name) of the output's non-nullable columns
        self._required = [(i, f.name) for i, f in enumerate(target) if not f.nullable]

    def conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` (the output's column names, in order) cast to the target schema:
        what ``RecordBatch.cast`` does, with the per-column casts of each batch schema
        worked out once (most columns only need the target field, e.g. ``string`` ->
        ``large_string`` touches two of five).

        Raises:
            ValueError: other column names, or nulls in a column the target forbids them.
        """
        target = self.target
        schema = batch.schema
        casts = next((c for s, c in self._by_schema if s.equals(schema)), None)
        if casts is None:
            if schema.names != target.names:
                raise ValueError(f"Target schema's field names are not matching the record "
                                 f"batch's field names: {schema.names!r}, {target.names!r}")
            casts = [cast_for(have.type, want.type)
                     for have, want in zip(schema, target, strict=True)]
            if len(self._by_schema) >= CACHE_SIZE:
                self._by_schema.clear()
            self._by_schema.append((schema, casts))
        return pa.RecordBatch.from_arrays(self.cast_columns(batch.columns, casts),
                                          schema=target)

    def cast_columns(self, columns: list[pa.Array], casts: list[Cast]) -> list[pa.Array]:
        """``columns`` cast by ``casts`` (None: as is) to the target's types, refusing
        nulls where it forbids them (as ``RecordBatch.cast`` does).

        Raises:
            ValueError: nulls in a non-nullable column.
        """
        for index, name in self._required:
            if columns[index].null_count > 0:
                raise ValueError(f"Casting field {name!r} with null values to non-nullable")
        return [column if options is None
                else widen_offsets(column, options.to_type) if isinstance(options, Widen)
                else pc.call_function("cast", [column], options)
                for column, options in zip(columns, casts, strict=True)]
