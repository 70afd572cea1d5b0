"""Reading a large Parquet split from an object store: its column chunks fetched ahead in
ranged requests, concurrently, while earlier row groups decode. Runs on a worker.

Parquet's own pre-buffering (PyArrow's ``pre_buffer``, lazy as ``ParquetReader`` sets it
and without a way to change its ``CacheOptions`` from Python) coalesces a split's column
chunks into ranges of up to 32 MiB and fetches each one when the decoder first needs it:
one request at a time per reader thread, each round trip and transfer waiting for the
decode before it (profile in benchmarks/RESULTS.md, "Defaults matrix"). A
:class:`RangedFile` fetches instead the byte ranges of the split's column chunks (the
selected row groups' selected columns; :func:`blocks`: ranges closer than
:data:`COALESCE_GAP` merged up to the split's request size, :func:`request_bytes`, a
longer column chunk a block of its own) on the process-wide I/O pool, in the order the
decode needs them (:func:`need_order`), each block into one buffer in requests of at most
that size, with at most ``concurrency`` requests in flight and :data:`AHEAD_BYTES` bytes
fetched and not yet read.

Row groups of up to :data:`STREAM_ROW_GROUP_BYTES` are read as Parquet reads without
pre-buffering: one read per column chunk, a slice of one block's buffer (the bytes are
never copied after their transfer). A larger row group (1 GB x 1 row group: five column
chunks of 15-320 MB) is read through Parquet's buffered column streams from blocks of at
most a piece, a few MiB at a time as the decode goes (:func:`ranged_reader`; one copy of
the bytes, into Parquet's stream buffers), and its batches are decoded ahead of the reader
thread (:func:`decoded_ahead`): the decode starts with the first piece of each column
chunk instead of after the whole row group, and the bytes held stay within
:data:`AHEAD_BYTES` (benchmarks/RESULTS.md, "Session 16 (issue 30): large files on S3").

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

from icefloe.reader.open_file import BINARY_TYPE, LIST_TYPE, ParquetFile
from icefloe.reader.plan import FilePlan, column_indices
from icefloe.reader.prefetch import PREFETCH_MAX_BYTES, Prefetcher, io_pool
from icefloe.reader.ranges import parquet_batches
from icefloe.splits.split import FileSplit

PIECE_BYTES = 8 * 1024 * 1024
"""Largest ranged request of a small split or a streamed row group (:func:`request_bytes`):
a block longer than this (one long column chunk) is fetched in requests of this size,
concurrently, into the block's one buffer."""

MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""Largest ranged request of any split: Arrow's own pre-buffering coalesces column chunks
into ranges of up to this (``CacheOptions.range_size_limit``)."""

SPLIT_REQUESTS = 8
"""Ranged requests a split's bytes are cut into at least, while they are at least
:data:`PIECE_BYTES` each (:func:`request_bytes`)."""

COALESCE_GAP = 64 * 1024
"""Ranges closer than this are fetched in one request (the gap is fetched too)."""

AHEAD_BYTES = PREFETCH_MAX_BYTES
"""Most bytes one reader holds fetched ahead and not yet read (at least one request)."""

STREAM_ROW_GROUP_BYTES = AHEAD_BYTES
"""A row group holding more selected bytes than this is read through buffered column
streams (:func:`ranged_reader`): read whole, it could not be fetched within the bytes a
reader may hold ahead. Up to this, a row group is fetched in a split's larger requests
(:func:`request_bytes`) and read whole: Parquet reads all of its column chunks when its
decode starts, each read dropping its block from the bytes held, so the next row group's
fetch runs while this one decodes (a reader holds at most the row group it decodes plus
:data:`AHEAD_BYTES`). Streamed, a ~62 MB row group took 11-12 requests of 8 MiB, not 4-6;
at half of :data:`AHEAD_BYTES` (as before session 28), 256 MB x 4 and 1 GB x 16 row groups
(61 and 60 MiB) were streamed; read whole, their reads over S3 were 3-13 % faster
with a quarter less of SeaweedFS's CPU (benchmarks/RESULTS.md, "Session 28")."""

STREAM_BUFFER_BYTES = 4 * 1024 * 1024
"""Parquet's read buffer of a column chunk read as a stream (:func:`ranged_reader`): the
bytes of a chunk it reads at a time (1,696 reads of a 1 GB row group; at 128 KiB, 7,541
reads, each a call into Python, and no faster)."""

