"""The columns of a decoded manifest (issue 31's contract), defined once for both decoders.

:func:`icefloe.enumerator.columnar.decode_manifest` (pure Python) and
:func:`icefloe.enumerator._native_manifest.decode_manifest` (C) return record batches of
exactly :func:`batch_schema`. Pure data: imports nothing of icefloe, so both import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

BASE_COLUMNS = ("file_path", "file_format", "partition", "record_count", "file_size",
                "split_offsets", "sequence_number")
"""The first columns of every decoded batch, in this order (the contract's)."""


def stats_columns(stats_ids: tuple[int, ...]) -> list[str]:
    """The stats columns a batch decoded with ``stats_ids`` has after :data:`BASE_COLUMNS`:
    for each id ``k``, in order, ``value_count_k``, ``null_count_k``, ``nan_count_k``,
    ``lower_k``, ``upper_k``."""
    return [f"{name}_{k}" for k in stats_ids
            for name in ("value_count", "null_count", "nan_count", "lower", "upper")]


def batch_schema(stats_ids: tuple[int, ...]) -> pa.Schema:
    """The Arrow schema of a batch decoded with ``stats_ids``: :data:`BASE_COLUMNS` (path,
    format, raw partition bytes and sizes not null; split offsets and sequence number
    nullable), then :func:`stats_columns` (counts int64, bounds binary; null: the map or
    the key absent)."""
    import pyarrow as pa

    fields = [
        pa.field("file_path", pa.string(), nullable=False),
        pa.field("file_format", pa.string(), nullable=False),
        pa.field("partition", pa.binary(), nullable=False),
        pa.field("record_count", pa.int64(), nullable=False),
        pa.field("file_size", pa.int64(), nullable=False),
        pa.field("split_offsets", pa.list_(pa.int64())),
        pa.field("sequence_number", pa.int64()),
    ]
    for name in stats_columns(stats_ids):
        kind = pa.binary() if name.startswith(("lower_", "upper_")) else pa.int64()
        fields.append(pa.field(name, kind))
    return pa.schema(fields)
