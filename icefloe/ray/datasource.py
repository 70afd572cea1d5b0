"""The ``icefloe`` Ray Data datasource: a bounded read as ``ray.data.Dataset`` read tasks.

The datasource runs on the driver: it opens the catalog, resolves the bounded plan
and packs the plan's splits into read tasks (:func:`icefloe.splits.pack_for`, about
``splitSize`` bytes each, never fewer tasks than Ray's requested parallelism when
there are enough splits; a plan of fewer splits is cut into more when ``splitSize`` is
not set, the adaptive split size). A read task carries only serialized split bytes and the
plan's :class:`~icefloe.reader.ReadContext`: its read function is the module-level
:func:`read_task_blocks` bound with :func:`functools.partial`, so nothing of the
datasource (catalog, table metadata, plan) is pickled into it.

Pushdown: Ray's projection pushdown prunes columns (merged with the ``columns``
option); Ray's predicate pushdown turns convertible ``Expr`` filters into PyIceberg
filter text ANDed to the ``filter`` option (files are pruned at planning and rows
filtered by the reader); a predicate that cannot be converted stays a Ray Filter.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import ray.data
from pyiceberg.catalog import Catalog
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from icefloe.enumerator.bounded import BoundedPlan, plan_bounded
from icefloe.options import SourceOptions
from icefloe.ray._uv_env import opt_out
from icefloe.ray.filters import and_filters, to_filter_string
from icefloe.reader.context import METADATA_FIELDS, ReadContext
from icefloe.reader.split_reader import SplitReader
from icefloe.source import IcebergSource
from icefloe.splits import deserialize_split, pack_for, serialize_split
from icefloe.splits.split import FileSplit

if TYPE_CHECKING:
    from ray.data.context import DataContext
    from ray.data.expressions import Expr

log = logging.getLogger(__name__)

try:  # Ray's placeholder column: blocks of an empty projection keep their row counts
    from ray.data._internal.arrow_block import _BATCH_SIZE_PRESERVING_STUB_COL_NAME as STUB
except ImportError:  # pragma: no cover - other Ray versions
    STUB = "__bsp_stub"

TARGET_BLOCK_BYTES = 64 * 1024 * 1024
"""Batches of one read task are concatenated into blocks of about this many bytes."""


def read_task_blocks(split_blobs: Sequence[bytes], context: ReadContext,
                     output_columns: tuple[str, ...] | None) -> Iterator[pa.Table]:
    """Read a task's splits, in order, as Arrow tables. Runs on a Ray worker.

    Args:
        split_blobs: :func:`icefloe.splits.serialize_split` bytes of each split.
        context: the plan's read context (pickled with the task).
        output_columns: the columns to return, in this order (None: the context's
            schema as is; empty: only Ray's row-count placeholder column).

    Yields:
        tables of up to about :data:`TARGET_BLOCK_BYTES`; none for an empty task.
    """
    reader = SplitReader(context)
    schema = context.arrow_schema
    held: list[pa.RecordBatch] = []
    held_bytes = 0

    def block() -> pa.Table:
        table = pa.Table.from_batches(held, schema=schema)
        if output_columns == ():
            return pa.table({STUB: pa.nulls(table.num_rows)})
        if output_columns is not None and tuple(table.column_names) != output_columns:
            table = table.select(list(output_columns))
        return table

    for batch in reader.read_many(deserialize_split(blob) for blob in split_blobs):
        held.append(batch)
        held_bytes += batch.nbytes
        if held_bytes >= TARGET_BLOCK_BYTES:
            yield block()
            held, held_bytes = [], 0
    if held:
        yield block()


class IcefloeDatasource(Datasource):
    """A bounded icefloe read of one table as a Ray Data datasource. Lives on the driver.

    Args:
        table: ``namespace.table``.
        catalog: catalog name, a ``Catalog`` object or None (see :class:`IcebergSource`).
            A ``Catalog`` object is used on the driver only (read tasks never open it).
        options: bounded-read source options (``snapshotId``, ``startSnapshotId``,
            ``columns``, ``filter``, ``splitSize``, ``catalog.<prop>``, ...).

    Raises:
        InvalidOptionError: at construction, for invalid options.
    """

    def __init__(self, table: str, catalog: str | Catalog | None = None,
                 options: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._source = IcebergSource(table, catalog=catalog, options=options)
        self._base_options = self._source.options.for_mode("bounded")
        self._projection_map: dict[str, str] | None = None
        self._pushed_filter: str | None = None
        self._plan_cache: tuple[BoundedPlan, list[FileSplit]] | None = None

    def get_name(self) -> str:
        return "Icefloe"

    # -- pushdown (Ray's optimizer, on the driver) ------------------------------------

    def supports_projection_pushdown(self) -> bool:
        return True

    def supports_predicate_pushdown(self) -> bool:
        return True

    def apply_projection(self, projection_map: dict[str, str] | None) -> IcefloeDatasource:
        clone = super().apply_projection(projection_map)
        assert isinstance(clone, IcefloeDatasource)
        if clone is not self:
            clone._plan_cache = None
        return clone

    def apply_predicate(self, predicate_expr: Expr) -> IcefloeDatasource:
        """Push ``predicate_expr`` into the plan, or return ``self`` (Ray keeps its Filter)."""
        text = to_filter_string(predicate_expr)
        if text is None:
            return self
        clone = copy.copy(self)
        clone._pushed_filter = and_filters(self._pushed_filter, text)
        clone._predicate_expr = predicate_expr if self._predicate_expr is None \
            else self._predicate_expr & predicate_expr
        clone._plan_cache = None
        try:  # a predicate on a column the table lacks: let Ray report it, unchanged
            clone._plan()
        except Exception:
            log.debug("predicate %r not pushed down", text, exc_info=True)
            return self
        return clone

    def _effective_options(self) -> SourceOptions:
        opts = self._base_options
        changes: dict[str, Any] = {}
        if self._pushed_filter is not None:
            changes["filter"] = and_filters(opts.filter, self._pushed_filter)
        if self._projection_map is not None:
            wanted = list(self._projection_map)
            data = [c for c in wanted if c not in METADATA_FIELDS]
            if opts.columns is not None:
                data = [c for c in data if c in opts.columns]
            changes["columns"] = tuple(data)
            changes["metadata_columns"] = tuple(
                c for c in opts.metadata_columns if c in self._projection_map)
        return dataclasses.replace(opts, **changes) if changes else opts

    def _output_columns(self, context: ReadContext) -> tuple[str, ...] | None:
        if self._projection_map is None:
            return None
        available = set(context.arrow_schema.names)
        return tuple(c for c in self._projection_map if c in available)

    def _plan(self) -> tuple[BoundedPlan, list[FileSplit]]:
        if self._plan_cache is None:
            options = self._effective_options()
            if options.columns == () and self._projection_map is not None:
                # no column wanted (a count): read the narrowest projection, the first column
                first = self._source.handle.metadata.schema().fields[0].name
                options = dataclasses.replace(options, columns=(first,))
            plan = plan_bounded(self._source.handle, options)
            self._plan_cache = (plan, list(plan.splits()))
        return self._plan_cache

    # -- Datasource API ---------------------------------------------------------------

    def estimate_inmemory_data_size(self) -> int | None:
        """The plan's on-disk bytes (compressed Parquet ranges; an underestimate)."""
        _, splits = self._plan()
        return sum(s.length for s in splits)

    def output_schema(self) -> pa.Schema:
        """The Arrow schema of the read's blocks (after Ray's projection pushdown, if
        any). Runs on the driver (plans the read if it was not planned yet)."""
        plan, _ = self._plan()
        schema = plan.context.arrow_schema
        output_columns = self._output_columns(plan.context)
        if output_columns == ():
            return pa.schema([pa.field(STUB, pa.null())])
        if output_columns is not None:
            return pa.schema([schema.field(c) for c in output_columns])
        return schema

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: DataContext | None = None) -> list[ReadTask]:
        """One read task per pack of splits. Runs on the driver.

        A plan of fewer splits than ``parallelism`` is cut into about that many when
        ``splitSize`` is not set (the adaptive split size:
        :meth:`~icefloe.enumerator.bounded.BoundedPlan.adaptive_cut`; its files' pieces
        no smaller than 32 MiB on average).

        Metadata is honest: ``num_rows`` is the sum of the splits' record counts only
        when they are exact (whole files, no delete files, no filter; else None); ``size_bytes``
        the on-disk bytes of the ranges read; ``input_files`` the data files.
        """
        plan, splits = self._plan()
        if not splits:
            return []
        opts = plan.options
        wanted = max(parallelism, 1)
        if not opts.net_changes and plan.adaptive_cut(wanted, planned=splits) is not None:
            # fewer splits than tasks asked for: cut for them (the adaptive split size)
            splits = list(plan.splits(wanted))
        groups = [splits] if opts.net_changes else pack_for(  # net changes: one task
            splits, opts.split_size, opts.split_open_file_cost, wanted)
        context = plan.context
        output_columns = self._output_columns(context)
        schema = self.output_schema()
        exact = opts.filter is None
        tasks = []
        for group in groups:
            counts_exact = exact and all(s.is_whole_file and not s.delete_files
                                         for s in group)
            metadata = BlockMetadata(
                num_rows=sum(s.record_count for s in group) if counts_exact else None,
                size_bytes=int(sum(s.length for s in group)),
                exec_stats=None,
                input_files=tuple(dict.fromkeys(s.file_path for s in group)),
            )
            read_fn = functools.partial(
                read_task_blocks, tuple(serialize_split(s) for s in group), context,
                output_columns)
            tasks.append(ReadTask(read_fn, metadata, schema=schema,
                                  per_task_row_limit=per_task_row_limit))
        log.info("icefloe read of %s: %d splits in %d Ray read tasks (parallelism %d)",
                 self._source.identifier, len(splits), len(tasks), parallelism)
        return tasks

    def __getstate__(self) -> dict[str, Any]:
        # the plan and the table handle stay on the driver
        state = dict(self.__dict__)
        state["_plan_cache"] = None
        return state


