"""SplitReader: one split -> Arrow RecordBatches. Runs on a worker.

Per split: open the Parquet file, pick the row groups whose first byte lies in the
split's range, project columns by Iceberg field id (so files written before a
rename / add / drop / type promotion read correctly), fill identity-partition
values missing from the file from split metadata (once per split), drop rows that
position deletes, deletion vectors and equality deletes remove, apply the residual
row filter, add metadata columns. Batches hold at most ``batch_size`` rows.

Progress: :meth:`SplitReader.read_progress` pairs each batch with the number of
source records of the split (before deletes and filters) consumed after it, the
value :meth:`FileSplit.with_position` takes to resume.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow._parquet import ParquetReader
from pyiceberg.io.pyarrow import expression_to_pyarrow, pyarrow_to_schema
from pyiceberg.schema import Schema, prune_columns
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import ListType, MapType

from icefloe.errors import DataFileError, SplitError
from icefloe.reader.context import ROW_LINEAGE_FIELD_IDS, ReadContext
from icefloe.reader.deletes import DeleteLoader, equality_keep_mask
from icefloe.reader.files import FileOpener
from icefloe.reader.prefetch import Prefetcher, PrefetchWindow, resolve_concurrency
from icefloe.reader.projection import to_requested_schema
from icefloe.reader.runs import RunScanner, can_batch
from icefloe.splits.split import FileSplit

if TYPE_CHECKING:
    from icefloe.reader.changelog import ChangeReader

log = logging.getLogger(__name__)


def row_group_start(rg: Any) -> int:
    """The first byte of a Parquet row group (its first column chunk's dictionary or data
    page): a split whose byte range holds it reads the row group."""
    col = rg.column(0)
    offsets = [col.data_page_offset]
    if col.has_dictionary_page and col.dictionary_page_offset:
        offsets.append(col.dictionary_page_offset)
    return int(min(offsets))


_PLAN_CACHE_SIZE = 64

MIN_RUN = 4
"""Fewer consecutive small whole files than this are read split by split (a run's set-up)."""

_WIDEN = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}


@dataclass(frozen=True, slots=True)
class _Widen:
    """A cast that only widens 32-bit offsets to 64-bit (string -> large_string, binary
    -> large_binary), done by :func:`_widen_offsets` without a compute-kernel call."""

    to_type: pa.DataType


_Cast: TypeAlias = "pc.CastOptions | _Widen | None"


def _cast_for(have: pa.DataType, want: pa.DataType) -> _Cast:
    """How a column of type ``have`` becomes ``want``: None (as is), an offset widening
    (:class:`_Widen`), or a safe Arrow cast."""
    if have.equals(want):
        return None
    if _WIDEN.get(have) == want:
        return _Widen(want)
    return pc.CastOptions.safe(want)


def _widen_offsets(column: pa.Array, large: pa.DataType) -> pa.Array:
    """``column`` (string or binary) as ``large`` (large_string / large_binary): its
    offsets widened to int64 by numpy into a buffer of Arrow's memory pool, validity and
    data buffers shared (no copy).

    What ``pc.cast`` does for this pair, for a fraction of the per-call cost (which,
    with thousands of one-batch files, is paid once per column per file). The new
    offsets come from Arrow's pool, not numpy's ``malloc``: glibc serves a 64k-row
    batch's 512 KiB from fresh ``mmap``/trimmed pages, and faulting them in cost ~8x
    the copy (measured; it also made the cost depend on what the process did before)."""
    validity, offsets, data = column.buffers()
    if offsets is None:  # an empty array may have no buffers
        return pc.call_function("cast", [column], pc.CastOptions.safe(large))
    n, start = len(column), column.offset
    if validity is None or start == 0:
        # only the slice's own offsets (a slice of a decoded batch, see _sliced): the
        # array starts at 0, its offsets still point into the shared data buffer
        wide = pa.allocate_buffer((n + 1) * 8)
        np.copyto(np.frombuffer(wide, dtype=np.int64),
                  np.frombuffer(offsets, dtype=np.int32, count=n + 1, offset=start * 4))
        return pa.Array.from_buffers(large, n, [validity, wide, data], column.null_count, 0)
    count = start + n + 1  # the validity bitmap is shared: keep the array's offset
    wide = pa.allocate_buffer(count * 8)
    np.copyto(np.frombuffer(wide, dtype=np.int64),
              np.frombuffer(offsets, dtype=np.int32, count=count))
    return pa.Array.from_buffers(large, n, [validity, wide, data], column.null_count, start)


