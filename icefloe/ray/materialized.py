"""A bounded read straight into Ray's object store: ``icefloe.ray.read(..., materialize=True)``.

The same read tasks as the lazy :class:`~icefloe.ray.datasource.IcefloeDatasource` read
(the same splits, packing and ~64 MiB blocks), run as plain Ray tasks rather than by
Ray Data's streaming executor, and handed to ``ray.data.from_arrow_refs``: the result is
a ``MaterializedDataset``, as ``ds.materialize()`` returns.

Why: on a materializing read the executor's resource manager runs one read task at a
time while its cluster limits are still unknown (the first ~1 s) and again once the
materialized blocks pass its object-store budget (half the store by default), so part of
the read uses one core (benchmarks/RESULTS.md, "Ray"). Plain tasks are scheduled by Ray
core on every free CPU from the start. What the caller gives up is what
``ds.materialize()`` gives up, plus laziness: the read runs in the call, the whole result
is held in the object store (Ray spills what does not fit to disk), and Ray's optimizer
cannot push a later ``select_columns`` or ``filter`` into the read (use the ``columns``
and ``filter`` options).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import ray
import ray.data
from ray.data.context import DataContext
from ray.data.dataset import MaterializedDataset

from icefloe.errors import InvalidOptionError

if TYPE_CHECKING:  # the datasource imports this module (materialize=True)
    from icefloe.ray.datasource import IcefloeDatasource

TASK_KWARGS = ("num_cpus", "num_gpus", "memory")
"""``read`` keywords a materialized read accepts besides ``ray_remote_args`` and
``override_num_blocks`` (as ``ray.data.read_datasource`` names them)."""


def run_read_task(read_fn: Callable[[], Iterable[pa.Table]]) -> Iterator[pa.Table]:
    """The blocks of one read task, each returned to the object store as it is made.
    Runs on a Ray worker (as a streaming-generator task)."""
    yield from read_fn()


def read_materialized(source: IcefloeDatasource, num_tasks: int,
                      ray_kwargs: Mapping[str, Any]) -> MaterializedDataset:
    """Run ``source``'s read tasks as Ray tasks; their blocks as a ``MaterializedDataset``.

    Runs on the driver and returns once every task has finished. ``num_tasks`` is the
    parallelism asked of :meth:`IcefloeDatasource.get_read_tasks` (packing gives at least
    that many tasks when there are enough splits). Blocks keep the plan's split order.
    ``ray_kwargs`` may hold ``ray_remote_args`` and :data:`TASK_KWARGS`; tasks are scheduled
    with the current ``DataContext.scheduling_strategy`` unless ``ray_remote_args`` names
    one (the ``DataContext`` is read, never changed).

    Raises:
        InvalidOptionError: a keyword a materialized read does not take (``concurrency``,
            ``parallelism``, datasource arguments).
        DataFileError: (as a ``RayTaskError`` of that type) a read task failed (raised
            once every task has ended; an interrupted collection cancels the tasks).
    """
    unknown = sorted(k for k in ray_kwargs if k not in (*TASK_KWARGS, "ray_remote_args"))
    if unknown:
        raise InvalidOptionError(
            "materialize", f"icefloe.ray.read(materialize=True) does not take "
            f"{', '.join(unknown)}; pass override_num_blocks, ray_remote_args, num_cpus, "
            "num_gpus or memory, or read lazily (materialize=False)")
    remote_args: dict[str, Any] = {
        "scheduling_strategy": DataContext.get_current().scheduling_strategy}
    remote_args.update(ray_kwargs.get("ray_remote_args") or {})
    remote_args.update({k: ray_kwargs[k] for k in TASK_KWARGS if k in ray_kwargs})
    remote_args["num_returns"] = "streaming"
    tasks = source.get_read_tasks(num_tasks)
    run = ray.remote(run_read_task).options(**remote_args)
    generators: list[Any] = [run.remote(task.read_fn) for task in tasks]  # ObjectRefGenerator
    refs: list[Any] = []
    try:
        for generator in generators:
            refs.extend(generator)
    except BaseException:
        for generator in generators:
            ray.cancel(generator)
        raise
    if not refs:
        return ray.data.from_arrow(source.output_schema().empty_table())
    return ray.data.from_arrow_refs(refs)