def read(table: str, catalog: str | Catalog | None = None,
         options: Mapping[str, Any] | None = None, *, materialize: bool = False,
         **ray_kwargs: Any) -> ray.data.Dataset:
    """A bounded read of ``table`` as a lazy ``ray.data.Dataset``. Runs on the driver.

    Args:
        table: ``namespace.table``.
        catalog: catalog name, ``Catalog`` object, or None for the embedded default.
        options: bounded-read options (see the README's option table).
        materialize: read now, with plain Ray tasks, into a ``MaterializedDataset``
            (what ``ds.materialize()`` returns; see :mod:`icefloe.ray.materialized` for
            what that gives up). Returns once the read is done.
        **ray_kwargs: passed to ``ray.data.read_datasource`` (``override_num_blocks``,
            ``ray_remote_args``, ``concurrency``, ...); with ``materialize`` only
            ``override_num_blocks``, ``ray_remote_args``, ``num_cpus``, ``num_gpus`` and
            ``memory``.

    Blocks: unless ``override_num_blocks`` (or ``parallelism``) is given, and Ray is
    already initialized, the read asks for ``2 x`` the cluster's CPUs blocks: Ray's own
    default asks for at least 200 (``DataContext.read_op_min_num_blocks``) and, with
    fewer read tasks than that, slices every task's output into pieces
    (``SplitBlocks``) that each cost a serialization into the object store. icefloe's
    tasks already yield blocks of about 64 MiB, and packs at least as many tasks as
    blocks asked for when there are enough splits, so on clusters with fewer than 100
    CPUs that slicing is overhead (benchmarks/RESULTS.md, "Ray"); on larger ones the
    count is Ray's.

    Raises:
        InvalidOptionError: invalid options (at call time; the plan is made lazily).
    """
    if materialize:
        from icefloe.ray.materialized import read_materialized

        if not ray.is_initialized():
            opt_out()  # the variable may have changed since import icefloe.ray
            ray.init()  # as Ray Data would when the dataset executes
        tasks = ray_kwargs.pop("override_num_blocks", None) or default_num_blocks()
        return read_materialized(IcefloeDatasource(table, catalog, options), tasks or 1,
                                 ray_kwargs)
    if "override_num_blocks" not in ray_kwargs and "parallelism" not in ray_kwargs:
        blocks = default_num_blocks()
        if blocks is not None:
            ray_kwargs["override_num_blocks"] = blocks
    return ray.data.read_datasource(IcefloeDatasource(table, catalog, options), **ray_kwargs)


def default_num_blocks() -> int | None:
    """``2 x`` the CPUs of the connected Ray cluster, or None when Ray is not initialized
    (Ray then decides, when it starts). Runs on the driver."""
    if not ray.is_initialized():
        return None
    cpus = int(ray.cluster_resources().get("CPU", 0))
    return 2 * cpus if cpus > 0 else None
