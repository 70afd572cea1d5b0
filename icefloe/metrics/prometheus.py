"""A stream's metrics in the Prometheus text format, and ``/healthz``.

Runs in the process that drives the stream (the CLI's ``icefloe stream
--metrics-port N``, or ``metrics_port=N`` of ``source.stream`` / ``RayStream``). The
HTTP server runs on a daemon thread and answers:

- ``/metrics`` (and any other path but ``/healthz``): every metric of
  :data:`icefloe.coordinator.metrics.METRICS` with the label ``table``, read from
  ``stream.metrics()`` at scrape time (the lag is measured then: nothing is computed
  between scrapes);
- ``/healthz``: ``200 ok`` while the stream is healthy
  (:mod:`icefloe.coordinator.recorder` defines it: enumeration alive, no poll failing,
  the last successful poll recent), else ``503`` and one line saying why.

Uses the ``prometheus_client`` library (the ``icefloe[metrics]`` extra).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from icefloe.coordinator.metrics import METRICS, StreamMetrics, samples
from icefloe.errors import InvalidOptionError

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

EXTRA = "icefloe[metrics]"


def require_prometheus() -> None:
    """Raise a helpful ``ImportError`` when ``prometheus_client`` is missing."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"the Prometheus endpoint needs the {EXTRA} extra (prometheus-client): "
            f"pip install '{EXTRA}'") from exc


class StreamCollector:
    """A ``prometheus_client`` collector reading ``metrics()`` at each scrape."""

    def __init__(self, metrics: Callable[[], StreamMetrics]) -> None:
        self.metrics = metrics

    def describe(self) -> list[Any]:
        return []  # no collect() at registration: the stream may not be started yet

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        values = self.metrics()
        for spec in METRICS:
            labels = ["table", *spec.labels]
            family: Any
            if spec.kind == "counter":
                family = CounterMetricFamily(spec.name.removesuffix("_total"), spec.help,
                                             labels=labels)
            else:
                family = GaugeMetricFamily(spec.name, spec.help, labels=labels)
            for label_values, value in samples(values, spec):
                family.add_metric([values.table, *label_values], value)
            yield family


def registry_of(metrics: Callable[[], StreamMetrics]) -> CollectorRegistry:
    """A registry holding one :class:`StreamCollector` (nothing of the process's)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(StreamCollector(metrics))
    return registry


def render(metrics: StreamMetrics) -> str:
    """``metrics`` in the Prometheus text format."""
    from prometheus_client import generate_latest

    return generate_latest(registry_of(lambda: metrics)).decode()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds is not news


class MetricsServer:
    """``/metrics`` and ``/healthz`` of one stream on ``host:port`` (module docstring).

    Args:
        metrics: the stream's ``metrics`` method (called per request, on the server's
            thread; it must be thread-safe).
        port: TCP port (0: any free one; :attr:`address` says which).
        host: interface to listen on.

    Raises:
        ImportError: without the ``icefloe[metrics]`` extra.
        InvalidOptionError: the port is taken (or the host is not this machine's).
    """

    def __init__(self, metrics: Callable[[], StreamMetrics], port: int,
                 host: str = "127.0.0.1") -> None:
        require_prometheus()
        from prometheus_client import make_wsgi_app
        from prometheus_client.exposition import ThreadingWSGIServer

        self.metrics = metrics
        self._metrics_app = make_wsgi_app(registry_of(metrics))
        try:
            self._server = make_server(host, port, self._app,
                                       server_class=ThreadingWSGIServer,
                                       handler_class=_QuietHandler)
        except OSError as exc:
            raise InvalidOptionError(
                "metrics_port", f"cannot serve metrics on {host}:{port} ({exc}); give a "
                "free port, or 0 for any free one") from exc
        self.address: tuple[str, int] = (host, self._server.server_port)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="icefloe-metrics", daemon=True)
        self._thread.start()

    def health(self) -> tuple[bool, str]:
        """``(healthy, reason)`` of the stream now."""
        try:
            values = self.metrics()
        except Exception as exc:  # a dead Ray actor, say: not healthy, and why
            return False, f"metrics unavailable: {type(exc).__name__}: {exc}"
        return values.healthy, values.health_reason

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]
             ) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            healthy, reason = self.health()
            body = (("ok" if healthy else "unhealthy: " + " ".join(reason.split()))
                    + "\n").encode()
            start_response("200 OK" if healthy else "503 Service Unavailable",
                           [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(body)))])
            return [body]
        return self._metrics_app(environ, start_response)

    def close(self) -> None:
        """Stop serving (idempotent)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
