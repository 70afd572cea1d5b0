"""Large Parquet splits on an object store read their column chunks through a
:class:`~icefloe.reader.ranged.RangedFile`: the ranges fetched ahead, and every read served
either from them or from the file itself. Here on local files (the file object is the
same Arrow interface S3's is); the S3 read is in tests/objectstore/test_io_prefetch.py.
The oracle is PyArrow's own ``pq.read_table`` of the same row groups and columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow._parquet import ParquetReader

from icefloe.reader import ranged as ranged_module
from icefloe.reader.ranged import (
    MAX_REQUEST_BYTES,
    PIECE_BYTES,
    SPLIT_REQUESTS,
    RangedFile,
    blocks,
    chunk_ranges,
    ranged_reader,
    request_bytes,
    requests,
)

ROWS = 40_000


@pytest.fixture(scope="module")
def parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four row groups of three columns, one dictionary-encoded."""
    rng = np.random.default_rng(7)
    table = pa.table({"id": np.arange(ROWS), "value": rng.standard_normal(ROWS),
                      "kind": pa.array(["a", "b", "c", "d"] * (ROWS // 4))})
    path = tmp_path_factory.mktemp("ranged") / "t.parquet"
    pq.write_table(table, path, row_group_size=ROWS // 4)
    return path


def _open(path: Path) -> tuple[ParquetReader, Any]:
    stream = pa.OSFile(str(path))
    pf = ParquetReader()
    pf.open(stream, pre_buffer=False)
    return pf, stream


def test_blocks_merge_near_ranges_and_keep_long_ones_whole() -> None:
    assert blocks([(0, 10), (15, 10), (100, 5)], gap=5, piece=100) == [(0, 25), (100, 5)]
    assert blocks([], gap=5, piece=10) == []
    # adjacent ranges are not merged past the piece size: a block ends where a range does
    assert blocks([(0, 60), (60, 60), (120, 30), (150, 10)], gap=0, piece=100) == [
        (0, 60), (60, 100)]
    # a range longer than a piece is one block (fetched in several requests into one buffer)
    assert blocks([(0, 250)], gap=0, piece=100) == [(0, 250)]
    assert blocks([(0, 60), (60, 250), (310, 10)], gap=0, piece=100) == [
        (0, 60), (60, 250), (310, 10)]
    assert requests([(0, 60), (60, 250), (310, 10)], piece=100) == [
        (0, 0, 60), (1, 0, 100), (1, 100, 100), (1, 200, 50), (2, 0, 10)]


@pytest.mark.parametrize("piece_of_longest", [2.0, 0.3])
def test_every_column_chunk_lies_in_one_block(parquet: Path, piece_of_longest: float) -> None:
    """So Parquet's read of it is a slice of one fetched buffer, not a copy of several,
    whether several chunks fit in a piece or a chunk takes several requests."""
    pf, _ = _open(parquet)
    chunks = chunk_ranges(pf.metadata, [0, 1, 2, 3], None)
    piece = int(piece_of_longest * max(n for _, n in chunks))
    cut = blocks(chunks, gap=0, piece=piece)
    assert len(cut) < len(chunks) if piece_of_longest > 1 else len(cut) == len(chunks)
    for start, length in chunks:
        assert sum(s <= start and start + length <= s + n for s, n in cut) == 1


@pytest.mark.parametrize(("row_groups", "columns"), [([0, 1, 2, 3], None), ([1, 3], [0, 2]),
                                                     ([2], [1])])
def test_reads_what_pyarrow_reads_from_fetched_ranges_only(
        parquet: Path, row_groups: list[int], columns: list[int] | None) -> None:
    pf, stream = _open(parquet)
    names = None if columns is None else [pf.metadata.schema.column(c).name for c in columns]
    expected = pq.ParquetFile(parquet).read_row_groups(row_groups, columns=names)
    wanted = chunk_ranges(pf.metadata, row_groups, columns)
    # tiny pieces, a gap of 0: many requests, each column chunk fetched in several, the
    # chunks read by Arrow's threads in any order
    reader, ranged = _ranged(pf, stream, row_groups, columns, piece=1000)
    got = pa.Table.from_batches(list(reader.iter_batches(7_000, row_groups, columns,
                                                         use_threads=True)))
    assert got.equals(expected)
    assert ranged.fallback_reads == 0  # every column chunk came from fetched blocks
    assert ranged.requests == len(requests(blocks(wanted, gap=0, piece=1000), 1000)) \
        > len(wanted)
    fetched = sum(n for _, n in wanted)
    assert fetched < parquet.stat().st_size or columns is None
    reader.close()
    ranged.close()


def _ranged(pf: ParquetReader, stream: Any, row_groups: list[int], columns: list[int] | None,
            piece: int, ahead: int = 1 << 30) -> tuple[ParquetReader, RangedFile]:
    chunks = chunk_ranges(pf.metadata, row_groups, columns)
    ranged = RangedFile(stream, blocks(chunks, gap=0, piece=piece), concurrency=4,
                        ahead_bytes=ahead, reads=chunks, piece=piece)
    reader = ParquetReader()
    reader.open(pa.PythonFile(ranged, mode="r"), metadata=pf.metadata, pre_buffer=False)
    return reader, ranged


def test_a_read_past_the_ahead_limit_fetches_what_it_needs(parquet: Path) -> None:
    pf, stream = _open(parquet)
    reader, ranged = _ranged(pf, stream, [0, 1, 2, 3], None, piece=2000, ahead=1)
    got = pa.Table.from_batches(list(reader.iter_batches(10_000, [0, 1, 2, 3], None)))
    assert got.equals(pq.read_table(parquet))
    assert ranged.fallback_reads == 0


def test_request_size_grows_with_the_split_within_bounds() -> None:
    """A split is cut into at least :data:`SPLIT_REQUESTS` requests of at least a piece
    and at most :data:`MAX_REQUEST_BYTES` each; a streamed split's are pieces."""
    mib = 1 << 20
    assert request_bytes(1, streamed=False) == PIECE_BYTES
    assert request_bytes(SPLIT_REQUESTS * PIECE_BYTES, streamed=False) == PIECE_BYTES
    assert request_bytes(134 * mib, streamed=False) == 134 * mib // SPLIT_REQUESTS
    assert PIECE_BYTES < 134 * mib // SPLIT_REQUESTS < MAX_REQUEST_BYTES
    assert request_bytes(1 << 30, streamed=False) == MAX_REQUEST_BYTES
    assert request_bytes(1 << 30, streamed=True) == PIECE_BYTES


class _Recording:
    """A file without ``get_stream`` whose reads are recorded as ``(offset, nbytes)``."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        self.reads: list[tuple[int, int]] = []

    def size(self) -> int:
        return len(self.data)

    def read_at(self, nbytes: int, offset: int) -> bytes:
        self.reads.append((offset, nbytes))
        return self.data[offset:offset + nbytes]


@pytest.mark.parametrize("large", [False, True])
def test_a_large_split_is_fetched_in_fewer_larger_requests(
        parquet: Path, monkeypatch: pytest.MonkeyPatch, large: bool) -> None:
    """Scaled down (pieces of 16 KiB, at least 4 requests a split): a split of 4 row
    groups well past 4 pieces is fetched in 4-5 requests of about a quarter of it, not
    in pieces; with the largest request a piece (``large`` False: the split as small as
    the rule's floor), in pieces. Either way, what Parquet decodes is PyArrow's read."""
    piece = 16 * 1024
    monkeypatch.setattr(ranged_module, "PIECE_BYTES", piece)
    monkeypatch.setattr(ranged_module, "SPLIT_REQUESTS", 4)
    monkeypatch.setattr(ranged_module, "MAX_REQUEST_BYTES", 1 << 30 if large else piece)
    pf, _ = _open(parquet)
    split = sum(n for _, n in chunk_ranges(pf.metadata, [0, 1, 2, 3], None))
    assert split > 8 * piece
    file = _Recording(parquet)
    reader, ranged = ranged_reader(pf, file, [0, 1, 2, 3], None, concurrency=4)
    got = pa.Table.from_batches(list(reader.iter_batches(10_000, [0, 1, 2, 3], None,
                                                         use_threads=True)))
    assert got.equals(pq.read_table(parquet))
    assert ranged.fallback_reads == 0
    largest = max(n for _, n in file.reads)
    if large:
        assert largest <= split // 4 and len(file.reads) <= 5
    else:
        assert largest <= piece and len(file.reads) >= split // piece
    reader.close()
    ranged.close()


def test_reads_outside_the_ranges_go_to_the_file(parquet: Path) -> None:
    _, stream = _open(parquet)
    ranged = RangedFile(stream, [(4, 10)], concurrency=2)
    assert ranged.read_at(4, 0).to_pybytes() == b"PAR1"  # not fetched: read directly
    assert ranged.fallback_reads == 1
    assert ranged.read_at(6, 6).to_pybytes() == parquet.read_bytes()[6:12]  # from the block
    assert ranged.fallback_reads == 1
    ranged.close()


def test_a_failed_fetch_fails_the_read_that_needs_it(parquet: Path) -> None:
    class Failing:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def size(self) -> int:
            return int(self.inner.size())

        def read_at(self, nbytes: int, offset: int) -> Any:
            raise OSError(f"connection reset reading {nbytes} at {offset}")

    pf, stream = _open(parquet)
    reader, _ = ranged_reader(pf, Failing(stream), [0], None, concurrency=2)
    with pytest.raises(OSError, match="connection reset"):
        list(reader.iter_batches(10_000, [0], None))


def test_blocks_are_fetched_into_arrow_memory(parquet: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocks fetched ahead are buffers of Arrow's memory pool (which keeps freed
    memory for the next ones), not Python bytes objects mapped fresh each time: every
    read is served from inside a buffer ``pa.allocate_buffer`` returned. (Counted per
    buffer, not by the process-wide allocation, which other tests' threads can move.)"""
    allocated: list[pa.Buffer] = []
    original = pa.allocate_buffer

    def allocate(size: int) -> pa.Buffer:
        buffer = original(size)
        allocated.append(buffer)
        return buffer

    monkeypatch.setattr("icefloe.reader.ranged.pa.allocate_buffer", allocate)
    pf, stream = _open(parquet)
    chunks = chunk_ranges(pf.metadata, [0, 1, 2, 3], None)
    ranged = RangedFile(stream, blocks(chunks, gap=0, piece=4096), concurrency=1_000,
                        ahead_bytes=1 << 30, reads=chunks, piece=4096)
    assert sum(b.size for b in allocated) >= sum(n for _, n in chunks)
    data = parquet.read_bytes()
    for start, length in chunks:
        got = ranged.read_at(length, start)
        assert got.to_pybytes() == data[start:start + length]
        assert any(b.address <= got.address and got.address + got.size <= b.address + b.size
                   for b in allocated), f"the read at {start} is not in a pool buffer"
    assert ranged.fallback_reads == 0
    ranged.close()


def test_a_column_chunk_longer_than_a_piece_is_read_without_a_copy(parquet: Path) -> None:
    """A chunk fetched in several requests lands in one buffer: Parquet's read of it is a
    slice of that buffer (two reads of it share it), not a join of pieces into a new one
    (which, on 256 MB files of 10-20 MB chunks, copied ~250 MB per read under the GIL)."""
    pf, stream = _open(parquet)
    start, length = max(chunk_ranges(pf.metadata, [0, 1, 2, 3], None), key=lambda c: c[1])
    piece = length // 3
    ranged = RangedFile(stream, blocks([(start, length)], gap=0, piece=piece),
                        concurrency=8, reads=[(start, length), (start, length)], piece=piece)
    first, second = ranged.read_at(length, start), ranged.read_at(length, start)
    assert ranged.requests == 4  # the chunk came in pieces
    assert first.to_pybytes() == parquet.read_bytes()[start:start + length]
    assert first.address == second.address  # one buffer, sliced
    assert ranged.fallback_reads == 0
    ranged.close()


def test_an_object_shorter_than_its_metadata_fails_the_read(parquet: Path) -> None:
    """A block past the object's end (a truncated file) fails the read that needs it
    rather than serving bytes that were never fetched."""
    _, stream = _open(parquet)
    size = parquet.stat().st_size
    ranged = RangedFile(stream, [(size - 100, 200)], concurrency=2)
    with pytest.raises(OSError, match="read 100 of 200 bytes"):
        ranged.read_at(50, size - 100)
    ranged.close()


def test_decoded_ahead_keeps_order_raises_in_place_and_stops_when_closed() -> None:
    """A streamed split's batches are pulled by a thread of their own: the caller gets
    them in order, an error where it happened, and closing stops the thread."""
    import threading

    from icefloe.reader.ranged import decoded_ahead

    batches = [pa.record_batch({"x": [i]}) for i in range(10)]
    assert [b["x"][0].as_py() for b in decoded_ahead(iter(batches), ahead=2)] == list(range(10))

    def failing() -> Any:
        yield batches[0]
        raise OSError("connection reset")

    got = decoded_ahead(failing())
    assert next(got) is batches[0]
    with pytest.raises(OSError, match="connection reset"):
        next(got)

    pulled = threading.Event()

    def endless() -> Any:
        i = 0
        while True:
            pulled.set()
            yield pa.record_batch({"x": [i]})
            i += 1

    gen = decoded_ahead(endless(), ahead=1)
    next(gen)
    gen.close()  # joins the thread
    assert not any(t.name == "icefloe-decode-ahead" for t in threading.enumerate())
