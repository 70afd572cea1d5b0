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

import bisect
import threading
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
    """``ranges`` merged where closer than ``gap`` while the merged piece stays within
    ``piece`` bytes, and a range longer than ``piece`` cut into pieces of ``piece`` bytes:
    ``(offset, length)`` in file order, covering every range.

    A piece ends where a range (a column chunk) ends unless that range alone is longer
    than ``piece``, so a read of a column chunk is served from one piece (a slice, no
    copy) except for chunks longer than ``piece``."""
    merged: list[list[int]] = []
    for start, length in sorted(ranges):
        end = start + length
        if merged:
            first, last = merged[-1]
            if start < last or (start - last <= gap and max(last, end) - first <= piece):
                merged[-1][1] = max(last, end)  # overlapping, or near and it fits
                continue
        merged.append([start, end])
    return [(s, min(piece, end - s)) for start, end in merged for s in range(start, end, piece)]


def _overlaps(pieces: Sequence[tuple[int, int]], reads: Sequence[tuple[int, int]] | None
              ) -> dict[int, int]:
    """For each piece (by offset), how many of ``reads`` overlap it (1 without reads)."""
    count = {start: 0 if reads is not None else 1 for start, _ in pieces}
    if reads is None:
        return count
    starts = [start for start, _ in pieces]
    for offset, length in reads:
        i = max(0, bisect.bisect_right(starts, offset) - 1)
        while i < len(pieces) and pieces[i][0] < offset + length:
            if pieces[i][0] + pieces[i][1] > offset:
                count[pieces[i][0]] += 1
            i += 1
    return {start: max(1, n) for start, n in count.items()}


def _fetch(stream: Any, nbytes: int, offset: int) -> pa.Buffer:
    """``nbytes`` of ``stream`` from ``offset`` (an I/O thread's or a fallback read).

    An Arrow file reads into a buffer of Arrow's memory pool (``get_stream``: a view of
    the file with its own position, safe on any thread), which keeps freed memory for the
    next piece. ``read_at`` would read into a new Python bytes object: memory mapped
    fresh for every piece and returned at its release (about 29,000 page faults and 0.1 s
    of system CPU per 64 MB read; profile in benchmarks/RESULTS.md, "Defaults matrix").
    """
    get_stream = getattr(stream, "get_stream", None)
    if get_stream is None:
        return pa.py_buffer(stream.read_at(nbytes, offset))
    return get_stream(offset, nbytes).read_buffer(nbytes)


def _joined(parts: Sequence[pa.Buffer]) -> pa.Buffer:
    """``parts`` copied end to end into one buffer of Arrow's memory pool."""
    out = pa.allocate_buffer(sum(p.size for p in parts))
    view = memoryview(out)
    pos = 0
    for part in parts:
        view[pos:pos + part.size] = memoryview(part)
        pos += part.size
    return out


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
        reads: the ``(offset, length)`` reads expected (the column chunks): a piece is
            dropped once every one of them overlapping it was read (default: each piece
            is read once). Parquet's decode threads read column chunks in any order, so
            a piece shared by two chunks waits for both.
    """

    def __init__(self, stream: Any, pieces: Sequence[tuple[int, int]], concurrency: int,
                 ahead_bytes: int = AHEAD_BYTES,
                 reads: Sequence[tuple[int, int]] | None = None) -> None:
        self.stream = stream
        self.size = stream.size()
        self.concurrency = max(1, concurrency)
        self.ahead_bytes = ahead_bytes
        self._pieces = sorted(pieces)
        self._starts = [start for start, _ in self._pieces]
        self._submitted = [False] * len(self._pieces)
        self._next = 0  # the first piece :meth:`_fill` has not looked at
        self._readers = _overlaps(self._pieces, reads)  # piece offset -> reads left
        self._ahead: dict[int, tuple[int, Future[pa.Buffer]]] = {}  # offset -> (length, f)
        self._held = 0
        self._pos = 0
        self._lock = threading.Lock()
        self.requests = 0
        """Ranged requests submitted (for tests and profiles)."""
        self.fallback_reads = 0
        """Reads served by ``stream`` directly (not wholly inside fetched pieces)."""
        self._fill()

    # -- fetching ------------------------------------------------------------------------

    def _fill(self) -> None:
        """Submit the next pieces in file order, up to the requests in flight and the bytes
        ahead allowed."""
        with self._lock:
            while self._next < len(self._pieces) \
                    and sum(not f.done() for _, f in self._ahead.values()) < self.concurrency:
                if self._submitted[self._next]:  # a read needed it earlier
                    self._next += 1
                    continue
                length = self._pieces[self._next][1]
                if self._ahead and self._held + length > self.ahead_bytes:
                    return
                self._submit(self._next)
                self._next += 1

    def _take(self, offset: int, nbytes: int) -> list[tuple[int, int, Future[pa.Buffer]]]:
        """The pieces holding ``[offset, offset + nbytes)`` (those not yet submitted are
        submitted now, past the limits: the read needs them), each dropped once every
        read overlapping it took it; [] when the pieces do not cover it all (a read
        outside them, or of a piece already dropped)."""
        with self._lock:
            found = []
            pos, end = offset, offset + nbytes
            while pos < end:
                i = bisect.bisect_right(self._starts, pos) - 1
                if i < 0:
                    return []
                start, length = self._pieces[i]
                if pos >= start + length:
                    return []
                if start in self._ahead:
                    future = self._ahead[start][1]
                elif not self._submitted[i]:
                    future = self._submit(i)
                else:  # fetched and dropped
                    return []
                found.append((start, length, future))
                pos = start + length
            for start, length, _ in found:
                left = self._readers.get(start, 1) - 1
                self._readers[start] = left
                if left <= 0:  # every read of it done
                    del self._ahead[start]
                    self._held -= length
            return found

    def _submit(self, index: int) -> Future[pa.Buffer]:
        """Fetch piece ``index`` on the I/O pool (the caller holds the lock)."""
        offset, length = self._pieces[index]
        future = io_pool().submit(_fetch, self.stream, length, offset)
        self._submitted[index] = True
        self._ahead[offset] = (length, future)
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
        return parts[0] if len(parts) == 1 else _joined(parts)

    def close(self) -> None:
        """Drop what was fetched ahead (running fetches finish and are dropped)."""
        with self._lock:
            for _, future in self._ahead.values():
                future.cancel()
            self._ahead.clear()
            self._submitted = [True] * len(self._pieces)
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
    chunks = chunk_ranges(pf.metadata, row_groups, columns)
    ranged = RangedFile(stream, pieces(chunks), concurrency, reads=chunks)
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
