"""Decoding batches of several ``batch_size`` (:data:`icefloe.reader.batches.DECODE_ROWS`
rows) and handing them on as ``batch_size`` slices gives the batches (boundaries and
rows) a decode of ``batch_size`` rows gives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow._parquet import ParquetReader

from icefloe.reader.batches import sliced as _sliced


@pytest.mark.parametrize(("rows", "row_group", "size", "decode"), [
    (1000, 300, 64, 128), (1000, 300, 100, 1000), (1000, 1000, 64, 64 * 3),
    (129, 50, 64, 128), (128, 128, 64, 128), (0, 10, 64, 128),
])
def test_slices_are_the_direct_decode(tmp_path: Path, rows: int, row_group: int, size: int,
                                      decode: int) -> None:
    table = pa.table({"id": list(range(rows)),
                      "s": [None if i % 7 == 0 else f"v{i}" for i in range(rows)]},
                     schema=pa.schema([("id", pa.int64()), ("s", pa.string())]))
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=row_group)

    def batches(n: int) -> list[pa.RecordBatch]:
        reader = ParquetReader()
        reader.open(pa.OSFile(str(path)))
        groups = list(range(reader.metadata.num_row_groups))
        return list(reader.iter_batches(n, groups, None, use_threads=False))

    direct = batches(size)
    sliced = list(_sliced(batches(decode), size))
    assert [b.num_rows for b in sliced] == [b.num_rows for b in direct]
    assert all(a.equals(b) for a, b in zip(sliced, direct, strict=True))
    assert pa.Table.from_batches(sliced, table.schema).equals(table)


def test_a_split_decodes_about_256k_rows_per_call(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Parquet decodes about 262,144 rows per call (each call's buffers grow by
    reallocation: fewer calls, fewer copies; RESULTS.md, session 14), 196,608 with the
    default 65,536-row batches (a multiple clear of a power of two: session 15), handed on
    as ``batch_size`` slices: 600,000 rows in 3 row groups are 4 decode calls, not 10 of
    65,536."""
    import icefloe.reader.ranges as ranges
    from icefloe.reader.batches import decode_rows

    rows = 600_000
    table = pa.table({"id": pa.array(range(rows), pa.int64())})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=200_000)
    decoded: list[int] = []

    def spy(batches: Any, size: int) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            decoded.append(batch.num_rows)
            yield from _sliced([batch], size)

    monkeypatch.setattr(ranges, "sliced", spy)
    reader = ParquetReader()
    reader.open(pa.OSFile(str(path)))
    plan = SimpleNamespace(all_columns=True)
    split = SimpleNamespace(length=path.stat().st_size)
    out = list(ranges.parquet_batches(reader, [0, 1, 2], split, 65536,  # type: ignore[arg-type]
                                      plan, use_threads=False))  # type: ignore[arg-type]
    assert decode_rows(65536) == 196_608
    assert decoded == [196_608] * 3 + [rows - 3 * 196_608]
    assert all(b.num_rows == 65536 for b in out[:-1]) and 0 < out[-1].num_rows <= 65536
    assert pa.Table.from_batches(out).equals(pq.read_table(path))  # Arrow's own read


@pytest.mark.parametrize("batch_size", [1, 7, 1000, 8192, 16384, 32768, 65536, 100_000,
                                        131_072, 200_000, 262_144, 300_000, 1 << 20])
def test_decode_calls_are_whole_batches_clear_of_a_power_of_two(batch_size: int) -> None:
    from icefloe.reader.batches import DECODE_ROWS, decode_rows, has_headroom

    rows = decode_rows(batch_size)
    assert rows % batch_size == 0 and rows >= batch_size
    if batch_size <= DECODE_ROWS // 2:  # a multiple with headroom exists up to 2x
        assert has_headroom(rows) and rows <= 2 * DECODE_ROWS
    if batch_size > DECODE_ROWS // 2 and not has_headroom(batch_size):
        assert rows == batch_size  # larger power-of-two batches: one per call, as before
    assert not has_headroom(262_144) and not has_headroom(258_048)
    assert has_headroom(196_608) and has_headroom(327_680)


def _copied_bytes(log: str) -> int:
    """Bytes Arrow's memory pool copied growing buffers that held data (its
    ``log_memory_allocations`` lines ``Reallocate: old_size = A, new_size = B, ...``)."""
    copied = 0
    for line in log.splitlines():
        if line.startswith("Reallocate:"):
            fields = dict(part.strip().split(" = ") for part in line[11:].split(","))
            old, new = int(fields["old_size"]), int(fields["new_size"])
            if 0 < old < new:
                copied += old
    return copied


def test_a_decode_clear_of_a_power_of_two_does_not_copy_its_values(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The cause of :data:`icefloe.reader.batches.HEADROOM`, on Arrow's own memory pool's
    log: decode calls of 262,144 rows double their int64 value buffer near the end of
    every call (a copy of the column), calls of ``decode_rows(65536)`` rows do not."""
    from icefloe.reader.batches import decode_rows

    rows = 4 * 262_144
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64())}), path,
                   row_group_size=rows)

    def copied(n: int) -> int:
        capfd.readouterr()
        pa.log_memory_allocations(True)
        try:
            reader = ParquetReader()  # takes the (logging) default pool now
            reader.open(pa.OSFile(str(path)))
            got = sum(b.num_rows for b in reader.iter_batches(n, [0], None,
                                                               use_threads=False))
        finally:
            pa.log_memory_allocations(False)
        assert got == rows
        out = capfd.readouterr()
        return _copied_bytes(out.out + out.err)

    power = copied(262_144)
    clear = copied(decode_rows(65536))
    assert power >= rows * 8 // 2  # at least half the column's 8 MB copied again
    assert clear < power // 4
