"""The coordinator of continuous reads: one core, driven by the local stream and Ray.

- :mod:`~icefloe.coordinator.core`: :class:`Coordinator` (enumeration loop, assigner,
  ack tracker, checkpoint session, lag) for one continuous read.
- :mod:`~icefloe.coordinator.loop`: :class:`EnumerationLoop`, its enumeration thread.
- :mod:`~icefloe.coordinator.assigner`: :class:`SplitAssigner`, splits to readers.
- :mod:`~icefloe.coordinator.lag`: :class:`Lag`, from the committed position to the head.
- :mod:`~icefloe.coordinator.metrics`: :class:`StreamMetrics`, what ``stream.metrics()``
  returns, and :data:`~icefloe.coordinator.metrics.METRICS`, their exported names;
  :mod:`~icefloe.coordinator.recorder`: the counters and health behind them.
- :mod:`~icefloe.coordinator.item` and :mod:`~icefloe.coordinator.stream`: what a
  consumer sees, :class:`StreamItem`, :class:`Stats` and :class:`StreamBase` (the API
  of every engine's stream).
- :mod:`~icefloe.coordinator.crash`: the reliability tests' crash points.
"""

from __future__ import annotations

from icefloe.coordinator.assigner import Assignment, SplitAssigner
from icefloe.coordinator.core import Coordinator
from icefloe.coordinator.item import Stats, StreamItem
from icefloe.coordinator.lag import Lag, measure_lag
from icefloe.coordinator.loop import EnumerationLoop
from icefloe.coordinator.metrics import StreamMetrics
from icefloe.coordinator.stream import StreamBase

__all__ = [
    "Assignment",
    "Coordinator",
    "EnumerationLoop",
    "Lag",
    "SplitAssigner",
    "Stats",
    "StreamBase",
    "StreamItem",
    "StreamMetrics",
    "measure_lag",
]
