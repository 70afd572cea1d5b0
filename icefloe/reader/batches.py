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

DECODE_ROWS = 131072
"""Rows Parquet decodes per call (PyArrow's dataset scan decodes 128k-row batches too).
Decoding 64k-row batches took ~6% more CPU on the 20M-row read (alternated processes,
RESULTS.md, Backfill: per-call set-up of the column readers and builders)."""


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
