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


def test_a_split_decodes_256k_rows_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    """Parquet decodes 262,144 rows per call (each call's buffers grow by reallocation:
    fewer calls, fewer copies; RESULTS.md, session 14), handed on as ``batch_size``
    slices: 600,000 rows in 3 row groups are 3 decode calls, not 5 of 131,072."""
    import icefloe.reader.ranges as ranges
    from icefloe.reader.batches import DECODE_ROWS

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
    assert DECODE_ROWS == 262_144
    assert decoded == [262_144, 262_144, rows - 2 * 262_144]
    assert all(b.num_rows <= 65536 for b in out)
    assert pa.Table.from_batches(out).equals(pq.read_table(path))  # Arrow's own read