MIN_SPLIT_BYTES = 8 * 1024 * 1024
"""Smallest split read through a :class:`RangedFile` (smaller ones are whole small files,
fetched whole by :mod:`icefloe.reader.prefetch`, or cost one request anyway)."""


def chunk_ranges(metadata: Any, row_groups: Sequence[int],
                 columns: Sequence[int] | None) -> list[tuple[int, int]]:
    """``(offset, length)`` of the column chunks of ``row_groups`` (``columns``: leaf
    indices, None: all), in file order, as Parquet reads them (from the dictionary page,
    when there is one, to the end of the chunk's compressed pages)."""
    return [(start, length) for start, length, _ in ranked_chunks(metadata, row_groups,
                                                                  columns)]


def ranked_chunks(metadata: Any, row_groups: Sequence[int],
                  columns: Sequence[int] | None) -> list[tuple[int, int, int]]:
    """:func:`chunk_ranges` with each chunk's row group's place in ``row_groups`` (the
    order the decode reaches them): ``(offset, length, rank)``, in file order."""
    out = []
    for rank, g in enumerate(row_groups):
        rg = metadata.row_group(g)
        for c in range(rg.num_columns) if columns is None else columns:
            col = rg.column(c)
            start = col.data_page_offset
            if col.has_dictionary_page and 0 < col.dictionary_page_offset < start:
                start = col.dictionary_page_offset
            out.append((int(start), int(col.total_compressed_size), rank))
    return sorted(out)


