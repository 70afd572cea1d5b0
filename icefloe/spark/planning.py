"""Driver side of the Spark batch source: options, schema, pushed filters, partitions.

Runs in Spark's driver-side Python planner workers (``DataSource.__init__`` / ``schema``
in one, ``reader`` / ``pushFilters`` / ``partitions`` in another): only these open
the catalog. What they hand to executors is plain data: the pickled
:class:`~icefloe.reader.ReadContext` bytes and serialized split bytes.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import datasource as ds
from pyspark.sql.types import StructType

from icefloe.enumerator.bounded import BoundedPlan, plan_bounded
from icefloe.errors import EngineError, InvalidOptionError
from icefloe.options import ALIASES, OPTION_TABLE, SourceOptions
from icefloe.source import IcebergSource
from icefloe.spark import filters as spark_filters
from icefloe.spark.types import spark_schema
from icefloe.splits import FileSplit, pack_for, serialize_split

log = logging.getLogger(__name__)

TABLE_KEYS = ("path", "table")
"""Options naming the table: ``load("ns.events")`` sets ``path``."""


def min_tasks(options: SourceOptions) -> int:
    """The Spark tasks a read spreads over at least: ``minPartitions`` (default: the cores
    of the machine that plans, which is the driver's; ``icefloe.spark.read`` passes the
    session's ``defaultParallelism``)."""
    return options.min_partitions or os.cpu_count() or 1


def spark_tasks(splits: Iterable[FileSplit], options: SourceOptions) -> list[list[FileSplit]]:
    """Splits packed into Spark tasks as Spark sizes file partitions: about ``splitSize``
    bytes each, but small enough for at least :func:`min_tasks` tasks. Runs on the
    driver."""
    return pack_for(splits, options.split_size, options.split_open_file_cost,
                    min_tasks(options))


def _case_map() -> dict[str, str]:
    """Lower-cased option key -> its spelling in icefloe (Spark lower-cases every key).

    When two spellings collide (``startSnapshotId`` of a bounded read and the stream alias
    ``startSnapshotID``), the bounded one wins: this source only serves bounded reads.
    """
    mapping: dict[str, str] = {}
    for alias, canonical in ALIASES.items():
        mapping.setdefault(alias.lower(), alias)
        if "bounded" in OPTION_TABLE[canonical][1]:
            mapping[alias.lower()] = alias
    for canonical, (_, modes) in OPTION_TABLE.items():
        if "bounded" in modes or canonical.lower() not in mapping:
            mapping[canonical.lower()] = canonical
    return mapping


_CASE_MAP = _case_map()


@dataclass(frozen=True)
class SparkOptions:
    """Spark's options, resolved. Plain picklable values.

    Attributes:
        table: the table identifier (``load("ns.events")``).
        options: icefloe options in icefloe's spelling (validated for a bounded read).
        push_filters: the adapter option ``pushFilters`` (default false): push Spark's
            filters into the scan (see :data:`PUSH_FILTERS` for the caveat).
    """

    table: str
    options: dict[str, str]
    push_filters: bool = False


PUSH_FILTERS = "pushFilters"
"""Adapter option. PySpark 4.3 keeps the read plan of a filter-pushdown scan on the
DataFrame's relation and reuses it for that DataFrame's later queries that push no filter
(``df.filter("id < 5").count()`` then ``df.count()`` returns 5 rows), so pushdown is
opt-in; each ``load()`` gets its own relation. It also needs the session setting
``spark.sql.python.filterPushdown.enabled=true``. The ``filter`` option prunes the same way
without either."""


def _parse_flag(name: str, value: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidOptionError(name, f"{value!r} is not a boolean; use true or false")


def resolve_options(spark_options: Mapping[str, str],
                    mode: str | None = "bounded") -> SparkOptions:
    """Split Spark's (lower-cased) options into table, icefloe options and adapter options.

    Keys get back their icefloe spelling; ``catalog.<prop>`` keys pass unchanged.
    The icefloe options are validated for a bounded read.

    Raises:
        InvalidOptionError: no table (``load()`` without a path), several tables, or any
            option icefloe rejects (unknown, unparseable, contradictory, stream-only).
    """
    table: str | None = None
    push_filters = False
    options: dict[str, str] = {}
    for key, value in spark_options.items():
        lower = key.lower()
        if lower in TABLE_KEYS:
            table = value
        elif lower == PUSH_FILTERS.lower():
            push_filters = _parse_flag(PUSH_FILTERS, value)
        elif lower == "paths":
            raise InvalidOptionError("path", "give exactly one table: load('namespace.table')")
        elif lower.startswith("catalog."):
            options[key] = value
        else:
            options[_CASE_MAP.get(lower, key)] = value
    if not table:
        raise InvalidOptionError(
            "path", "no table given; use spark.read.format('icefloe').load('namespace.table')"
        )
    parsed = SourceOptions.parse(options)
    if mode is not None:
        parsed.for_mode(mode)  # type: ignore[arg-type]
    else:  # load(): batch or stream is not known yet; valid for at least one of them
        try:
            parsed.for_mode("bounded")
        except InvalidOptionError:
            parsed.for_mode("continuous")
    return SparkOptions(table, options, push_filters)


@dataclass
class SparkPlan:
    """A resolved read on the driver: the table handle stays here, never pickled.

    Attributes:
        table: the table identifier.
        options: icefloe options (icefloe spelling), without pushed filters.
        pushed: PyIceberg filter texts of the pushed Spark filters, ANDed with ``filter``.
    """

    table: str
    options: dict[str, str]
    pushed: list[str] = field(default_factory=list)
    _source: IcebergSource | None = None
    _plan: tuple[tuple[str, ...], BoundedPlan] | None = None

    @property
    def source(self) -> IcebergSource:
        if self._source is None:
            self._source = IcebergSource(self.table, options=self.options)
        return self._source

    def source_options(self) -> SourceOptions:
        """The bounded-read options, with the pushed filters ANDed into ``filter``."""
        base = SourceOptions.parse(self.options).for_mode("bounded")
        combined = spark_filters.combine(base.filter, self.pushed)
        if combined == base.filter:
            return base
        raw = {k: v for k, v in self.options.items() if k not in ("filter", "row_filter")}
        raw["filter"] = combined  # type: ignore[assignment]
        return SourceOptions.parse(raw).for_mode("bounded")

    def bounded(self) -> BoundedPlan:
        """The icefloe bounded plan (opens the catalog on first use; cached per pushed set)."""
        key = tuple(self.pushed)
        if self._plan is None or self._plan[0] != key:
            self._plan = (key, plan_bounded(self.source.handle, self.source_options()))
        return self._plan[1]

    def spark_schema(self) -> StructType:
        """The DataFrame schema (read schema's columns, then metadata columns)."""
        context = self.bounded().context
        return spark_schema(context.projected_schema, context.metadata_columns,
                            context.changelog)

    def push(self, filters: Iterable[ds.Filter]) -> list[ds.Filter]:
        """Push what translates exactly; return the filters Spark must still apply."""
        schema = self.bounded().context.projected_schema
        pushed, kept = spark_filters.split_filters(filters, schema)
        self.pushed.extend(pushed)
        if pushed:
            log.info("pushed to icefloe: %s; left to Spark: %d filter(s)", pushed, len(kept))
        return kept

    def context_bytes(self) -> bytes:
        """The pickled read context every executor task receives."""
        return pickle.dumps(self.bounded().context)

    def source_arrow_schema(self) -> pa.Schema:
        """The Arrow schema of the batches icefloe's reader yields."""
        return self.bounded().context.arrow_schema

    def partitions(self) -> list[tuple[bytes, ...]]:
        """Serialized splits packed into tasks (:func:`spark_tasks`), in plan order; a
        plan of fewer splits than :func:`min_tasks` is cut into about that many when
        ``splitSize`` is not set (the adaptive split size, as Iceberg's Spark reader with
        its ``defaultParallelism``: :meth:`BoundedPlan.adaptive_cut`)."""
        plan = self.bounded()
        options = plan.options
        if options.net_changes:  # the net effect of a range is computed in one task
            tasks = [tuple(serialize_split(split) for split in plan.splits())]
        else:
            tasks = [tuple(serialize_split(split) for split in task)
                     for task in spark_tasks(plan.splits(min_tasks(options)), options)]
        log.info("planned %d split(s) in %d Spark partition(s) for %s (filter %r)",
                 sum(len(t) for t in tasks), len(tasks), self.table, options.filter)
        return tasks

    def check_schema(self, schema: StructType) -> None:
        """Reject a user-specified schema naming columns the read does not produce.

        Raises:
            EngineError: naming the unknown columns.
        """
        known = set(self.source_arrow_schema().names)
        unknown = [name for name in schema.fieldNames() if name not in known]
        if unknown:
            raise EngineError(
                f"the schema given to spark.read names {unknown}, which table {self.table} "
                f"does not have (its columns: {sorted(known)}); drop .schema(...) or fix it"
            )
