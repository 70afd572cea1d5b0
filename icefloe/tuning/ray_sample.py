"""The tuner on Ray: a sample's splits read by Ray Data read tasks, as icefloe's
datasource reads them. Runs on the driver (the read tasks on Ray workers).

The splits are packed into read tasks as :class:`icefloe.ray.IcefloeDatasource` packs a
table's (:func:`icefloe.splits.pack_for`, never fewer tasks than the blocks Ray asks for:
the knob ``parallelism`` is ``override_num_blocks``), and each task runs icefloe's Ray
read function (:func:`icefloe.ray.datasource.read_task_blocks`). A read iterates every
block's batches on the driver.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import Any

import ray
import ray.data
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from icefloe.ray.datasource import default_num_blocks, read_task_blocks
from icefloe.ray.session import ray_session
from icefloe.reader.context import ReadContext
from icefloe.splits import pack_for, serialize_split
from icefloe.splits.split import FileSplit
from icefloe.tuning.work import Work


class SampleDatasource(Datasource):
    """The splits of one :class:`Work` as Ray read tasks. Lives on the driver."""

    def __init__(self, splits: Sequence[FileSplit], context: ReadContext, split_size: int,
                 open_file_cost: int) -> None:
        super().__init__()
        self.splits = list(splits)
        self.context = context
        self.split_size = split_size
        self.open_file_cost = open_file_cost

    def get_name(self) -> str:
        return "IcefloeTuneSample"

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(s.length for s in self.splits)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        tasks = []
        schema = self.context.arrow_schema
        for group in pack_for(self.splits, self.split_size, self.open_file_cost,
                              max(parallelism, 1)):
            metadata = BlockMetadata(num_rows=None, size_bytes=sum(s.length for s in group),
                                     exec_stats=None,
                                     input_files=tuple(dict.fromkeys(s.file_path
                                                                     for s in group)))
            read_fn = functools.partial(read_task_blocks,
                                        tuple(serialize_split(s) for s in group),
                                        self.context, None)
            tasks.append(ReadTask(read_fn, metadata, schema=schema,
                                  per_task_row_limit=per_task_row_limit))
        return tasks


class RayEngine:
    """Ray: the running Ray, else the cluster at ``address``, else a local Ray (shut down
    at close)."""

    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(ray_session(address))

    def cpus(self) -> int:
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def default_parallelism(self) -> int:
        """The blocks ``icefloe.ray.read`` asks for: twice the cluster's CPUs."""
        return default_num_blocks() or 2 * self.cpus()

    def reader(self, work: Work) -> Callable[[], int]:
        source = SampleDatasource(work.splits, work.context, work.options.split_size,
                                  work.options.split_open_file_cost)

        def read() -> int:
            dataset = ray.data.read_datasource(source, override_num_blocks=work.parallelism)
            return sum(batch.num_rows for batch in
                       dataset.iter_batches(batch_size=None, batch_format="pyarrow"))

        return read

    def close(self) -> None:
        self._stack.close()
