"""Executor side of the Spark batch source: split bytes -> Spark-shaped Arrow batches.

Runs in Spark's Python workers on executors. A worker process serves many tasks of the
same read one after the other (``spark.python.worker.reuse``), so the read context is
unpickled, and the reader and batch conformer built, once per worker and plan.
"""

from __future__ import annotations

import functools
import json
import pickle
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from icefloe.reader import ReadContext, SplitReader
from icefloe.spark.arrow import BatchConformer
from icefloe.splits import deserialize_split


@functools.lru_cache(maxsize=2)
def _reader(context_bytes: bytes, schema_json: str) -> tuple[SplitReader, BatchConformer]:
    context: ReadContext = pickle.loads(context_bytes)
    target = to_arrow_schema(StructType.fromJson(json.loads(schema_json)), timezone="UTC")
    return SplitReader(context), BatchConformer(context.arrow_schema, target)


def read_splits(context_bytes: bytes, schema_json: str,
                splits: Sequence[bytes]) -> Iterator[pa.RecordBatch]:
    """Read ``splits`` in order; yield non-empty batches in the Arrow layout Spark expects.

    Small whole files are read in runs (:meth:`SplitReader.read_many`).

    Args:
        context_bytes: pickled ReadContext (built on the driver).
        schema_json: the DataFrame schema (``StructType.json()``).
        splits: serialized FileSplits.
    """
    reader, conform = _reader(context_bytes, schema_json)
    for batch in reader.read_many(deserialize_split(data) for data in splits):
        yield conform(batch)
