"""The tuner on Spark: a sample's splits read by Spark tasks, as icefloe's source reads
them. Runs on the driver (the data source's ``read`` on executors).

The splits are packed into tasks on the driver exactly as the ``icefloe`` format packs
a table's (:func:`icefloe.spark.planning.spark_tasks`, ``minPartitions`` = the knob
``parallelism``), and each task runs the ``icefloe`` format's executor read
(:func:`icefloe.spark.datasource.read_partition`); the tasks and the pickled read
context reach the planner worker in the ``payload`` option (pickle: a transient hop,
never stored). A read is ``df.write.format("noop")``: every row reaches the JVM.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from icefloe.spark.datasource import read_partition
from icefloe.spark.planning import spark_tasks
from icefloe.spark.session import session
from icefloe.spark.types import spark_schema
from icefloe.splits import serialize_split
from icefloe.tuning.work import Work

SOURCE_NAME = "icefloe_tune_sample"


class SampleDataSource(DataSource):
    """``spark.read.format("icefloe_tune_sample").schema(...).option("payload", ...)``:
    the tasks of :func:`payload`. Picklable (holds its options only)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def reader(self, schema: StructType) -> SampleReader:
        return SampleReader(self.options["payload"], schema)


class SampleReader(DataSourceReader):
    """Partitions from the payload (planner worker); icefloe's executor read (executors)."""

    def __init__(self, payload: str, schema: StructType) -> None:
        data = json.loads(payload)
        self.context_bytes = base64.b64decode(data["context"])
        self.tasks = [tuple(base64.b64decode(s) for s in task) for task in data["tasks"]]
        self.schema_json = schema.json()

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(task) for task in self.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.context_bytes, self.schema_json, partition.value)


def payload(work: Work) -> str:
    """The ``payload`` option of ``work``: the pickled context and the packed tasks."""
    options = dataclasses.replace(work.options, min_partitions=work.parallelism)
    tasks = spark_tasks(work.splits, options)
    return json.dumps({
        "context": base64.b64encode(pickle.dumps(work.context)).decode(),
        "tasks": [[base64.b64encode(serialize_split(s)).decode() for s in task]
                  for task in tasks],
    })


class SparkEngine:
    """Spark: the running session, else one started on ``master`` (stopped at close)."""

    name = "spark"

    def __init__(self, master: str | None = None) -> None:
        running = SparkSession.getActiveSession()
        self._owned = running is None
        self.spark: Any = running if running is not None else \
            session(master or "local[*]", "icefloe-tune")
        self.spark.dataSource.register(SampleDataSource)

    def cpus(self) -> int:
        return int(self.spark.sparkContext.defaultParallelism)

    def default_parallelism(self) -> int:
        """What ``icefloe.spark.read`` sets ``minPartitions`` to: the session's default
        parallelism."""
        return self.cpus()

    def reader(self, work: Work) -> Callable[[], int]:
        context = work.context
        schema = spark_schema(context.projected_schema, context.metadata_columns,
                              context.changelog)
        df = self.spark.read.format(SOURCE_NAME).schema(schema) \
            .option("payload", payload(work)).load()
        rows = sum(s.record_count for s in work.splits)

        def read() -> int:
            df.write.format("noop").mode("overwrite").save()
            return rows

        return read

    def close(self) -> None:
        if self._owned:
            self.spark.stop()
