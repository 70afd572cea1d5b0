"""Manifests decoded into Arrow columns, and the pieces of planning that work on them.

Runs on the enumerator. The contract between the decoders and planning
(``decode_manifest``: one manifest file's bytes -> a ``pyarrow.RecordBatch`` of its live
data files, see :data:`BASE_COLUMNS` and :func:`stats_columns`) has two implementations:

- the compiled one, ``icefloe.enumerator._native_manifest`` (an extension module built
  with the package where a wheel or a compiler exists), which releases the GIL while it
  decodes, so :func:`decode_in_order` runs several manifests at once on a thread pool;
- the pure-Python one here (:func:`decode_manifest`), built on the generated block decoder
  of :mod:`icefloe.enumerator.manifest_decoder` (same rows, same values), which holds the
  GIL, so its manifests are decoded one at a time in the calling thread.

:func:`native_decoder` picks the compiled one when it can be imported, unless the
environment variable ``ICEFLOE_NATIVE_DECODER=0`` forces the fallback (for tests, and for a
user who hits a bug in the compiled decoder).

Planning on the columns (:mod:`icefloe.enumerator.planner`): each distinct raw
``partition`` value is decoded once per writer schema (:class:`PartitionValues`) and
partition pruning runs once per distinct value; :class:`MetricsPrefilter` drops, with
array operations on the decoded bounds, only files PyIceberg's
``_InclusiveMetricsEvaluator`` would drop too (integer-like columns, a predicate or an AND
of predicates), so the evaluator then decides on the survivors alone and the result is
today's by construction.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from pyiceberg.expressions import (
    And,
    BooleanExpression,
    BoundEqualTo,
    BoundGreaterThan,
    BoundGreaterThanOrEqual,
    BoundLessThan,
    BoundLessThanOrEqual,
    BoundPredicate,
    BoundReference,
)
from pyiceberg.types import (
    DateType,
    IntegerType,
    LongType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

from icefloe.enumerator.manifest_columns import BASE_COLUMNS as BASE_COLUMNS
from icefloe.enumerator.manifest_columns import batch_schema
from icefloe.enumerator.manifest_columns import stats_columns as stats_columns
from icefloe.enumerator.manifest_decoder import column_rows, partition_decoder

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

T = TypeVar("T")
R = TypeVar("R")

NATIVE_ENV = "ICEFLOE_NATIVE_DECODER"
"""Environment variable: ``0`` forces the pure-Python decoder (read at each plan)."""

Decoder = Callable[..., "pa.RecordBatch"]


def decode_manifest(content: bytes, *, manifest_seq: int, added_by: int | None,
                    added_only: bool, stats_ids: tuple[int, ...]) -> pa.RecordBatch:
    """The live data files of one manifest file's bytes as one Arrow batch (pure Python).

    Rows: what :func:`~icefloe.enumerator.manifest_decoder.iter_live_data_files` yields for
    a manifest of sequence number ``manifest_seq`` added by ``added_by`` (with
    ``added_only``, only the files ``added_by`` added), in file order. Columns:
    :func:`batch_schema`; ``partition`` is the raw Avro bytes of each entry's partition
    record; with ``stats_ids == ()`` the stats maps are stepped over, never built. Holds
    the GIL throughout (the compiled decoder is the one that runs in parallel).

    Raises:
        ValueError: not an Avro file, an unknown codec or status, or a bad sync marker.
        EOFError: the bytes end inside a block.
    """
    import pyarrow as pa

    _, rows = column_rows(content, manifest_seq, added_by, stats_ids, added_only=added_only)
    schema = batch_schema(stats_ids)
    if not rows:
        return pa.RecordBatch.from_pylist([], schema=schema)
    columns = zip(*rows, strict=True)
    return pa.RecordBatch.from_arrays(
        [pa.array(column, type=field.type) for column, field in zip(columns, schema,
                                                                     strict=True)],
        schema=schema)


def native_decoder() -> Decoder | None:
    """The compiled ``decode_manifest`` of ``icefloe.enumerator._native_manifest``, or None
    when it is not installed (no wheel for this platform, no compiler at install) or
    ``ICEFLOE_NATIVE_DECODER=0`` is set. Imported on first use."""
    if os.environ.get(NATIVE_ENV, "").strip() == "0":
        return None
    try:
        from icefloe.enumerator import _native_manifest
    except ImportError:
        return None
    decode: Decoder = _native_manifest.decode_manifest
    return decode


def native_split_ids() -> Callable[..., pa.Array] | None:
    """The compiled module's ``split_ids(snapshot_id, paths, path_index, starts,
    lengths)`` (split ids of many splits at once, byte-identical to
    :func:`icefloe.splits.split.split_id_maker`, hashed with the GIL released), when the
    compiled decoder is in use and has it; else None (ids are made one by one)."""
    if native_decoder() is None:
        return None
    from icefloe.enumerator import _native_manifest

    split_ids: Callable[..., pa.Array] | None = getattr(_native_manifest, "split_ids", None)
    return split_ids


def decoder() -> tuple[Decoder, bool]:
    """The decoder planning uses now, and whether it releases the GIL (the compiled one)."""
    native = native_decoder()
    if native is not None:
        return native, True
    return decode_manifest, False


_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:  # threads start on first use, not at import
        _POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                   thread_name_prefix="icefloe-decode")
    return _POOL


def decode_in_order(fn: Callable[[T], R], items: Iterable[T], parallel: bool,
                    lookahead: int = 0) -> Iterator[R]:
    """``map(fn, items)``, results in order. With ``parallel`` (``fn`` releases the GIL for
    most of its work), on the decoding pool, at most ``lookahead`` (default: twice the
    pool's threads) submitted ahead of the one the caller is iterating, so memory is
    bounded by that many results; otherwise in the calling thread, lazily."""
    if not parallel:
        yield from map(fn, items)
        return
    pool = _pool()
    ahead = lookahead or 2 * pool._max_workers
    pending: list[Future[R]] = []
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) > ahead:
                yield pending.pop(0).result()
        while pending:
            yield pending.pop(0).result()
    finally:  # the caller stopped early (or raised): drop what is not needed
        for future in pending:
            future.cancel()


class PartitionValues:
    """Raw ``partition`` bytes -> partition values, each distinct value decoded once.

    One per plan (or per planner); keyed by the manifest's writer schema and the bytes
    (byte-equal records of one schema are equal partitions). At most ``max_entries``
    values are kept: past that the memo starts again empty (a plan over more distinct
    partitions than that decodes some twice; nothing grows without bound).
    """

    def __init__(self, max_entries: int = 1 << 16) -> None:
        self.max_entries = max_entries
        self._memo: dict[tuple[str, bytes], tuple[Any, ...]] = {}

    def decode(self, avro_schema: str, raw: bytes) -> tuple[Any, ...]:
        key = (avro_schema, raw)
        value = self._memo.get(key)
        if value is None:
            if len(self._memo) >= self.max_entries:
                self._memo.clear()
            value = self._memo[key] = partition_decoder(avro_schema)(raw)
        return value

    def values(self, avro_schema: str, distinct: pa.Array) -> list[tuple[Any, ...]]:
        """The partition values of each raw value of ``distinct`` (a binary array)."""
        return [self.decode(avro_schema, raw) for raw in distinct.to_pylist()]

    def column(self, avro_schema: str, partitions: pa.Array
               ) -> tuple[list[tuple[Any, ...]], np.ndarray]:
        """The distinct partition values of a ``partition`` column (first-seen order) and,
        per row, the index of its value among them."""
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(partitions)
        return (self.values(avro_schema, encoded.dictionary),
                encoded.indices.to_numpy(zero_copy_only=False))


_INT_WIDTHS: dict[type, int] = {IntegerType: 4, DateType: 4, LongType: 8, TimeType: 8,
                                TimestampType: 8, TimestamptzType: 8}


class _Bound(NamedTuple):
    """One prunable predicate: field ``field_id`` (``width``-byte little-endian ints)."""

    field_id: int
    width: int
    op: str
    value: int


class MetricsPrefilter:
    """Drops files a bound row filter cannot match, from the decoded bounds, in arrays.

    Only what PyIceberg's ``_InclusiveMetricsEvaluator`` (which sees the same stats)
    drops too: the filter must be one comparison (``<``, ``<=``, ``>``, ``>=``, ``=``) of
    an integer, date, time or timestamp column with a literal, or an AND of such
    comparisons (other conjuncts are left to the evaluator), and a file is dropped when
    its record count is positive and a bound of exactly the column's width proves the
    comparison false for every value (the evaluator's own rule for these types; NaN
    bounds do not exist for them). Every other file is a survivor, for the evaluator.

    Args:
        bound_expr: the evaluator's bound expression (``_InclusiveMetricsEvaluator.expr``).
    """

    def __init__(self, bound_expr: BooleanExpression) -> None:
        self.bounds: list[_Bound] = []
        for conjunct in _conjuncts(bound_expr):
            bound = _prunable(conjunct)
            if bound is not None:
                self.bounds.append(bound)

    def __bool__(self) -> bool:
        return bool(self.bounds)

    def keep_mask(self, batch: pa.RecordBatch) -> np.ndarray:
        """Per row of ``batch`` (decoded with every field id of :attr:`bounds` among its
        stats ids): False where the file is proven not to match."""
        import numpy as np

        records = batch.column("record_count").to_numpy(zero_copy_only=False)
        drop = np.zeros(batch.num_rows, dtype=bool)
        for b in self.bounds:
            if b.op in ("lt", "le", "eq"):
                lower = _int_values(batch.column(f"lower_{b.field_id}"), b.width)
                if lower is not None:
                    values, known = lower
                    proven = values >= b.value if b.op == "lt" else values > b.value
                    drop |= known & proven
            if b.op in ("gt", "ge", "eq"):
                upper = _int_values(batch.column(f"upper_{b.field_id}"), b.width)
                if upper is not None:
                    values, known = upper
                    proven = values <= b.value if b.op == "gt" else values < b.value
                    drop |= known & proven
        return ~(drop & (records > 0))


def _conjuncts(expr: BooleanExpression) -> Iterator[BooleanExpression]:
    if isinstance(expr, And):
        yield from _conjuncts(expr.left)
        yield from _conjuncts(expr.right)
    else:
        yield expr


_OPS: dict[type, str] = {BoundLessThan: "lt", BoundLessThanOrEqual: "le",
                         BoundGreaterThan: "gt", BoundGreaterThanOrEqual: "ge",
                         BoundEqualTo: "eq"}


def _prunable(expr: BooleanExpression) -> _Bound | None:
    op = _OPS.get(type(expr))
    if op is None or not isinstance(expr, BoundPredicate):
        return None
    term = expr.term
    if not isinstance(term, BoundReference):
        return None
    field = term.ref().field
    width = _INT_WIDTHS.get(type(field.field_type))
    value = getattr(expr, "literal", None)
    value = getattr(value, "value", None)
    if width is None or not isinstance(value, int) or isinstance(value, bool):
        return None
    if not -(1 << 63) <= value < (1 << 63):
        return None
    return _Bound(field.field_id, width, op, value)


def _int_values(column: pa.Array, width: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The little-endian signed ints of a binary column, and where they are known (not
    null, exactly ``width`` bytes); None when no value is known."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.type != pa.binary():
        column = column.cast(pa.binary())
    lengths = pc.binary_length(column).fill_null(0).to_numpy(zero_copy_only=False)
    known = lengths == width
    if not known.any():
        return None
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32,
                            count=len(column) + 1, offset=column.offset * 4)[:-1]
    data = np.frombuffer(column.buffers()[2], dtype=np.uint8)
    starts = np.where(known, offsets, 0).astype(np.int64)
    gathered = data[np.minimum(starts[:, None] + np.arange(width), len(data) - 1)]
    values = np.ascontiguousarray(gathered).view(f"<i{width}").reshape(-1).astype(np.int64)
    return values, known
