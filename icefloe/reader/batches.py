"""Stage 7 of the read pipeline, first half: decoded batches cut to output batches.

Runs on a worker.

Parquet decodes about :data:`DECODE_ROWS` rows per call (a multiple of ``batchSize``,
clear of a power of two: :func:`decode_rows`); the decoded batch is handed on as zero-copy
slices of ``batchSize`` rows (:func:`sliced`).
Combining the batches of many small files is the second half (:mod:`icefloe.reader.groups`,
:mod:`icefloe.reader.runs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache

import pyarrow as pa

DECODE_ROWS = 262144
"""Rows Parquet decodes per call, about (:func:`decode_rows`). Each call's column readers
grow their value buffers (strings' data, fixed-width values) by reallocation, a copy of
what the call decoded so far each time: the fewer calls, the fewer copies. Counted with
callgrind on 256 MB x 16 row groups (one thread, the whole file): 10.96 G instructions at
131072 rows, 10.43 G at 262144, 10.11 G decoding whole row groups as PyArrow's dataset
scan does (its buffers then zeroed by the kernel instead: +0.2 s of system CPU per read);
RESULTS.md, "Defaults matrix", session 14: the CPU of multi-row-group reads. Decoding
64k-row batches took ~6% more CPU than 128k on the 20M-row read (RESULTS.md, Backfill)."""

HEADROOM = 8
"""A decode call of ``n`` rows must leave at least ``n / HEADROOM`` rows between ``n`` and
the next power of two (:func:`has_headroom`). Parquet's record reader sizes a call's
fixed-width value buffers to a power of two of values, and a call of exactly a power of
two rows (262,144) outgrows them near its end: they double, a copy of every value the call
decoded, in every call (Arrow's memory pool's log: 170 MB copied per 2.56M-row row group of
256 MB x 4 at 262,144 rows, 108 MB at 327,680, 101 MB at 196,608; a call of 258,048 rows,
4,096 short of the power, still copies; RESULTS.md, "Session 15 (issue 30): the
power-of-two decode")."""


def has_headroom(rows: int) -> bool:
    """Whether a decode call of ``rows`` rows stays clear of its buffers' power-of-two
    capacity (see :data:`HEADROOM`)."""
    capacity = 1 << max(rows - 1, 0).bit_length()  # the next power of two >= rows
    return capacity - rows >= rows // HEADROOM


@lru_cache(maxsize=64)  # called per split; a read has one batch size
def decode_rows(batch_size: int) -> int:
    """Rows per Parquet decode call for output batches of ``batch_size`` rows: the largest
    multiple of ``batch_size`` up to :data:`DECODE_ROWS` with headroom
    (:func:`has_headroom`); when none has (``batch_size`` a power of two above a quarter
    of it), the smallest larger one up to twice :data:`DECODE_ROWS` (3 batches of
    131,072); else (larger batches) the largest multiple up to :data:`DECODE_ROWS`, at
    least one batch, as before session 15."""
    most = max(1, DECODE_ROWS // batch_size)
    for n in range(most, 0, -1):
        if has_headroom(n * batch_size):
            return n * batch_size
    for n in range(most + 1, 2 * DECODE_ROWS // batch_size + 1):
        if has_headroom(n * batch_size):
            return n * batch_size
    return most * batch_size


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