def request_bytes(split_bytes: int, streamed: bool) -> int:
    """The largest ranged request of a split of ``split_bytes`` selected bytes: a
    :data:`SPLIT_REQUESTS`-th of them, at least :data:`PIECE_BYTES` and at most
    :data:`MAX_REQUEST_BYTES`; a streamed split's (:func:`ranged_reader`) always
    :data:`PIECE_BYTES` (its pieces are what it holds ahead, read as the decode goes).

    Each request costs the store its own work (SeaweedFS's CPU; S3's charge per GET), so
    a large split is fetched in fewer, larger requests, still several at once: 256 MB x
    16 row groups over 10 ms (two splits of 134 MB) went from 52 GETs of at most 7.6 MB
    per read to 23 of at most 16.75 MB, SeaweedFS's CPU per read from 0.68 to 0.54 s and
    the read from 1.66 to 1.50 s (benchmarks/RESULTS.md, "Session 25"). A split of up to
    64 MiB is fetched as before, in requests of at most 8 MiB: requests of 32 MiB made
    the first read of 32 MB files 11-29 % slower (one transfer where there were four)."""
    if streamed:
        return PIECE_BYTES
    return max(PIECE_BYTES, min(MAX_REQUEST_BYTES, split_bytes // SPLIT_REQUESTS))


def blocks(ranges: Sequence[tuple[int, int]], gap: int = COALESCE_GAP,
           piece: int = PIECE_BYTES) -> list[tuple[int, int]]:
    """``ranges`` merged where closer than ``gap`` while the merged block stays within
    ``piece`` bytes (overlapping ranges always): ``(offset, length)`` in file order,
    covering every range.

    Every range lies in exactly one block, so a read of a column chunk is a slice of one
    fetched buffer, never a copy of several: a range longer than ``piece`` is a block of
    its own, which :class:`RangedFile` fetches in several requests into one buffer."""
    merged: list[list[int]] = []
    for start, length in sorted(ranges):
        end = start + length
        if merged:
            first, last = merged[-1]
            if start < last or (start - last <= gap and max(last, end) - first <= piece):
                merged[-1][1] = max(last, end)  # overlapping, or near and it fits
                continue
        merged.append([start, end])
    return [(start, end - start) for start, end in merged]


def requests(blocks: Sequence[tuple[int, int]], piece: int = PIECE_BYTES
             ) -> list[tuple[int, int, int]]:
    """The ranged requests that fetch ``blocks``: ``(block index, offset within the block,
    length)``, each at most ``piece`` bytes, in file order."""
    return [(i, lo, min(piece, length - lo)) for i, (_, length) in enumerate(blocks)
            for lo in range(0, length, piece)]


def pieces(blocks: Sequence[tuple[int, int]], piece: int = PIECE_BYTES
           ) -> list[tuple[int, int]]:
    """``blocks`` cut into blocks of at most ``piece`` bytes (each its own buffer), for
    reads through buffered column streams: a block is dropped once read, so the bytes
    held follow the reads, not the column chunks' lengths."""
    return [(start + lo, min(piece, length - lo)) for start, length in blocks
            for lo in range(0, length, piece)]


def _fetch(stream: Any, nbytes: int, offset: int) -> pa.Buffer:
    """``nbytes`` of ``stream`` from ``offset`` into a new buffer (a read outside the
    blocks). An Arrow file reads into a buffer of Arrow's memory pool (``get_stream``: a
    view of the file with its own position, safe on any thread); ``read_at`` would read
    into a new Python bytes object (see :func:`_fetch_into`)."""
    get_stream = getattr(stream, "get_stream", None)
    if get_stream is None:
        return pa.py_buffer(stream.read_at(nbytes, offset))
    return get_stream(offset, nbytes).read_buffer(nbytes)


def _fetch_into(stream: Any, into: memoryview, offset: int) -> None:
    """Fill ``into`` with the bytes of ``stream`` from ``offset`` (an I/O thread's work).

    An Arrow file reads straight into it (``readinto`` of a ``get_stream`` view, without
    the GIL; S3's client writes the answer's body there): no copy of the bytes after
    the transfer. A file without ``get_stream`` (a test's) is read and copied.

    Raises:
        OSError: the file holds fewer bytes there (it ends earlier than the Parquet
            metadata says), or the read's own error (a reset, a 403).
    """
    nbytes = len(into)
    get_stream = getattr(stream, "get_stream", None)
    if get_stream is None:
        data = memoryview(stream.read_at(nbytes, offset)).cast("B")
        got = len(data)
        into.cast("B")[:got] = data  # an Arrow buffer's view is of signed bytes
    else:
        got = get_stream(offset, nbytes).readinto(into)
    if got != nbytes:
        raise OSError(f"read {got} of {nbytes} bytes at offset {offset}: the file ends "
                      "before the column chunks its Parquet metadata names")


def _joined(parts: Sequence[pa.Buffer]) -> pa.Buffer:
    """``parts`` copied end to end into one buffer of Arrow's memory pool."""
    out = pa.allocate_buffer(sum(p.size for p in parts))
    view = memoryview(out)
    pos = 0
    for part in parts:
        view[pos:pos + part.size] = memoryview(part)
        pos += part.size
    return out


class _Block:
    """One block's state in a :class:`RangedFile` (guarded by its lock): its buffer
    (allocated when its first request is submitted), its requests' futures (by request
    index), how many bytes of it the expected reads will take and how many they took;
    ``dropped`` once they took them all."""

    __slots__ = ("buffer", "dropped", "expected", "futures", "held", "index", "length",
                 "offset", "served")

    def __init__(self, index: int, offset: int, length: int, expected: int) -> None:
        self.index = index
        self.offset = offset
        self.length = length
        self.buffer: pa.Buffer | None = None
        self.futures: dict[int, Future[None]] = {}
        self.held = 0  # bytes of its requests submitted
        self.expected = expected
        self.served = 0
        self.dropped = False


def _expected_bytes(blocks: Sequence[tuple[int, int]],
                    reads: Sequence[tuple[int, int]] | None) -> list[int]:
    """For each block, the bytes of it ``reads`` cover (the whole block without reads;
    at least 1: a block no read covers is dropped by its first read)."""
    if reads is None:
        return [length for _, length in blocks]
    out = []
    for start, length in blocks:
        end = start + length
        out.append(max(1, sum(max(0, min(end, s + n) - max(start, s)) for s, n in reads)))
    return out


def need_order(requests: Sequence[tuple[int, int, int]], blocks: Sequence[tuple[int, int]],
               reads: Sequence[tuple[int, int]] | None,
               ranks: Sequence[int] | None = None) -> list[int]:
    """The indices of ``requests`` in the order the decode will need their bytes: by the
    rank of the first read (column chunk) they serve (``ranks``: its row group's place in
    the split, default 0), then by how far into that read they start, as a fraction of
    its length (a row group's columns are decoded side by side, each at its own pace in
    bytes: the 10th MB of a 20 MB column chunk is needed with the 5th of a 10 MB one),
    then in file order. Without ``reads``: file order."""
    if reads is None:
        return list(range(len(requests)))
    spans = sorted(zip(reads, ranks if ranks is not None else [0] * len(reads),
                       strict=True))
    keys = []
    for j, (i, lo, n) in enumerate(requests):
        start = blocks[i][0] + lo
        end = start + n
        best: tuple[float, float] = (float("inf"), 0.0)
        for (s, length), rank in spans:
            if s >= end:
                break
            if s + length > start and length:
                best = min(best, (rank, (max(start, s) - s) / length))
        keys.append((best, start, j))
    return [j for _, _, j in sorted(keys)]


class RangedFile:
    """A read-only file over ``stream`` (an Arrow random-access file of an object) whose
    ``blocks`` are fetched ahead on the I/O pool, each into one buffer of Arrow's memory
    pool in requests of at most ``piece`` bytes, in the order the decode needs them
    (:func:`need_order`). Parquet's decode threads read it through ``pyarrow.PythonFile``,
    one read at a time; a read inside one block is a slice of its buffer (no copy) and
    waits only for the requests holding its bytes (its own lock guards the bookkeeping,
    never a wait for a fetch). A block is dropped once the expected reads took every byte
    of it they cover, so with Parquet's buffered column streams (reads of a page or so,
    :func:`ranged_reader`) the bytes held stay within ``ahead_bytes`` however long the
    column chunks.

    Args:
        stream: the object's file (its ``get_stream`` or ``read_at`` runs on the I/O
            threads).
        blocks: ``(offset, length)`` to fetch (:func:`blocks`, or :func:`pieces` of them).
        concurrency: most requests in flight (at least 1).
        ahead_bytes: most bytes fetched or in flight and not yet read (one request always).
        reads: the ``(offset, length)`` ranges the reads will cover (the column chunks,
            not overlapping each other; default: each block read whole once). Parquet's
            decode threads read column chunks in any order, so a block shared by two
            chunks waits for both.
        piece: the largest request.
        ranks: for each of ``reads``, its row group's place in the split (the order
            the decode reaches them; default: all 0).
    """

    def __init__(self, stream: Any, blocks: Sequence[tuple[int, int]], concurrency: int,
                 ahead_bytes: int = AHEAD_BYTES,
                 reads: Sequence[tuple[int, int]] | None = None,
                 piece: int = PIECE_BYTES, ranks: Sequence[int] | None = None) -> None:
        self.stream = stream
        self.size = stream.size()
        self.concurrency = max(1, concurrency)
        self.ahead_bytes = ahead_bytes
        spans = sorted(blocks)
        self._blocks = [_Block(i, start, length, n) for i, ((start, length), n)
                        in enumerate(zip(spans, _expected_bytes(spans, reads), strict=True))]
        self._starts = [start for start, _ in spans]
        self._requests = requests(spans, piece)
        self._first = [0]  # block i's requests: self._requests[_first[i]:_first[i + 1]]
        for _, length in spans:
            self._first.append(self._first[-1] + -(-length // piece))
        self._order = need_order(self._requests, spans, reads, ranks)
        self._submitted = [False] * len(self._requests)
        self._next = 0  # the first of ``_order`` :meth:`_fill` has not looked at
        self._live: dict[int, _Block] = {}  # blocks with a request submitted, not dropped
        self._held = 0  # bytes of the requests of live blocks
        self._flight = 0  # requests submitted and not done
        self._closed = False
        self._pos = 0
        self._lock = threading.RLock()  # a done callback may run in :meth:`_submit`
        self.requests = 0
        """Ranged requests submitted (for tests and profiles)."""
        self.fallback_reads = 0
        """Reads served by ``stream`` directly (not wholly inside fetched blocks)."""
        self.max_held_bytes = 0
        """Most bytes fetched or in flight and not yet read at once (for tests)."""
        self.streamed = False
        """Whether Parquet reads it through buffered column streams (set by
        :func:`ranged_reader`)."""
        self._fill()

    # -- fetching ------------------------------------------------------------------------

    def _fill(self) -> None:
        """Submit the next requests in need order, up to the requests in flight and the
        bytes ahead allowed (on a reader thread after a read, on an I/O thread when a
        request is done)."""
        with self._lock:
            while not self._closed and self._next < len(self._order) \
                    and self._flight < self.concurrency:
                j = self._order[self._next]
                if self._submitted[j]:  # a read needed it earlier
                    self._next += 1
                    continue
                if self._live and self._held + self._requests[j][2] > self.ahead_bytes:
                    return
                self._submit(j)
                self._next += 1

    def _done(self, _: Future[None]) -> None:
        with self._lock:
            self._flight -= 1
        self._fill()

    def _submit(self, j: int) -> None:
        """Fetch request ``j`` on the I/O pool into its block's buffer (the caller holds
        the lock)."""
        i, lo, n = self._requests[j]
        block = self._blocks[i]
        if block.buffer is None:
            block.buffer = pa.allocate_buffer(block.length)
            self._live[i] = block
        into = memoryview(block.buffer)[lo:lo + n]  # the future's arguments keep it alive
        future = io_pool().submit(_fetch_into, self.stream, into, block.offset + lo)
        block.futures[j] = future
        self._submitted[j] = True
        block.held += n
        self._held += n
        self.max_held_bytes = max(self.max_held_bytes, self._held)
        self._flight += 1
        self.requests += 1
        future.add_done_callback(self._done)

    def _take(self, offset: int, nbytes: int
              ) -> list[tuple[int, pa.Buffer, list[Future[None]]]]:
        """``(offset, buffer, futures)`` of the blocks holding ``[offset, offset +
        nbytes)`` (``futures``: of the requests holding those bytes; those not yet
        submitted are submitted now, past the limits: the read needs them), each dropped
        once the expected reads took every byte of it they cover; [] when the blocks do
        not cover it all (a read outside them, or of a block already dropped)."""
        with self._lock:
            found = []
            pos, end = offset, offset + nbytes
            while pos < end:
                i = bisect.bisect_right(self._starts, pos) - 1
                if i < 0:
                    return []
                block = self._blocks[i]
                if pos >= block.offset + block.length or block.dropped:
                    return []
                found.append(block)
                pos = block.offset + block.length
            taken = []
            for block in found:
                lo = max(offset, block.offset) - block.offset
                hi = min(end, block.offset + block.length) - block.offset
                futures = []
                for j in range(self._first[block.index], self._first[block.index + 1]):
                    _, rlo, n = self._requests[j]
                    if rlo < hi and rlo + n > lo:  # holds some of the read's bytes
                        if not self._submitted[j]:
                            self._submit(j)
                        futures.append(block.futures[j])
                assert block.buffer is not None
                taken.append((block.offset, block.buffer, futures))
                block.served += hi - lo
                if block.served >= block.expected:  # every expected read took it
                    self._drop(block)
            return taken

    def _drop(self, block: _Block) -> None:
        """Forget ``block`` (the caller holds the lock; readers keep their slices)."""
        self._live.pop(block.index, None)
        self._held -= block.held
        block.held = 0
        block.buffer, block.futures, block.dropped = None, {}, True

    def read_at(self, nbytes: int, offset: int) -> pa.Buffer:
        """``nbytes`` bytes from ``offset`` (fewer at the end of the object)."""
        nbytes = max(0, min(nbytes, self.size - offset))
        taken = self._take(offset, nbytes) if nbytes else []
        if not taken:
            self.fallback_reads += 1
            return _fetch(self.stream, nbytes, offset)
        parts = []
        for start, buffer, futures in taken:
            for future in futures:
                future.result()  # a fetch's error is the read's (a reset, a 403)
            lo = max(offset, start) - start
            hi = min(offset + nbytes, start + buffer.size) - start
            parts.append(buffer.slice(lo, hi - lo))
        self._fill()
        return parts[0] if len(parts) == 1 else _joined(parts)

    def close(self) -> None:
        """Drop what was fetched ahead (running fetches finish and are dropped)."""
        with self._lock:
            self._closed = True
            for block in self._live.values():
                for future in block.futures.values():
                    future.cancel()
            for block in self._blocks:
                block.buffer, block.futures, block.held, block.dropped = None, {}, 0, True
            self._live.clear()
            self._submitted = [True] * len(self._requests)
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
    ``row_groups``' ``columns`` from a :class:`RangedFile` over ``stream``. Close both.

    A row group whose selected column chunks hold more than :data:`STREAM_ROW_GROUP_BYTES`
    is read through Parquet's buffered column streams (:data:`STREAM_BUFFER_BYTES` at a
    time, as it decodes) from blocks of at most :data:`PIECE_BYTES` (:func:`pieces`),
    fetched in the order the decode needs them (:func:`need_order`): its first batch
    decodes once the first piece of each column chunk is in, and the bytes held stay
    within :data:`AHEAD_BYTES`. Read unbuffered, Parquet reads each column chunk whole
    before decoding any of it: a 1 GB row group was fetched whole, the cores idle
    meanwhile, before its first batch, and held whole. Smaller row groups are read a
    column chunk at a time, each chunk a slice of one fetched block (no copy)."""
    ranked = ranked_chunks(pf.metadata, row_groups, columns)
    chunks = [(start, length) for start, length, _ in ranked]
    group_bytes: dict[int, int] = {}
    for _, length, rank in ranked:
        group_bytes[rank] = group_bytes.get(rank, 0) + length
    streamed = max(group_bytes.values(), default=0) > STREAM_ROW_GROUP_BYTES
    piece = request_bytes(sum(group_bytes.values()), streamed)
    cut = blocks(chunks, piece=piece)
    ranged = RangedFile(stream, pieces(cut, piece) if streamed else cut, concurrency,
                        ahead_bytes=AHEAD_BYTES, reads=chunks, piece=piece,
                        ranks=[rank for _, _, rank in ranked])
    ranged.streamed = streamed
    reader = ParquetReader()
    try:
        reader.open(pa.PythonFile(ranged, mode="r"), metadata=pf.metadata, pre_buffer=False,
                    buffer_size=STREAM_BUFFER_BYTES if streamed else 0,
                    arrow_extensions_enabled=True, binary_type=BINARY_TYPE,
                    list_type=LIST_TYPE)
    except BaseException:
        ranged.close()
        raise
    return reader, ranged


DECODE_AHEAD = 4
"""Batches a streamed split (:func:`ranged_reader`) decodes ahead of its reader thread."""


def decoded_ahead(batches: Iterator[pa.RecordBatch], ahead: int = DECODE_AHEAD
                  ) -> Iterator[pa.RecordBatch]:
    """``batches``, in order, pulled by a thread of their own up to ``ahead`` batches
    ahead of the caller, so Parquet's decode threads go on decoding while the reader
    thread processes and hands off what came before (a split of one 1 GB row group is one
    reader's: decoded on demand, Arrow's threads waited for the reader between calls).
    An error of ``batches`` is raised here, in order; closing this generator stops the
    thread (after the decode call it is in) before it returns."""
    import queue

    from icefloe.local.queues import DONE, Failure, put

    items: queue.Queue[object] = queue.Queue(max(1, ahead))
    stop = threading.Event()

    def run() -> None:
        try:
            for batch in batches:
                if not put(items, batch, stop):
                    return
            put(items, DONE, stop)
        except BaseException as exc:  # handed to the caller, raised there
            put(items, Failure(exc), stop)

    thread = threading.Thread(target=run, name="icefloe-decode-ahead", daemon=True)
    thread.start()
    try:
        while (item := items.get()) is not DONE:
            if isinstance(item, Failure):
                raise item.exc
            yield item
    finally:
        stop.set()
        thread.join()


def ranged_batches(opened: ParquetFile, row_groups: list[int], split: FileSplit,
                   batch_size: int, plan: FilePlan, prefetcher: Prefetcher
                   ) -> Iterator[pa.RecordBatch]:
    """:func:`~icefloe.reader.ranges.parquet_batches` of ``opened`` (a remote file), its
    column chunks fetched ahead through a :class:`RangedFile` with ``prefetcher``'s
    concurrency (closed at the end, also when the consumer stops early; its requests
    counted in ``prefetcher.stats``); a streamed split's batches decoded ahead of the
    caller (:func:`decoded_ahead`)."""
    reader, ranged = ranged_reader(opened.reader, opened.stream, row_groups,
                                   column_indices(opened.reader, plan),
                                   prefetcher.concurrency)
    try:
        batches = parquet_batches(reader, row_groups, split, batch_size, plan)
        yield from decoded_ahead(batches) if ranged.streamed else batches
    finally:
        reader.close()
        ranged.close()
        stats = prefetcher.stats
        stats.ranged_requests += ranged.requests
        stats.streamed_splits += ranged.streamed
        stats.ranged_max_held_bytes = max(stats.ranged_max_held_bytes, ranged.max_held_bytes)
