"""The engines the tuner reads on: one read of a sample under one setting, timed by the
caller. Runs on the driver (Spark's and Ray's readers run on their workers).

Each engine reads the sample's splits the way its icefloe adapter reads a table: the
local engine with :func:`icefloe.local.engine.read_splits` (what ``IcebergSource.read``
runs), Spark through a Python data source whose tasks run icefloe's executor read
(:mod:`icefloe.tuning.spark_sample`), Ray through a datasource whose read tasks run
icefloe's Ray read function (:mod:`icefloe.tuning.ray_sample`). Only the planning is the
tuner's: the splits of the sample, planned once per setting, travel to the engine as
split bytes, so every timed read is the read and nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

from icefloe.errors import InvalidOptionError
from icefloe.tuning.work import Work

ENGINES = ("local", "spark", "ray")


class Engine(Protocol):
    """An engine the tuner reads on (opened by :func:`open_engine`, closed after)."""

    name: str

    def cpus(self) -> int:
        """Cores the engine reads with (the machine's, Spark's default parallelism, or
        the Ray cluster's CPUs)."""
        ...

    def default_parallelism(self) -> int:
        """The ``parallelism`` of a read that sets none."""
        ...

    def reader(self, work: Work) -> Callable[[], int]:
        """A function that reads ``work`` to the end and returns the rows read; what it
        needs is prepared here, so a call is the read alone (the caller times calls)."""
        ...

    def close(self) -> None:
        """Stop what :func:`open_engine` started (a session or cluster the caller had
        running stays)."""
        ...


class LocalEngine:
    """The embedded engine: reader threads in this process."""

    name = "local"

    def __init__(self, parallelism: int = 2) -> None:
        self._parallelism = parallelism

    def cpus(self) -> int:
        return os.cpu_count() or 1

    def default_parallelism(self) -> int:
        return self._parallelism

    def reader(self, work: Work) -> Callable[[], int]:
        from icefloe.local.engine import read_splits

        def read() -> int:
            rows = 0
            for item in read_splits(work.splits, work.context, work.parallelism,
                                    work.options.preserve_order):
                rows += item.batch.num_rows
            return rows

        return read

    def close(self) -> None:
        pass


def open_engine(name: str, parallelism: int = 2, master: str | None = None,
                address: str | None = None) -> Engine:
    """Start (or attach to) the engine ``name``: ``local``; ``spark`` on the running
    session, else a new one on ``master`` (default ``local[*]``); ``ray`` on the running
    Ray, else the cluster at ``address``, else a local one.

    Raises:
        InvalidOptionError: an unknown engine name.
        ImportError: the engine's extra is not installed (naming it).
    """
    if name == "local":
        return LocalEngine(parallelism)
    if name == "spark":
        import icefloe.spark
        from icefloe.tuning.spark_sample import SparkEngine

        return SparkEngine(master)
    if name == "ray":
        import icefloe.ray  # noqa: F401  (first: an ImportError naming the extra)
        from icefloe.tuning.ray_sample import RayEngine

        return RayEngine(address)
    raise InvalidOptionError("engine", f"{name!r} is not an engine; give one of "
                             f"{', '.join(ENGINES)}")
