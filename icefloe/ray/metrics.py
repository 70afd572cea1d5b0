"""A Ray stream's metrics through ``ray.util.metrics``, so they reach Ray's own endpoint.

Runs in the enumerator actor: :class:`RayMetricsExporter` reads the coordinator's
:class:`~icefloe.coordinator.metrics.StreamMetrics` every ``interval_s`` on a daemon
thread and sets one Ray ``Gauge`` or ``Counter`` per entry of
:data:`~icefloe.coordinator.metrics.METRICS` (same names and help; Ray's exporter adds
its ``ray_`` prefix, and counters are exported under the name without ``_total`` plus
what Ray appends). Counters are advanced by the difference to the last export, so
Ray's counters equal icefloe's. Cost: one metrics read per interval, nothing per batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from icefloe.coordinator.metrics import METRICS, StreamMetrics, samples

log = logging.getLogger(__name__)


def ray_name(name: str) -> str:
    """The name a metric is registered under with ``ray.util.metrics``."""
    return name.removesuffix("_total")


class RayMetricsExporter:
    """Exports ``metrics()`` to ``ray.util.metrics`` every ``interval_s`` (module docstring).

    Args:
        metrics: the coordinator's ``metrics`` (thread-safe).
        interval_s: seconds between exports (Ray's own reporter sends every ~10 s).
    """

    def __init__(self, metrics: Callable[[], StreamMetrics], interval_s: float) -> None:
        from ray.util import metrics as ray_metrics

        self.metrics = metrics
        self.interval_s = interval_s
        self._instruments: dict[str, Any] = {}
        self._last: dict[tuple[str, tuple[str, ...]], float] = {}
        for spec in METRICS:
            kind = ray_metrics.Counter if spec.kind == "counter" else ray_metrics.Gauge
            self._instruments[spec.field] = kind(
                ray_name(spec.name), description=spec.help,
                tag_keys=("table", *spec.labels))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="icefloe-ray-metrics",
                                        daemon=True)
        self._thread.start()

    def export(self) -> None:
        """Set every instrument from ``metrics()`` now."""
        values = self.metrics()
        for spec in METRICS:
            instrument = self._instruments[spec.field]
            for label_values, value in samples(values, spec):
                tags = dict(zip(("table", *spec.labels), (values.table, *label_values),
                                strict=True))
                if spec.kind == "counter":
                    key = (spec.field, label_values)
                    delta = value - self._last.get(key, 0.0)
                    self._last[key] = value
                    if delta > 0:
                        instrument.inc(delta, tags=tags)
                else:
                    instrument.set(value, tags=tags)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.export()
            except Exception as exc:  # metrics must never end the stream
                log.debug("Ray metrics export failed: %s: %s", type(exc).__name__, exc)

    def close(self) -> None:
        """Export once more and stop."""
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.export()
        except Exception as exc:
            log.debug("Ray metrics export failed: %s: %s", type(exc).__name__, exc)
