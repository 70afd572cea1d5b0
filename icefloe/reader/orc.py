"""ORC data files: stripes as read units. Runs on a worker.

Library: PyArrow's ORC reader (``pyarrow.orc.ORCFile``, Apache ORC's C++ reader). It
decodes one stripe at a time (``read_stripe``) into an Arrow RecordBatch, with column
selection, and it exposes the ORC type attributes Java Iceberg writes
(``iceberg.id``, ``iceberg.required``; see Java's ``ORCSchemaUtil``) as Arrow field
metadata, which PyIceberg's ``pyarrow_to_schema`` reads as field ids; top-level time,
uuid and fixed columns, which Java stores as ORC longs and binaries marked by the
``iceberg.long-type`` / ``iceberg.binary-type`` attributes, are cast to their Iceberg
types (nested ones are not: they fail the projection with a typed error). Files without
``iceberg.id`` attributes (Hive-migrated tables) resolve through the table's name
mapping, as Parquet files without field ids do.

Stripe byte offsets (the split boundaries: Java Iceberg records them as the data file's
``split_offsets``) are not in PyArrow's API, but the ORC reader's serialized file tail
is (the ``FileTail`` protobuf, footer already decompressed): :func:`stripe_units` walks
its ``Footer.stripes`` with a small protobuf decoder, so no protobuf library is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.orc as pa_orc

from icefloe.reader.units import ReadUnit, varint

LONG_TYPE = b"iceberg.long-type"
BINARY_TYPE = b"iceberg.binary-type"
FIELD_LENGTH = b"iceberg.length"


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """``(field number, value)`` of a protobuf message: ints for varints and fixed
    widths (little endian), bytes for length-delimited fields."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
            yield number, value
        elif wire == 2:
            length, pos = varint(buf, pos)
            yield number, buf[pos:pos + length]
            pos += length
        elif wire == 1:
            yield number, int.from_bytes(buf[pos:pos + 8], "little")
            pos += 8
        elif wire == 5:
            yield number, int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} in an ORC file tail")


def stripe_units(file_tail: bytes) -> list[ReadUnit]:
    """The stripes of an ORC file, from its serialized ``FileTail`` (orc_proto.proto:
    ``FileTail.footer`` = 2, ``Footer.stripes`` = 3, ``StripeInformation.offset`` = 1,
    ``numberOfRows`` = 5).

    Raises:
        ValueError: the tail holds no footer or is malformed.
    """
    footer = next((v for n, v in _fields(file_tail) if n == 2 and isinstance(v, bytes)), None)
    if footer is None:
        raise ValueError("the ORC file tail has no footer")
    units = []
    for number, value in _fields(footer):
        if number == 3 and isinstance(value, bytes):
            info = {n: v for n, v in _fields(value) if isinstance(v, int)}
            units.append(ReadUnit(start=info.get(1, 0), rows=info.get(5, 0)))
    return units


class OrcFile:
    """An open ORC data file (see :class:`icefloe.reader.units.FormatFile`).

    Args:
        stream: a seekable Arrow input file (closed by :meth:`close`).
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._file = pa_orc.ORCFile(stream)
        self._casts: dict[str, pa.DataType] = {}  # top-level column -> its Iceberg type
        self.schema_arrow: pa.Schema = self._iceberg_types(self._file.schema)
        self.units = stripe_units(self._file.reader.serialized_file_tail())

    def _iceberg_types(self, schema: pa.Schema) -> pa.Schema:
        """``schema`` with the top-level columns Java stores as another ORC type
        (``iceberg.long-type=TIME``: time as a long of microseconds;
        ``iceberg.binary-type=UUID`` / ``FIXED`` with ``iceberg.length``: binary) typed
        as Iceberg reads them; their batches are cast in :meth:`iter_batches`."""
        fields = []
        for field in schema:
            meta = field.metadata or {}
            want: pa.DataType | None = None
            if meta.get(LONG_TYPE) == b"TIME" and pa.types.is_int64(field.type):
                want = pa.time64("us")
            elif meta.get(BINARY_TYPE) == b"UUID" and pa.types.is_binary(field.type):
                want = pa.uuid()
            elif meta.get(BINARY_TYPE) == b"FIXED" and pa.types.is_binary(field.type) \
                    and meta.get(FIELD_LENGTH, b"").isdigit():
                want = pa.binary(int(meta[FIELD_LENGTH]))
            if want is not None:
                self._casts[field.name] = want
                field = field.with_type(want)
            fields.append(field)
        return pa.schema(fields, metadata=schema.metadata) if self._casts else schema

    def _cast(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not self._casts:
            return batch
        arrays = []
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            want = self._casts.get(name)
            if want is None:
                arrays.append(column)
            elif isinstance(want, pa.UuidType):
                arrays.append(pa.ExtensionArray.from_storage(want, column.cast(pa.binary(16))))
            else:
                arrays.append(column.cast(want))
        return pa.RecordBatch.from_arrays(
            arrays, schema=pa.schema([self.schema_arrow.field(n) for n in batch.schema.names]))

    def iter_batches(self, batch_size: int, units: list[int],
                     columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        """Batches of at most ``batch_size`` rows of the stripes ``units`` (in order),
        holding the top-level ``columns`` (None: all) in file order."""
        for index in units:
            stripe = self._cast(self._file.read_stripe(index, columns=columns))
            for offset in range(0, stripe.num_rows, batch_size):
                yield stripe.slice(offset, batch_size)

    def read_all(self, columns: list[str] | None = None) -> pa.Table:
        """The whole file (delete files)."""
        table = self._file.read(columns=columns)
        return pa.Table.from_batches([self._cast(b) for b in table.to_batches()],
                                     schema=pa.schema([self.schema_arrow.field(n)
                                                       for n in table.schema.names]))

    def close(self) -> None:
        self._stream.close()
