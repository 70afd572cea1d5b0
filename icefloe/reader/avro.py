"""Avro data files: blocks as read units, decoded by generated code into Arrow. Runs on a worker.

Library choice (measured on a 1M-row, 10-column Iceberg Avro data file, deflate, written
by PyIceberg's Avro writer: ``benchmarks/bench_avro_decoders.py``, figures in
``benchmarks/RESULTS.md``, "Avro data files"):

- PyIceberg's Avro reader (``pyiceberg.avro.file.AvroFile`` with a read schema) resolves
  Iceberg field ids itself, but builds a ``Record`` per row through a tree of reader
  objects, the rows still have to become Arrow columns, and PyIceberg 0.12's Cython
  decoder rounds every ``double`` to 32-bit precision (apache/iceberg-python#3808);
- fastavro (a maintained Cython decoder; not a dependency of icefloe) yields a dict per
  row with logical types as Python objects, also to be turned into Arrow columns;
- icefloe's own decoder (this module and :mod:`icefloe.reader.avro_codegen`, the
  approach of :mod:`icefloe.enumerator.manifest_decoder`): once per writer schema and
  column selection, one straight-line Python function per block that calls PyIceberg's
  Cython ``BinaryDecoder`` methods and appends each value to its column's list; the
  lists become Arrow arrays once per batch. Field-id resolution and schema evolution are
  not done here but by the reader's projection plan on the Arrow batch, as for Parquet
  and ORC, so the decoder only maps the writer schema to Arrow.

icefloe's decoder read the file 4-6x faster than either (to Arrow and decode-only), with
every value as written, and adds no dependency: it is the one used.

Field ids: Iceberg writes them as ``field-id`` properties of record fields,
``element-id`` of arrays, ``key-id`` / ``value-id`` of maps, and maps with non-string
keys as arrays of key/value records with ``logicalType: map`` (Java's
``AvroSchemaUtil``); they become ``PARQUET:field_id`` field metadata of the Arrow schema.
Files without ids read through the table's name mapping.

Split units: an Avro file is a header and data blocks, each ``count, size, bytes, sync``;
a block's unit starts at its count. A file of at most :data:`WHOLE_FILE_BYTES` is read
in one request; a bigger one reads its block headers (two varints each) to find the
blocks and their record counts (row positions need the counts of the blocks before a
split, as Java's ``AvroIO.findStartingRowPos`` does) and then only the selected blocks.

Limits: unions other than ``[null, T]`` / ``[T, null]`` are refused with a typed error
naming the field; nested records, arrays and maps decode through Python values (slower
than top-level primitives, not wrong).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyiceberg.avro.codecs import KNOWN_CODECS

from icefloe.reader.avro_codegen import DECODER, decoder_for, read_blocks
from icefloe.reader.units import ReadUnit, varint

WHOLE_FILE_BYTES = 64 * 1024 * 1024
"""Avro files up to this size are fetched whole in one read."""

WINDOW_BYTES = 1024 * 1024
"""Read-ahead of a bigger file's block-header walk and block reads."""

MAGIC = b"Obj\x01"
SYNC_SIZE = 16


