"""The PySpark Python Data Source ``icefloe`` (batch reads). A thin adapter.

Who runs what:

- ``IcefloeDataSource.__init__`` / ``schema``: Spark's driver-side Python worker, at
  ``load()``. Options are validated here, so a bad option fails ``load()`` with
  ``InvalidOptionError`` (wrapped by PySpark in an ``AnalysisException`` whose message
  holds the original exception's class and text).
- ``IcefloeReader.__init__`` / ``pushFilters`` / ``partitions``: the driver-side planner
  worker. The enumerator runs here; each partition carries serialized split bytes.
  ``pushFilters`` exists only on :class:`IcefloePushdownReader` (option ``pushFilters``).
- ``IcefloeReader.read``: executors. It calls the module-level :func:`read_partition`,
  which imports icefloe only then, so an executor whose Python lacks icefloe fails with
  an ``EngineError`` saying what to install instead of an unpickling error.

PySpark pickles the data source and the reader (with ``read``) into every task. This
module is therefore registered with cloudpickle to be pickled *by value*, and its
classes hold only plain data (strings, bytes, a pyarrow schema, a Spark StructType):
nothing in a task refers to an icefloe object, and the task stays small.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

SOURCE_NAME = "icefloe"


def _missing_icefloe(exc: ImportError) -> Exception:
    message = (
        f"icefloe cannot be imported by this Spark executor's Python ({sys.executable}): "
        f"{exc}. Install it there (pip install 'icefloe[spark]'), or point PYSPARK_PYTHON "
        "at an interpreter that has it."
    )
    try:
        from icefloe.errors import EngineError
    except ImportError:
        return ImportError(f"EngineError: {message}")
    return EngineError(message)


def read_partition(context_bytes: bytes, schema_json: str,
                   splits: Sequence[bytes]) -> Iterator[pa.RecordBatch]:
    """Batches of one Spark partition, in the Arrow layout of ``schema_json``. Executor.

    Args:
        context_bytes: the pickled :class:`~icefloe.reader.ReadContext` of the plan.
        schema_json: the DataFrame's Spark schema as JSON.
        splits: serialized splits, read in order.

    Raises:
        EngineError: icefloe cannot be imported here (or ``ImportError`` whose message
            starts with ``EngineError:`` when not even ``icefloe.errors`` imports).
    """
    try:
        from icefloe.spark.executor import read_splits
    except ImportError as exc:
        raise _missing_icefloe(exc) from exc
    return read_splits(context_bytes, schema_json, splits)


class IcefloeDataSource(DataSource):
    """``spark.read.format("icefloe").option(...).load("namespace.table")``.

    Options are icefloe's bounded-read options (any case, any alias), ``catalog.<prop>``,
    and ``pushFilters`` (default false; see :data:`icefloe.spark.planning.PUSH_FILTERS`).
    Picklable: holds the options only.

    Raises:
        InvalidOptionError: at ``load()``, for any option a bounded read rejects.
    """

    def __init__(self, options: MutableMapping[str, str]) -> None:
        super().__init__(options)
        try:  # the first icefloe import of a planner worker (a Connect server's, too)
            from icefloe.spark.planning import resolve_options
        except ImportError as exc:
            raise _missing_icefloe(exc) from exc

        resolved = resolve_options(options, mode=None)
        self.table = resolved.table
        self.icefloe_options = resolved.options
        self.push_filters = resolved.push_filters

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        """The DataFrame schema from the Iceberg read schema (driver; opens the catalog)."""
        from icefloe.errors import InvalidOptionError
        from icefloe.options import SourceOptions
        from icefloe.spark.planning import SparkPlan

        try:
            SourceOptions.parse(self.icefloe_options).for_mode("bounded")
        except InvalidOptionError:  # stream-only options: this is a readStream
            from icefloe.spark.streaming import stream_schema

            return stream_schema(self.table, self.icefloe_options)
        return SparkPlan(self.table, self.icefloe_options).spark_schema()

    def reader(self, schema: StructType) -> IcefloeReader:
        from icefloe.options import SourceOptions

        SourceOptions.parse(self.icefloe_options).for_mode("bounded")
        kind = IcefloePushdownReader if self.push_filters else IcefloeReader
        return kind(self.table, self.icefloe_options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream.format("icefloe")``: see :mod:`icefloe.spark.streaming`."""
        from icefloe.spark.streaming import IcefloeStreamReader

        return IcefloeStreamReader(self.table, self.icefloe_options, schema)


class IcefloeReader(DataSourceReader):
    """Plans on the driver, reads on executors.

    Pickled state: table id, options, the pickled read context and the schema JSON. The
    planning state (catalog, table metadata) stays on the driver.
    """

    def __init__(self, table: str, options: dict[str, str], schema: StructType) -> None:
        from icefloe.spark.planning import SparkPlan

        self.table = table
        self.schema_json = schema.json()
        self._plan: Any = SparkPlan(table, dict(options))
        self._plan.check_schema(schema)
        self.context_bytes: bytes = self._plan.context_bytes()

    @property
    def pushed_filters(self) -> list[str]:
        """PyIceberg filter texts of the filters Spark pushed (driver only)."""
        return list(self._plan.pushed) if self._plan is not None else []

    def partitions(self) -> list[InputPartition]:
        """One partition per packed task; ``value`` is a tuple of split bytes (driver)."""
        return [InputPartition(task) for task in self._plan.partitions()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of ``partition`` (executor)."""
        if not partition.value:
            return iter(())
        return read_partition(self.context_bytes, self.schema_json, partition.value)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_plan"] = None  # the catalog and table handle never leave the driver
        return state


class IcefloePushdownReader(IcefloeReader):
    """An :class:`IcefloeReader` that takes Spark's filters (option ``pushFilters=true``).

    A separate class because PySpark decides by the presence of ``pushFilters`` whether a
    reader pushes (and refuses one that does while ``spark.sql.python.filterPushdown.enabled``
    is false). Pushed filters are ANDed into the ``filter`` option: they prune partitions and
    files on the driver and are applied per row by the reader, so Spark does not re-apply them.
    """

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        """Take the filters icefloe applies exactly; return the others to Spark (driver)."""
        kept: list[Filter] = self._plan.push(filters)
        self.context_bytes = self._plan.context_bytes()
        return kept


cloudpickle.register_pickle_by_value(sys.modules[__name__])
