"""Decoding batches of several ``batch_size`` (:data:`icefloe.reader.batches.DECODE_ROWS`
rows) and handing them on as ``batch_size`` slices gives the batches (boundaries and
rows) a decode of ``batch_size`` rows gives."""

from __future__ import annotations

from pathlib import Path

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
