"""IcebergSource: the facade users call (plan / read / to_arrow / stream).

Runs in the user's (driver) process. Options are parsed and validated when the
source is constructed; the catalog is opened and the table loaded lazily, on the
first call that needs it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.catalog import Catalog

from icefloe.catalog.handle import TableHandle, open_table
from icefloe.catalog.loader import open_catalog
from icefloe.coordinator.lag import summary_int
from icefloe.enumerator.bounded import BoundedPlan, is_local, plan_bounded
from icefloe.errors import InvalidOptionError
from icefloe.local.engine import read_splits, target_splits
from icefloe.options import SourceOptions
from icefloe.retry import RetryPolicy, is_transient
from icefloe.splits.split import FileSplit

if TYPE_CHECKING:
    from icefloe.local.stream import LocalStream

log = logging.getLogger(__name__)

LOCAL_PARALLELISM = 2
"""Reader threads of a bounded read that sets no ``parallelism``, of a table on the local
file system."""

OBJECT_STORE_PARALLELISM = 4
"""Reader threads of a bounded read that sets no ``parallelism``, of a table on an object
store (S3, GCS, ADLS, HDFS: a location with a scheme other than ``file:``). Measured:
64 files of 1 MB read 1.09-1.36x as fast at 4 threads as at 2 on S3 at 10-30 ms; 8 and
16 threads were no faster than 4 (and took up to 1.6x the CPU); reads of a few large files
did not change (threads beyond the splits idle). A likely cause, not profiled: a reader's
run of small files starts with a wait for its first file's fetch
(:mod:`icefloe.reader.prefetch` fetches ahead within a run only), which more threads
overlap. benchmarks/RESULTS.md,
"Session 14 (issue 30): small files"."""


LARGE_FILES_PARALLELISM = 2
"""Reader threads of a bounded read that sets no ``parallelism``, of a table on an object
store whose data files average more than two splits (:func:`large_files`): each split
is fetched ahead in ranges (:mod:`icefloe.reader.ranged`) and decoded on Arrow's threads,
so the reader threads do not wait on I/O, and four of them on two cores took ~1.2 s more
CPU (servers' included: ~1.5 s) per read of 1 GB x 16 row groups at 10 ms than two
(benchmarks/RESULTS.md, "Session 17 (issue 30): CPU of large files on S3")."""


def large_files(plan: BoundedPlan) -> bool:
    """Whether ``plan``'s snapshot's data files average more than two splits of
    ``splitSize`` (from the snapshot's summary, ``total-files-size`` over
    ``total-data-files``; False without them)."""
    if plan.snapshot is None:
        return False
    size = summary_int(plan.snapshot, "total-files-size")
    files = summary_int(plan.snapshot, "total-data-files")
    return files > 0 and size / files > 2 * plan.options.split_size


def default_parallelism(plan: BoundedPlan) -> int:
    """The reader threads of a bounded read of ``plan`` that sets no ``parallelism``:
    :data:`LOCAL_PARALLELISM` when the table's location is on the local file system; on
    an object store, :data:`LARGE_FILES_PARALLELISM` when its data files are large
    (:func:`large_files`), else :data:`OBJECT_STORE_PARALLELISM`. Decided from the loaded
    table's metadata (no request). Runs on the driver."""
    if is_local(plan.handle.metadata.location):
        return LOCAL_PARALLELISM
    return LARGE_FILES_PARALLELISM if large_files(plan) else OBJECT_STORE_PARALLELISM


class IcebergSource:
    """A parallel, checkpointable source over one Iceberg table.

    Args:
        table: table identifier, ``namespace.table``.
        catalog: a PyIceberg catalog name, a ``Catalog`` object, or None for the
            embedded default (SQLite under ``$ICEFLOE_HOME``). Catalog properties can
            also be given as ``catalog.<prop>`` options.
        options: source options (canonical names or aliases; strings or values).

    Raises:
        InvalidOptionError: an unknown option, an unparseable value or a contradiction.
    """

    def __init__(self, table: str, catalog: str | Catalog | None = None,
                 options: Mapping[str, Any] | None = None) -> None:
        if not isinstance(table, str) or len(table.split(".")) < 2 \
                or not all(part.strip() for part in table.split(".")):
            raise InvalidOptionError("table", f"{table!r} is not a table identifier; "
                                     "give namespace.table, e.g. demo.events")
        self.identifier = table
        self.options = SourceOptions.parse(options)
        if catalog is None:
            catalog = self.options.catalog_name
        self._catalog_arg = catalog
        self._handle: TableHandle | None = None

    def __repr__(self) -> str:
        return f"IcebergSource({self.identifier!r}, options={self.options!r})"

    @property
    def retry(self) -> RetryPolicy:
        """The ``maxAttempts`` / ``retryBackoffMs`` policy for transient faults."""
        return RetryPolicy.from_options(self.options)

    @property
    def handle(self) -> TableHandle:
        """The loaded table (opened on first use).

        Not retried here: a catalog client retries its own requests (the Nessie client
        per its ``max-attempts`` property), and a continuous read retries its refreshes.
        """
        if self._handle is None:
            catalog = open_catalog(self._catalog_arg, self.options.catalog_props())
            self._handle = open_table(
                catalog, self.identifier, ref=self.options.ref,
                follow_renames=getattr(self.options, "follow_renames", False))
        return self._handle

    def bounded_plan(self) -> BoundedPlan:
        """Resolve the bounded read (snapshot, range, schema) without reading splits."""
        return plan_bounded(self.handle, self.options.for_mode("bounded"))

    def plan(self) -> Iterator[FileSplit]:
        """The splits of the bounded read, in deterministic order (lazily).

        A transient fault while reading manifests is retried per :attr:`retry`: the
        plan is made again and the splits already yielded are skipped (planning is
        deterministic, so none is repeated or lost).
        """
        return retrying_splits(self.bounded_plan(), self.retry)

    def read(self, parallelism: int | None = None) -> Iterator[pa.RecordBatch]:
        """Batches of the bounded read, from ``parallelism`` reader threads (exactly as
        given; None: :func:`default_parallelism`, 2 for a table on the local file system,
        4 for one on an object store, 2 there when its files are large: :func:`large_files`).

        Memory stays bounded whatever the table size: with ``preserveOrder`` the runs
        read ahead of the one being delivered hold up to
        :func:`icefloe.local.engine.lookahead_bytes` of Arrow data (64 MiB per thread,
        at most 1 GiB), the run being delivered a few batches; without it, a few batches
        per reader. On an object store, files fetched ahead add up to 64 MiB per thread
        and 64 MiB of small files fetched before their claim
        (:class:`icefloe.reader.prefetch.FetchedAhead`). Batch order follows split order
        unless ``preserveOrder=false``. Without a ``splitSize`` option, a read of few
        large local files is cut into more splits
        (:data:`icefloe.local.engine.SPLITS_PER_READER` per thread; the adaptive split
        size, :meth:`BoundedPlan.adaptive_cut`; not on an object store). Transient
        faults (manifest or data-file reads, see :mod:`icefloe.retry`) are retried per
        :attr:`retry`; a data file is re-read from its last delivered record, so no row
        is repeated or skipped. After ``maxAttempts`` the typed error is raised.
        """
        plan = self.bounded_plan()
        threads = default_parallelism(plan) if parallelism is None else parallelism
        if plan.options.net_changes:  # the net effect needs the whole range first
            return iter(self._net(plan, threads).to_batches(plan.options.batch_size))
        return self._batches(plan, threads)

    def _batches(self, plan: BoundedPlan, parallelism: int) -> Iterator[pa.RecordBatch]:
        """Non-empty batches of ``plan``, planning and reading under :attr:`retry`."""
        retry = self.retry
        return (item.batch for item in read_splits(
                    retrying_splits(plan, retry, target_splits(parallelism)),
                    plan.context, parallelism,
                    plan.options.preserve_order, retry=retry)
                if item.batch.num_rows)

    def schema(self) -> pa.Schema:
        """The Arrow schema of the bounded read's batches."""
        return self.bounded_plan().context.arrow_schema

    def to_arrow(self, parallelism: int | None = None) -> pa.Table:
        """The whole bounded read as one Arrow table (materialised in memory); reader
        threads as :meth:`read`'s."""
        plan = self.bounded_plan()
        threads = default_parallelism(plan) if parallelism is None else parallelism
        if plan.options.net_changes:
            return self._net(plan, threads)
        return pa.Table.from_batches(list(self._batches(plan, threads)),
                                     schema=plan.context.arrow_schema)

    def _net(self, plan: BoundedPlan, parallelism: int) -> pa.Table:
        """A changelog range collapsed to its net effect (``netChanges``; in memory)."""
        from icefloe.reader.changelog import net_of

        batches = net_of(plan.context, self._batches(plan, parallelism))
        return pa.Table.from_batches(list(batches), schema=plan.context.arrow_schema)

    def stream(self, checkpoint: str | None = None, parallelism: int = 2,
               **kwargs: Any) -> LocalStream:
        """A continuous read on the local engine (see :class:`icefloe.local.stream.LocalStream`)."""
        from icefloe.local.stream import LocalStream

        return LocalStream(self, checkpoint=checkpoint, parallelism=parallelism, **kwargs)


def retrying_splits(plan: BoundedPlan, policy: RetryPolicy,
                    target: int | None = None) -> Iterator[FileSplit]:
    """``plan.splits(target)`` (cut only for files on the local file system: the local
    engine's rule), planned again after a transient fault, skipping the splits
    already yielded (planning is deterministic: same snapshot, same order, same ids; the
    plan keeps its adaptive cut of ``target``).

    Runs on the caller's (driver) thread. Gives up as :func:`call_with_retry` does:
    a permanent error at once, a transient one after ``policy.max_attempts``
    consecutive failures without a new split.
    """
    done = 0
    failures = 0
    while True:
        produced = 0
        try:
            for split in plan.splits(target, local_only=True):
                produced += 1
                if produced <= done:
                    continue
                done += 1
                failures = 0
                yield split
            return
        except Exception as exc:
            failures += 1
            if not is_transient(exc) or failures >= policy.max_attempts:
                if failures > 1:
                    log.error("planning %s failed after %d attempts: %s: %s",
                              plan.handle.identifier, failures, type(exc).__name__, exc)
                raise
            delay = policy.delay_s(failures)
            log.warning("planning %s failed (attempt %d of %d), re-planning in %.2fs "
                        "after %d splits: %s: %s", plan.handle.identifier, failures,
                        policy.max_attempts, delay, done, type(exc).__name__, exc)
            time.sleep(delay)
