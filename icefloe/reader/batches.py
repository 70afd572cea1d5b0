"""Stage 7 of the read pipeline, first half: decoded batches cut to output batches.

Runs on a worker.

Parquet decodes :data:`DECODE_ROWS` rows per call (a multiple of ``batchSize``); the
decoded batch is handed on as zero-copy slices of ``batchSize`` rows (:func:`sliced`).
Combining the batches of many small files is the second half (:mod:`icefloe.reader.groups`,
:mod:`icefloe.reader.runs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

DECODE_ROWS = 262144
"""Rows Parquet decodes per call. Each call's column readers grow their value buffers
(strings' data, fixed-width values) by reallocation, a copy of what the call decoded so
far each time: the fewer calls, the fewer copies. Counted with callgrind on 256 MB x 16
row groups (one thread, the whole file): 10.96 G instructions at 131072 rows, 10.43 G
at 262144, 10.11 G decoding whole row groups as PyArrow's dataset scan does (its
buffers then zeroed by the kernel instead: +0.2 s of system CPU per read); RESULTS.md,
"Defaults matrix", session 14: the CPU of multi-row-group reads. Decoding 64k-row batches
took ~6% more CPU than 128k on the 20M-row read (RESULTS.md, Backfill)."""


def decode_rows(batch_size: int) -> int:
    """Rows per Parquet decode call for output batches of ``batch_size`` rows: the
    largest multiple of ``batch_size`` up to :data:`DECODE_ROWS` (at least one batch)."""
    return batch_size * max(1, DECODE_ROWS // batch_size)


def sliced(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """``batches`` cut into zero-copy slices of at most ``size`` rows: with decoded batches
    of a multiple of ``size`` rows, the slices are the batches a decode of ``size`` rows
    gives (Arrow's batches span row groups; only the read's last batch is short)."""
    for batch in batches:
        n = batch.num_rows
        if n <= size:
            yield batch
        else:
            for offset in range(0, n, size):
                yield batch.slice(offset, size)
