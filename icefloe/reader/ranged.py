"""Reading a large Parquet split from an object store: its column chunks fetched ahead in
ranged requests, concurrently, while earlier row groups decode. Runs on a worker.

Parquet's own pre-buffering (PyArrow's ``pre_buffer``, lazy as ``ParquetReader`` sets it
and without a way to change its ``CacheOptions`` from Python) coalesces a split's column
chunks into ranges of up to 32 MiB and fetches each one when the decoder first needs it:
one request at a time per reader thread, each round trip and transfer waiting for the
decode before it (profile in benchmarks/RESULTS.md, "Defaults matrix"). A
:class:`RangedFile` fetches instead, in file order, the byte ranges of the split's column
chunks (the selected row groups' selected columns, ranges closer than
:data:`COALESCE_GAP` merged, pieces of at most :data:`PIECE_BYTES`) on the process-wide
I/O pool, with at most ``concurrency`` requests in flight and :data:`AHEAD_BYTES` bytes
fetched and not yet read; Parquet reads its column chunks from them (through a file
object: one read per column chunk, as Parquet reads without pre-buffering).

A read not wholly inside fetched ranges (the footer, a writer's padding) goes to the
underlying file, so nothing is ever served from bytes that were not fetched: the ranges
only decide what is fetched ahead.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

import pyarrow as pa
from pyarrow._parquet import ParquetReader

from icefloe.reader.open_file import ParquetFile
from icefloe.reader.plan import FilePlan, column_indices
from icefloe.reader.prefetch import PREFETCH_MAX_BYTES, Prefetcher, io_pool
from icefloe.reader.ranges import parquet_batches
from icefloe.splits.split import FileSplit

PIECE_BYTES = 8 * 1024 * 1024
"""Largest ranged request (larger column chunks are fetched in pieces, concurrently)."""

COALESCE_GAP = 64 * 1024
"""Ranges closer than this are fetched in one request (the gap is fetched too)."""

AHEAD_BYTES = PREFETCH_MAX_BYTES
"""Most bytes one reader holds fetched ahead and not yet read (at least one piece)."""

MIN_SPLIT_BYTES = 8 * 1024 * 1024
"""Smallest split read through a :class:`RangedFile` (smaller ones are whole small files,
fetched whole by :mod:`icefloe.reader.prefetch`, or cost one request anyway)."""


def chunk_ranges(metadata: Any, row_groups: Sequence[int],
                 columns: Sequence[int] | None) -> list[tuple[int, int]]:
    """``(offset, length)`` of the column chunks of ``row_groups`` (``columns``: leaf
    indices, None: all), in file order, as Parquet reads them (from the dictionary page,
    when there is one, to the end of the chunk's compressed pages)."""
    out = []
    for g in row_groups:
        rg = metadata.row_group(g)
        for c in range(rg.num_columns) if columns is None else columns:
            col = rg.column(c)
            start = col.data_page_offset
            if col.has_dictionary_page and 0 < col.dictionary_page_offset < start:
                start = col.dictionary_page_offset
            out.append((int(start), int(col.total_compressed_size)))
    return sorted(out)


def pieces(ranges: Sequence[tuple[int, int]], gap: int = COALESCE_GAP,
           piece: int = PIECE_BYTES) -> list[tuple[int, int]]:
    """``ranges`` merged where closer than ``gap`` and cut into pieces of at most
    ``piece`` bytes: ``(offset, length)`` in file order, covering every range."""
    merged: list[list[int]] = []
    for start, length in sorted(ranges):
        end = start + length
        if merged and start - merged[-1][1] <= gap:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, min(piece, end - s)) for start, end in merged for s in range(start, end, piece)]


def _fetch(stream: Any, nbytes: int, offset: int) -> pa.Buffer:
    """``nbytes`` of ``stream`` from ``offset`` (an I/O thread's or a fallback read)."""
    return pa.py_buffer(stream.read_at(nbytes, offset))  # no copy of the bytes


