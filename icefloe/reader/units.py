"""Read units of a data file (ORC stripes, Avro blocks) and which of them a split reads.

A data file is a sequence of units, each starting at a byte offset and holding a number
of records. A split ``[start, end)`` owns the units whose first byte lies in its range,
so consecutive ranges (whatever their boundaries: recorded split offsets or fixed sizes)
assign every unit to exactly one split, as Parquet row groups are assigned.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

import pyarrow as pa

from icefloe.splits.split import FileSplit


class ReadUnit(NamedTuple):
    """A stripe / block: its first byte in the file and its record count."""

    start: int
    rows: int


class FormatFile(Protocol):
    """An open ORC or Avro data file, as :mod:`icefloe.reader.open_file` opens it.

    ``schema_arrow`` is the file's own schema (file column names, Iceberg field ids as
    field metadata where the file has them); ``units`` lists its read units in file order.
    """

    schema_arrow: pa.Schema
    units: list[ReadUnit]

    def iter_batches(self, batch_size: int, units: list[int],
                     columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        """Batches (at most ``batch_size`` rows, in the file schema restricted to the
        top-level ``columns``, None: all) of the units at the indices ``units``, in order."""
        ...

    def read_all(self, columns: list[str] | None = None) -> pa.Table:
        """Every record of the file."""
        ...

    def close(self) -> None:
        ...


class Selection(NamedTuple):
    """What a split reads of a file: unit indices, the file position of the first record
    of the first one, and how many records of those units to skip (the resume offset)."""

    units: list[int]
    first_position: int
    skip: int


def select_units(units: Sequence[ReadUnit], split: FileSplit) -> Selection:
    """The units of ``units`` the split owns, after skipping ``split.resume_rows`` records.

    Whole units covered by the resume offset are dropped (not decoded); ``skip`` is what
    remains to skip inside the first selected unit. An empty selection means nothing is
    left to read.
    """
    skip = split.resume_rows
    selected: list[int] = []
    first_position = 0
    position = 0
    whole = split.is_whole_file
    for index, unit in enumerate(units):
        if whole or split.start <= unit.start < split.end:
            if not selected and skip >= unit.rows:
                skip -= unit.rows
            else:
                if not selected:
                    first_position = position
                selected.append(index)
        position += unit.rows
    return Selection(selected, first_position, skip)


def varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """An unsigned base-128 varint at ``pos`` (protobuf's, and Avro's before its zigzag
    step): (value, next position)."""
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