def read_failed(split: FileSplit, exc: Exception) -> DataFileError:
    """The typed error for an I/O or Arrow error ``exc`` while decoding ``split``'s file."""
    return DataFileError(
        f"failed reading data file {split.file_path} of snapshot {split.snapshot_id}: "
        f"{type(exc).__name__}: {exc}")


# below this many bytes a split decodes on the calling thread: for small files Arrow's
# per-column thread tasks cost more than they save (the engine already runs readers in parallel)
_THREADED_DECODE_BYTES = 1024 * 1024

# rows Parquet decodes per call (PyArrow's dataset scan decodes 128k-row batches too): the
# decoded batch is handed on as zero-copy slices of ``batch_size`` rows. Decoding 64k-row
# batches took ~6% more CPU on the 20M-row read (alternated processes, RESULTS.md,
# Backfill: per-call set-up of the column readers and builders)
_DECODE_ROWS = 131072


def _sliced(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
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


@dataclass(frozen=True, slots=True)
class _OpenFile:
    """An open data file: the low-level Parquet reader and the stream under it."""

    reader: ParquetReader
    stream: Any

    def close(self) -> None:
        self.reader.close()
        self.stream.close()


def column_indices(pf: ParquetReader, plan: FilePlan) -> list[int] | None:
    """Leaf column indices of ``plan.columns`` (top-level names), None for every column
    (what ``ParquetFile.iter_batches(columns=...)`` resolves)."""
    if plan.all_columns:
        return None
    wanted = set(plan.columns)
    return [i for i, path in enumerate(pf.column_paths) if path[0] in wanted]


@dataclass
class FilePlan:
    """How to project the files of one Arrow schema (cached per reader; see ``_file_plan``).

    ``direct_schema`` is learned on the first batch: the schema ``to_requested_schema``
    produced when that equalled the batch's own schema (then later batches of the same
    raw schema, ``direct_source``, only relabel their columns with it), else None (always
    convert). ``fast`` then holds the output schema and per-column casts that take such a
    batch straight to the reader's output when the read needs nothing else (no deletes,
    filter, metadata columns or partition values): see ``SplitReader._process``.
    """

    read_schema: Schema
    file_project: Schema
    columns: list[str]
    missing_ids: frozenset[int]
    all_columns: bool
    direct_schema: pa.Schema | None = None
    direct_source: pa.Schema | None = None
    direct_checked: bool = False
    fast: tuple[pa.Schema, list[_Cast] | None] | None = None
    lineage: dict[str, str] | None = None
    """Row lineage metadata column -> the file's column storing it (v3 files rewritten
    with their lineage), when requested and present."""


class SplitReader:
    """Reads splits of one plan. One instance per worker thread (it caches delete files).

    Args:
        context: the plan's shared read context.
        contexts: a stream's read context of another schema, by id (splits with a
            ``schema_id``, ``onSchemaChange=evolve``; see :meth:`for_schema`). Called on
            the reading thread; it must be thread-safe.
    """

    def __init__(self, context: ReadContext,
                 contexts: Callable[[int], ReadContext] | None = None) -> None:
        self.context = context
        self.contexts = contexts
        self._by_schema: dict[int, SplitReader] = {}
        self.deletes = DeleteLoader(context.io)
        self.files = FileOpener(context.io)
        self.prefetch = Prefetcher(self.files, resolve_concurrency(context.io_concurrency))
        """Fetches the next small files of a run ahead on an object store (see
        :mod:`icefloe.reader.prefetch`)."""
        # with the schema, nested fields resolve to their full path (``s.a``, not ``a``)
        self._filter_expr = (
            None if context.filter is None
            else expression_to_pyarrow(context.bound_filter, context.schema)
        )
        self._out_names = [f.name for f in context.projected_schema.fields]
        self._plans: dict[tuple[bytes, frozenset[int]], FilePlan] = {}
        self._runs: RunScanner | None = None
        self._last_plan: tuple[pa.Schema, frozenset[int], FilePlan] | None = None
        self._conformers: list[tuple[pa.Schema, list[pc.CastOptions | None]]] = []
        # (index, name) of the output's non-nullable columns
        self._required = [(i, f.name) for i, f in enumerate(context.arrow_schema)
                          if not f.nullable]
        self._lineage = [n for n in context.metadata_columns if n in ROW_LINEAGE_FIELD_IDS]
        self._positions = "_pos" in context.metadata_columns or bool(self._lineage)
        self._changes: ChangeReader | None = None

    def for_schema(self, schema_id: int | None) -> SplitReader:
        """The reader of splits read in ``schema_id`` (None: this one), built once from
        ``contexts`` and kept.

        Raises:
            SplitError: a split of another schema and no ``contexts`` to build it from.
        """
        if schema_id is None:
            return self
        reader = self._by_schema.get(schema_id)
        if reader is None:
            if self.contexts is None:
                raise SplitError(f"a split read in schema {schema_id} reached a reader "
                                 "without the stream's schemas (a bug in the engine adapter)")
            reader = type(self)(self.contexts(schema_id))
            self._by_schema[schema_id] = reader
        return reader

    batch_runs = True
    """Whether the local engine reads runs of :meth:`can_batch` splits (small whole files)
    with :meth:`read_run` instead of split by split."""

    scan_runs = False
    """Whether :meth:`read_run` reads a run through one ``pyarrow.dataset`` scan
    (:mod:`icefloe.reader.runs`) instead of file by file, processed in groups
    (:mod:`icefloe.reader.groups`). Off: on local files the dataset scanner costs more CPU
    per small file than this reader (benchmarks/RESULTS.md, "Backfill throughput"); it may
    pay where opening a file is slow (object stores)."""

    def can_batch(self, split: FileSplit) -> bool:
        """Whether ``split`` may be read with others in :meth:`read_run` (cheap; any thread)."""
        return can_batch(split)

    def read_run(self, splits: Sequence[FileSplit]) -> Iterator[tuple[int, pa.RecordBatch, int]]:
        """``(index, batch, consumed)`` of ``splits`` (each :meth:`can_batch`): see
        :meth:`icefloe.reader.runs.RunScanner.read_run` for the contract (split order; on
        error, resume the last item's split per split). Read file by file with small
        files processed in groups (:func:`icefloe.reader.groups.read_group`), or through
        one Arrow dataset scan when :attr:`scan_runs`."""
        if not self.scan_runs:
            from icefloe.reader.groups import read_group

            return read_group(self, splits)
        if self._runs is None:
            self._runs = RunScanner(self)
        return self._runs.read_run(splits)

    def read_many(self, splits: Iterable[FileSplit]) -> Iterator[pa.RecordBatch]:
        """Non-empty batches of ``splits``, in order, on the calling thread (a Spark or Ray
        read task; the local engine has its own runs, see :func:`icefloe.local.engine.read_splits`).

        Runs of at least :data:`MIN_RUN` consecutive :meth:`can_batch` splits (small whole
        files) go through :meth:`read_run` when :attr:`batch_runs`; the others through
        :meth:`read`. If a run fails, its splits are read on one by one from where it
        stopped (the split it stopped in from its last offset): nothing is repeated or
        skipped, and a broken file raises :meth:`read`'s typed error.

        Raises:
            DataFileError: a data or delete file is missing, unreadable or of an unknown
                format (icefloe reads Parquet, ORC and Avro).
        """
        if self.context.net_changes:  # the whole plan, collapsed (one task reads it all)
            from icefloe.reader.changelog import net_of

            yield from net_of(self.context, self._read_many(splits))
            return
        yield from self._read_many(splits)

    def _read_many(self, splits: Iterable[FileSplit]) -> Iterator[pa.RecordBatch]:
        """:meth:`read_many` without the netting of a ``netChanges`` changelog."""
        run: list[FileSplit] = []
        for split in splits:
            if self.batch_runs and self.can_batch(split):
                run.append(split)
                continue
            yield from self._read_run_or_each(run)
            run = []
            yield from self.read(split)
        yield from self._read_run_or_each(run)

    def _read_run_or_each(self, run: list[FileSplit]) -> Iterator[pa.RecordBatch]:
        consumed = [0] * len(run)
        last = 0  # split of the last item: the ones before it are complete
        if len(run) >= MIN_RUN:
            try:
                for index, batch, offset in self.read_run(run):
                    last, consumed[index] = index, offset
                    if batch.num_rows:
                        yield batch
                return
            except Exception as exc:  # read on split by split: typed errors, or success
                log.debug("run of %d splits stopped in split %s (record %d); reading on "
                          "split by split: %s: %s", len(run), run[last].split_id,
                          consumed[last], type(exc).__name__, exc)
        for split, offset in zip(run[last:], consumed[last:], strict=True):
            yield from self.read(split.with_position(offset) if offset else split)

    def read(self, split: FileSplit) -> Iterator[pa.RecordBatch]:
        """Non-empty batches of ``split`` (from ``split.resume_rows`` on)."""
        for batch, _ in self.read_progress(split):
            if batch.num_rows:
                yield batch

    def _open(self, split: FileSplit, window: PrefetchWindow | None = None,
              index: int = 0) -> _OpenFile:
        """Open ``split``'s file: from ``window`` (``window.splits[index]`` is ``split``,
        fetched ahead) or directly.

        Raises:
            DataFileError: the file is not Parquet, missing, unreadable or corrupt.
        """
        if split.file_format != "PARQUET":
            raise DataFileError(
                f"data file {split.file_path} (snapshot {split.snapshot_id}) is "
                f"{split.file_format}, not PARQUET (ORC and Avro splits are read by "
                "icefloe.reader.formats)"
            )
        try:
            stream, pre_buffer = self.files.open_for_parquet(split.file_path) \
                if window is None else window.take(index)
        except Exception as exc:
            raise DataFileError(
                f"cannot read data file {split.file_path} of snapshot {split.snapshot_id} "
                f"({type(exc).__name__}: {exc}); the file is missing or corrupt"
            ) from exc
        try:
            # the reader under pq.ParquetFile, without its per-file Python set-up (nested
            # column paths, path resolution): with thousands of small files it shows
            reader = ParquetReader()
            reader.open(stream, pre_buffer=pre_buffer, arrow_extensions_enabled=True)
        except Exception as exc:
            stream.close()
            raise DataFileError(
                f"cannot read data file {split.file_path} of snapshot {split.snapshot_id} "
                f"({type(exc).__name__}: {exc}); the file is missing or corrupt"
            ) from exc
        return _OpenFile(reader, stream)

    def _file_plan(self, arrow_schema: pa.Schema, eq_ids: frozenset[int]) -> FilePlan:
        """The projection of files with ``arrow_schema`` (field ids included in the key:
        all files of one write job share it, so per-file schema conversion runs once)."""
        last = self._last_plan
        if last is not None and last[1] == eq_ids and last[0].equals(arrow_schema, True):
            return last[2]  # the previous file's schema (field metadata included): most files
        key = (arrow_schema.serialize().to_pybytes(), eq_ids)
        plan = self._plans.get(key)
        if plan is not None:
            self._last_plan = (arrow_schema, eq_ids, plan)
            return plan
        ctx = self.context
        file_schema = pyarrow_to_schema(
            arrow_schema, ctx.name_mapping,
            downcast_ns_timestamp_to_us=ctx.format_version <= 2,
            format_version=ctx.format_version,  # type: ignore[arg-type]
        )
        read_schema = ctx.read_schema(eq_ids)
        read_ids = {
            fid for fid in read_schema.field_ids
            if not isinstance(read_schema.find_type(fid), MapType | ListType)
        }
        file_project = prune_columns(file_schema, read_ids, select_full_types=False)
        columns = [c.name for c in file_project.columns]
        lineage = self._stored_lineage(arrow_schema)
        columns += [name for name in lineage.values() if name not in columns]
        plan = FilePlan(
            read_schema=read_schema, file_project=file_project, columns=columns,
            missing_ids=frozenset(set(read_schema.field_ids) - set(file_schema.field_ids)),
            all_columns=columns == arrow_schema.names, lineage=lineage or None,
        )
        if len(self._plans) >= _PLAN_CACHE_SIZE:
            self._plans.clear()
        self._plans[key] = plan
        self._last_plan = (arrow_schema, eq_ids, plan)
        return plan

    def _stored_lineage(self, arrow_schema: pa.Schema) -> dict[str, str]:
        """Requested row lineage columns the file stores: metadata name -> file column."""
        out: dict[str, str] = {}
        for name in self._lineage:
            field_id = str(ROW_LINEAGE_FIELD_IDS[name]).encode()
            for field in arrow_schema:
                if field.metadata and field.metadata.get(b"PARQUET:field_id") == field_id:
                    out[name] = field.name
        return out

    def _missing_values(self, split: FileSplit, missing: frozenset[int]) -> dict[int, Any]:
        """Identity-partition values for columns absent from the file (once per split)."""
        spec = self.context.specs.get(split.spec_id)
        if not missing or spec is None:
            return {}
        values: dict[int, Any] = {}
        for index, field in enumerate(spec.fields):
            if field.source_id in missing and isinstance(field.transform, IdentityTransform) \
                    and index < len(split.partition) and split.partition[index] is not None:
                values[field.source_id] = split.partition[index]
        return values

    def read_progress(self, split: FileSplit) -> Iterator[tuple[pa.RecordBatch, int]]:
        """``(batch, consumed)`` pairs; ``batch`` may be empty (all rows deleted/filtered).

        ``consumed`` counts source records of the split read so far, ``split.resume_rows``
        included; after the last pair it equals the split's total source records.

        Raises:
            DataFileError: a data or delete file is missing, unreadable or of an unknown
                format (icefloe reads Parquet, ORC and Avro).
        """
        if split.changes:  # a changelog split: icefloe.reader.changelog
            if self._changes is None:
                from icefloe.reader.changelog import ChangeReader

                self._changes = ChangeReader(self)
            yield from self._changes.read_progress(split)
            return
        if split.file_format != "PARQUET":  # ORC, Avro: the same processing per batch
            from icefloe.reader.formats import read_progress

            yield from read_progress(self, split)
            return
        ctx = self.context
        opened = self._open(split)
        try:
            yield from self._read_open(split, opened.reader, ctx)
        except DataFileError:
            raise
        except (OSError, pa.ArrowException) as exc:
            raise read_failed(split, exc) from exc
        finally:
            opened.close()

    def _read_open(self, split: FileSplit, pf: ParquetReader,
                   ctx: ReadContext) -> Iterator[tuple[pa.RecordBatch, int]]:
        md = pf.metadata
        skip = split.resume_rows
        selected: list[int] = []
        first_position = None
        if split.is_whole_file and not skip:  # every row group, from position 0
            selected = list(range(md.num_row_groups))
            first_position = 0
        else:
            position = 0
            for i in range(md.num_row_groups):
                rg = md.row_group(i)
                rows = rg.num_rows
                if split.is_whole_file or split.start <= row_group_start(rg) < split.end:
                    if skip >= rows and first_position is None:
                        skip -= rows
                    else:
                        if first_position is None:
                            first_position = position
                        selected.append(i)
                position += rows
        if not selected or first_position is None:
            return
        size = ctx.batch_size
        decode = size * max(1, _DECODE_ROWS // size)
        yield from self.project_file(
            split, pf.schema_arrow,
            lambda plan: _sliced(pf.iter_batches(
                decode, selected, column_indices(pf, plan),
                use_threads=split.length >= _THREADED_DECODE_BYTES), size),
            first_position, skip)

    def project_file(self, split: FileSplit, arrow_schema: pa.Schema,
                     raw_batches: Callable[[FilePlan], Iterable[pa.RecordBatch]],
                     first_position: int, skip: int
                     ) -> Iterator[tuple[pa.RecordBatch, int]]:
        """The split's rows of one open data file of any format, projected and filtered.

        Runs on a worker. ``raw_batches(plan)`` yields the file's batches (of
        ``arrow_schema``, the columns ``plan`` needs) from file position
        ``first_position``; the first ``skip`` of those rows were delivered before (a
        resumed split) and are passed over. Yields ``(batch, consumed)`` as
        :meth:`read_progress` does (``consumed`` starts from ``split.resume_rows``).
        """
        if split.delete_files:
            equality = self.deletes.equality_sets(split)
            eq_ids = frozenset(i for ids, _ in equality for i in ids)
            deleted = self.deletes.deleted_positions(split)
        else:
            equality, eq_ids, deleted = [], frozenset(), None
        plan = self._file_plan(arrow_schema, eq_ids)
        missing = self._missing_values(split, plan.missing_ids)
        pos = first_position
        consumed = split.resume_rows
        for raw in raw_batches(plan):
            n = raw.num_rows
            if skip:
                if skip >= n:
                    skip -= n
                    pos += n
                    continue
                raw = raw.slice(skip)
                pos += skip
                n -= skip
                skip = 0
            batch = self._process(raw, pos, split, plan, missing, deleted, equality)
            pos += n
            consumed += n
            yield batch, consumed

    def _fast_process(self, raw: pa.RecordBatch, plan: FilePlan) -> pa.RecordBatch:
        """``raw`` (of schema ``plan.direct_source``) relabelled and cast in one step to the
        output: what :meth:`_process` ends with when ``plan.fast`` applies (no deletes,
        filter, metadata columns or missing columns)."""
        assert plan.fast is not None
        out_schema, casts = plan.fast
        arrays = raw.columns
        if casts is not None:
            arrays = self._cast_columns(arrays, casts)
        return pa.RecordBatch.from_arrays(arrays, schema=out_schema)

    def _project(self, raw: pa.RecordBatch, plan: FilePlan,
                 missing: dict[int, Any]) -> pa.RecordBatch:
        """``raw`` in the read schema; a relabel only when the projection is the identity."""
        if plan.direct_schema is not None and not missing \
                and raw.schema.equals(plan.direct_source):
            return pa.RecordBatch.from_arrays(raw.columns, schema=plan.direct_schema)
        ctx = self.context
        batch = to_requested_schema(
            plan.read_schema, plan.file_project, raw,
            downcast_ns_timestamp_to_us=ctx.format_version <= 2,
            projected_missing_fields=missing,
        )
        if not plan.direct_checked and not plan.missing_ids:
            plan.direct_checked = True
            if batch.schema.equals(raw.schema, check_metadata=False):
                plan.direct_schema, plan.direct_source = batch.schema, raw.schema
                plan.fast = self._fast_output(batch.schema)
        return batch

    def _process(self, raw: pa.RecordBatch, first_pos: int, split: FileSplit,
                 plan: FilePlan, missing: dict[int, Any], deleted: np.ndarray | None,
                 equality: list[tuple[tuple[int, ...], pa.Table]]) -> pa.RecordBatch:
        fast = plan.fast
        if fast is not None and deleted is None and not equality and not missing \
                and raw.schema.equals(plan.direct_source):
            return self._fast_process(raw, plan)
        ctx = self.context
        n = raw.num_rows
        read_schema = plan.read_schema
        batch = self._project(raw, plan, missing)
        positions: np.ndarray | None = None
        keep: np.ndarray | None = None
        if deleted is not None:
            lo, hi = np.searchsorted(deleted, [first_pos, first_pos + n])
            if hi > lo:
                keep = np.ones(n, dtype=bool)
                keep[deleted[lo:hi] - first_pos] = False
        for ids, keys in equality:
            cols = [batch.column(read_schema.find_column_name(i)) for i in ids]
            mask = equality_keep_mask(cols, keys).to_numpy(zero_copy_only=False)
            keep = mask if keep is None else keep & mask
        if self._positions:
            positions = np.arange(first_pos, first_pos + n, dtype=np.int64)
        if keep is not None:
            batch = batch.filter(pa.array(keep))
            if positions is not None:
                positions = positions[keep]
        if self._filter_expr is not None and batch.num_rows:
            if positions is not None:
                batch = batch.append_column("__pos", pa.array(positions))
            batch = pa.Table.from_batches([batch]).filter(self._filter_expr).combine_chunks()
            batch = batch.to_batches()[0] if batch.num_rows else \
                pa.RecordBatch.from_pylist([], schema=batch.schema)
            if positions is not None:
                positions = batch.column("__pos").to_numpy()
        if batch.schema.names != self._out_names:
            batch = batch.select(self._out_names)
        if ctx.metadata_columns:
            batch = self._add_metadata(batch, split, positions)
            if self._lineage:
                batch = self._add_lineage(batch, split, positions, raw, first_pos, plan)
        if not batch.schema.equals(ctx.arrow_schema):
            batch = self._conform(batch)
        return batch

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` cast to the context's Arrow schema (what ``RecordBatch.cast`` does, with
        the per-column casts of each batch schema worked out once: most columns only need
        the target field, e.g. ``string`` -> ``large_string`` touches two of five)."""
        target = self.context.arrow_schema
        schema = batch.schema
        casts = next((c for s, c in self._conformers if s.equals(schema)), None)
        if casts is None:
            if schema.names != target.names:
                raise ValueError(f"Target schema's field names are not matching the record "
                                 f"batch's field names: {schema.names!r}, {target.names!r}")
            casts = [_cast_for(have.type, want.type)
                     for have, want in zip(schema, target, strict=True)]
            if len(self._conformers) >= _PLAN_CACHE_SIZE:
                self._conformers.clear()
            self._conformers.append((schema, casts))
        return pa.RecordBatch.from_arrays(
            self._cast_columns(batch.columns, casts), schema=target)

    def _cast_columns(self, columns: list[pa.Array],
                      casts: list[_Cast]) -> list[pa.Array]:
        """``columns`` cast by ``casts`` (None: as is) to the context's Arrow schema,
        refusing nulls where it forbids them (as ``RecordBatch.cast`` does)."""
        for index, name in self._required:
            if columns[index].null_count > 0:
                raise ValueError(f"Casting field {name!r} with null values to non-nullable")
        return [column if options is None
                else _widen_offsets(column, options.to_type) if isinstance(options, _Widen)
                else pc.call_function("cast", [column], options)
                for column, options in zip(columns, casts, strict=True)]

    def _fast_output(self, direct: pa.Schema) -> tuple[pa.Schema, list[_Cast]
                                                        | None] | None:
        """For a plan whose projection is a relabel to ``direct``: the output schema and
        casts of its batches when nothing but the relabel and the final cast applies (no
        filter, no metadata columns, the output's columns in file order); else None."""
        ctx = self.context
        if self._filter_expr is not None or ctx.metadata_columns \
                or direct.names != self._out_names:
            return None
        target = ctx.arrow_schema
        if direct.equals(target):
            return direct, None  # what the general path returns (its own metadata kept)
        return target, [_cast_for(have.type, want.type)
                        for have, want in zip(direct, target, strict=True)]

    def _add_metadata(self, batch: pa.RecordBatch, split: FileSplit,
                      positions: np.ndarray | None) -> pa.RecordBatch:
        n = batch.num_rows
        arrays = list(batch.columns)
        names = list(batch.schema.names)
        for name in self.context.metadata_columns:
            if name == "_pos":
                arrays.append(pa.array(positions, type=pa.int64()))
            elif name == "_file":
                arrays.append(pa.array([split.file_path] * n, type=pa.string()))
            elif name == "_snapshot_id":
                arrays.append(pa.array(np.full(n, split.snapshot_id, dtype=np.int64)))
            elif name == "_sequence_number":
                arrays.append(pa.array(np.full(n, split.sequence_number, dtype=np.int64)))
            else:  # row lineage: filled in by _add_lineage
                arrays.append(pa.nulls(n, pa.int64()))
            names.append(name)
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def _add_lineage(self, batch: pa.RecordBatch, split: FileSplit,
                     positions: np.ndarray | None, raw: pa.RecordBatch, first_pos: int,
                     plan: FilePlan) -> pa.RecordBatch:
        """``_row_id`` / ``_last_updated_sequence_number`` as the v3 spec reads them
        ("Row Lineage"): the value the file stores, where it stores one; else the data
        file's ``first_row_id`` plus the row's position (null when the file has no
        ``first_row_id``), and the data file's data sequence number."""
        assert positions is not None
        arrays = list(batch.columns)
        for name in self._lineage:
            if name == "_row_id":
                inherited = None if split.first_row_id is None \
                    else pa.array(positions + split.first_row_id)
            else:
                inherited = pa.array(np.full(len(positions), split.sequence_number,
                                             dtype=np.int64))
            stored_name = (plan.lineage or {}).get(name)
            if stored_name is not None:
                stored = raw.column(stored_name).take(pa.array(positions - first_pos))
                stored = stored.cast(pa.int64())
                value = stored if inherited is None else pc.coalesce(stored, inherited)
            else:
                value = inherited if inherited is not None else pa.nulls(len(positions),
                                                                         pa.int64())
            arrays[batch.schema.get_field_index(name)] = value
        return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)