class RangedFile:
    """A read-only file over ``stream`` (an Arrow random-access file of an object) whose
    ``pieces`` are fetched ahead on the I/O pool. Parquet's decode threads read it
    through ``pyarrow.PythonFile``, one read at a time; a read waits only for the pieces
    it needs (its own lock guards the bookkeeping, never a wait for a fetch).

    Args:
        stream: the object's file (its ``read_at`` runs on the I/O threads).
        pieces: ``(offset, length)`` to fetch, in the order they will be read.
        concurrency: most requests in flight (at least 1).
        ahead_bytes: most bytes fetched or in flight and not yet read (one piece always).
    """

    def __init__(self, stream: Any, pieces: Sequence[tuple[int, int]], concurrency: int,
                 ahead_bytes: int = AHEAD_BYTES) -> None:
        self.stream = stream
        self.size = stream.size()
        self.concurrency = max(1, concurrency)
        self.ahead_bytes = ahead_bytes
        self._todo = deque(pieces)
        self._ahead: dict[int, tuple[int, Future[pa.Buffer]]] = {}  # offset -> (length, f)
        self._order: list[int] = []  # offsets of ``_ahead``, ascending
        self._held = 0
        self._pos = 0
        self._lock = threading.Lock()
        self.requests = 0
        """Ranged requests submitted (for tests and profiles)."""
        self.fallback_reads = 0
        """Reads served by ``stream`` directly (not wholly inside a fetched piece)."""
        self._fill()

    # -- fetching ------------------------------------------------------------------------

    def _fill(self) -> None:
        with self._lock:
            while self._todo and sum(not f.done() for _, f in self._ahead.values()) \
                    < self.concurrency:
                offset, length = self._todo[0]
                if self._ahead and self._held + length > self.ahead_bytes:
                    return
                self._todo.popleft()
                self._submit(offset, length)

    def _take(self, offset: int, nbytes: int) -> list[tuple[int, int, Future[pa.Buffer]]]:
        """The pieces holding ``[offset, offset + nbytes)`` (those not yet submitted are
        submitted now, past the bytes limit: the read needs them), removed from the
        ones held; [] when the pieces do not cover it all."""
        with self._lock:
            found = []
            pos, end = offset, offset + nbytes
            for start in self._order:
                length, future = self._ahead[start]
                if start <= pos < start + length:
                    found.append((start, length, future))
                    pos = start + length
                    if pos >= end:
                        break
            while pos < end and self._todo and self._todo[0][0] <= pos \
                    < self._todo[0][0] + self._todo[0][1]:
                start, length = self._todo.popleft()
                future = self._submit(start, length)
                found.append((start, length, future))
                pos = start + length
            if pos < end:
                return []
            for start, length, _ in found:
                # a piece is read once (a column chunk once); a piece holding more than
                # this read stays until the read of its last byte
                if start + length <= end:
                    del self._ahead[start]
                    self._order.remove(start)
                    self._held -= length
            return found

    def _submit(self, offset: int, length: int) -> Future[pa.Buffer]:
        """Fetch a piece on the I/O pool (the caller holds the lock)."""
        future = io_pool().submit(_fetch, self.stream, length, offset)
        self._ahead[offset] = (length, future)
        self._order.append(offset)
        self._held += length
        self.requests += 1
        return future

    def read_at(self, nbytes: int, offset: int) -> pa.Buffer:
        """``nbytes`` bytes from ``offset`` (fewer at the end of the object)."""
        nbytes = max(0, min(nbytes, self.size - offset))
        found = self._take(offset, nbytes) if nbytes else []
        if not found:
            self.fallback_reads += 1
            return _fetch(self.stream, nbytes, offset)
        parts = []
        for start, length, future in found:
            data = future.result()  # a fetch's error is the read's (a reset, a 403)
            lo = max(offset, start) - start
            hi = min(offset + nbytes, start + length) - start
            parts.append(data.slice(lo, hi - lo))
        self._fill()
        return parts[0] if len(parts) == 1 else pa.py_buffer(b"".join(parts))

    def close(self) -> None:
        """Drop what was fetched ahead (running fetches finish and are dropped)."""
        with self._lock:
            for _, future in self._ahead.values():
                future.cancel()
            self._ahead.clear()
            self._order.clear()
            self._todo.clear()
            self._held = 0

    # -- the file object Parquet reads (pyarrow.PythonFile) -------------------------------

    closed = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def seek(self, position: int, whence: int = 0) -> int:
        self._pos = position if whence == 0 else (
            self._pos + position if whence == 1 else self.size + position)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, nbytes: int = -1) -> pa.Buffer:
        n = self.size - self._pos if nbytes is None or nbytes < 0 else nbytes
        data = self.read_at(n, self._pos)
        self._pos += data.size
        return data


def ranged_reader(pf: ParquetReader, stream: Any, row_groups: Sequence[int],
                  columns: Sequence[int] | None, concurrency: int
                  ) -> tuple[ParquetReader, RangedFile]:
    """A Parquet reader of ``pf``'s file (its footer already parsed: no request) reading
    ``row_groups``' ``columns`` from a :class:`RangedFile` over ``stream``. Close both."""
    ranged = RangedFile(stream, pieces(chunk_ranges(pf.metadata, row_groups, columns)),
                        concurrency)
    reader = ParquetReader()
    try:
        reader.open(pa.PythonFile(ranged, mode="r"), metadata=pf.metadata, pre_buffer=False,
                    arrow_extensions_enabled=True)
    except BaseException:
        ranged.close()
        raise
    return reader, ranged


def ranged_batches(opened: ParquetFile, row_groups: list[int], split: FileSplit,
                   batch_size: int, plan: FilePlan, prefetcher: Prefetcher
                   ) -> Iterator[pa.RecordBatch]:
    """:func:`~icefloe.reader.ranges.parquet_batches` of ``opened`` (a remote file), its
    column chunks fetched ahead through a :class:`RangedFile` with ``prefetcher``'s
    concurrency (closed at the end, also when the consumer stops early; its requests
    counted in ``prefetcher.stats``)."""
    reader, ranged = ranged_reader(opened.reader, opened.stream, row_groups,
                                   column_indices(opened.reader, plan),
                                   prefetcher.concurrency)
    try:
        yield from parquet_batches(reader, row_groups, split, batch_size, plan)
    finally:
        reader.close()
        ranged.close()
        prefetcher.stats.ranged_requests += ranged.requests
