"""Exporting a stream's metrics where operators look.

- :mod:`icefloe.metrics.prometheus`: the Prometheus text format on ``/metrics`` and a
  ``/healthz`` for supervisors (``icefloe stream --metrics-port``, ``metrics_port=``);
  needs the ``icefloe[metrics]`` extra.
- :mod:`icefloe.ray.metrics` exports the same names through ``ray.util.metrics``.

The values themselves are computed once, in the coordinator
(:class:`icefloe.coordinator.metrics.StreamMetrics`).
"""

from __future__ import annotations
