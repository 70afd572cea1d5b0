"""One read of the tuner's sample (:class:`Work`): what every engine is handed.

Its own module so that the engines (:mod:`icefloe.tuning.engines`,
:mod:`icefloe.tuning.spark_sample`, :mod:`icefloe.tuning.ray_sample`) share it without
importing each other. Runs on the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from icefloe.options import SourceOptions
from icefloe.reader.context import ReadContext
from icefloe.splits.split import FileSplit


@dataclass(frozen=True)
class Work:
    """One read: ``splits`` (in plan order) with ``context`` and ``options`` on
    ``parallelism`` (threads, ``minPartitions`` or read tasks)."""

    splits: Sequence[FileSplit]
    context: ReadContext
    options: SourceOptions
    parallelism: int