def _zigzag(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint (Avro int / long) at ``pos``: (value, next position)."""
    result, pos = varint(buf, pos)
    return (result >> 1) ^ -(result & 1), pos

# ------------------------------------------------------------------ the file


class AvroFile:
    """An open Avro data file (see :class:`icefloe.reader.units.FormatFile`).

    Args:
        stream: a seekable input stream (``seek`` / ``read``; closed by :meth:`close`).

    Raises:
        ValueError: not an Avro file, an unknown codec or an unsupported schema.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        stream.seek(0, 2)
        self._size = stream.tell()
        stream.seek(0)
        self._whole: bytes | None = stream.read() if self._size <= WHOLE_FILE_BYTES else None
        self._window: tuple[int, bytes] = (0, b"")  # (first byte, bytes) read ahead
        header_end, meta, self._sync = self._header()
        codec_name = meta.get("avro.codec", b"null").decode()
        if codec_name not in KNOWN_CODECS:
            raise ValueError(f"unsupported Avro codec {codec_name!r}")
        codec = KNOWN_CODECS[codec_name]
        self._decompress = codec.decompress if codec else None
        self._decoder = decoder_for(meta["avro.schema"].decode())
        self.schema_arrow: pa.Schema = self._decoder.schema
        # (count, data start, data size) of each block
        self._blocks = self._walk(header_end)
        self.units = [ReadUnit(start, count) for start, count, _, _ in self._blocks]

    def _read_at(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset`` (fewer at the end of the file): from the whole
        file, else through a read-ahead window of :data:`WINDOW_BYTES` (block headers
        walked one after another share a request)."""
        if self._whole is not None:
            return self._whole[offset:offset + size]
        start, window = self._window
        if start <= offset and offset + size <= start + len(window):
            return window[offset - start:offset - start + size]
        self._stream.seek(offset)
        data = bytes(self._stream.read(max(size, WINDOW_BYTES)))
        self._window = (offset, data)
        return data[:size]

    def _header(self) -> tuple[int, dict[str, bytes], bytes]:
        size = 64 * 1024
        while True:
            chunk = self._read_at(0, size)
            try:
                return self._parse_header(chunk)
            except (EOFError, IndexError):
                if len(chunk) < size:
                    raise ValueError("truncated Avro header") from None
                size *= 4

    @staticmethod
    def _parse_header(chunk: bytes) -> tuple[int, dict[str, bytes], bytes]:
        if chunk[:4] != MAGIC:
            raise ValueError(f"not an Avro file (magic {chunk[:4]!r})")
        d = DECODER(chunk)
        d.read(4)
        meta: dict[str, bytes] = dict(read_blocks(d, lambda d: (d.read_utf8(), d.read_bytes())))
        sync = d.read(SYNC_SIZE)
        if len(sync) != SYNC_SIZE:
            raise EOFError
        return d.tell(), meta, sync

    def _walk(self, offset: int) -> list[tuple[int, int, int, int]]:
        """``(block start, count, data start, data size)`` of every block."""
        blocks = []
        while offset < self._size:
            head = self._read_at(offset, 20)
            count, pos = _zigzag(head, 0)
            size, pos = _zigzag(head, pos)
            if count < 0 or size < 0:
                raise ValueError(f"corrupt Avro block header at byte {offset}")
            data_start = offset + pos
            blocks.append((offset, count, data_start, size))
            offset = data_start + size + SYNC_SIZE
        if offset != self._size:
            raise ValueError("the last Avro block runs past the end of the file")
        return blocks

    def _block_bytes(self, index: int) -> bytes:
        _, _, data_start, size = self._blocks[index]
        raw = self._read_at(data_start, size + SYNC_SIZE)
        if raw[size:] != self._sync:
            raise ValueError(f"bad Avro sync marker after the block at byte {data_start}")
        data = raw[:size]
        return self._decompress(data) if self._decompress else data

    def iter_batches(self, batch_size: int, units: list[int],
                     columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        """Batches of at most ``batch_size`` rows of the blocks ``units`` (in order),
        holding the top-level ``columns`` (None: all) in file order."""
        decode, schema = self._decoder.block_decoder(None if columns is None
                                                     else tuple(columns))
        lists: list[list[Any]] = [[] for _ in schema]
        appends = [values.append for values in lists]
        rows = 0
        for index in units:
            count = self._blocks[index][1]
            d = DECODER(self._block_bytes(index))
            decode(d, count, *appends)
            rows += count
            if rows >= batch_size:
                batch = to_batch(lists, schema, rows)
                for offset in range(0, rows, batch_size):
                    yield batch.slice(offset, batch_size)
                lists = [[] for _ in schema]
                appends = [values.append for values in lists]
                rows = 0
        if rows:
            batch = to_batch(lists, schema, rows)
            for offset in range(0, rows, batch_size):
                yield batch.slice(offset, batch_size)

    def read_all(self, columns: list[str] | None = None) -> pa.Table:
        """The whole file (delete files)."""
        batches = list(self.iter_batches(1 << 30, list(range(len(self.units))), columns))
        decode_schema = self._decoder.block_decoder(None if columns is None
                                                    else tuple(columns))[1]
        return pa.Table.from_batches(batches, schema=decode_schema)

    def close(self) -> None:
        self._whole = None
        self._window = (0, b"")
        self._stream.close()


def to_batch(lists: list[list[Any]], schema: pa.Schema, rows: int) -> pa.RecordBatch:
    """The decoded column ``lists`` of ``rows`` records as a batch of ``schema``: top-level
    doubles arrive as 8 raw bytes and strings as UTF-8 bytes (see
    :mod:`icefloe.reader.avro_codegen`), everything else as Python values."""
    arrays = []
    for values, field in zip(lists, schema, strict=True):
        if field.type == pa.float64():  # top-level doubles: 8 raw bytes each
            raw = pa.array(values, type=pa.binary(8))
            arrays.append(pa.Array.from_buffers(pa.float64(), len(raw), raw.buffers(),
                                                raw.null_count, raw.offset))
        elif field.type == pa.string():  # top-level strings: UTF-8 bytes each
            arrays.append(pa.array(values, type=pa.binary()).cast(pa.string()))
        elif isinstance(field.type, pa.UuidType):
            storage = pa.array(values, type=pa.binary(16))
            arrays.append(pa.ExtensionArray.from_storage(field.type, storage))
        else:
            arrays.append(pa.array(values, type=field.type))
    if not arrays:  # no column selected: the rows still count (positions, deletes)
        return pa.RecordBatch.from_arrays([pa.nulls(rows)], names=["_"]).select([])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
