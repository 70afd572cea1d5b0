"""icefloe on Ray: bounded reads as a Ray Dataset, continuous ingestion on Ray actors.

::

    import icefloe.ray
    ds = icefloe.ray.read("ns.events", catalog="local", options={"snapshotId": "123"})
    ds.map_batches(...).write_parquet("out/")

    with icefloe.ray.stream("ns.events", checkpoint="ckpt/", num_readers=4) as stream:
        for item in stream:          # or sink=callable, run in the reader actors
            write(item.batch)
            item.ack()

Needs the ``ray`` extra (``pip install 'icefloe[ray]'``); ``import icefloe`` never
imports Ray.
"""

from __future__ import annotations

# first, before Ray is imported (see the module): Ray's workers use the driver's environment
from icefloe.ray import _uv_env  # noqa: F401  isort: skip

try:
    import ray
    import ray.data  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "icefloe.ray needs Ray Data; install the extra: pip install 'icefloe[ray]'"
    ) from exc

from icefloe.ray.datasource import IcefloeDatasource, default_num_blocks, read
from icefloe.ray.session import BackfillResult, backfill
from icefloe.ray.stream import RayStream, RayStreamItem, stream

__all__ = [
    "BackfillResult",
    "IcefloeDatasource",
    "RayStream",
    "RayStreamItem",
    "backfill",
    "default_num_blocks",
    "read",
    "stream",
]
