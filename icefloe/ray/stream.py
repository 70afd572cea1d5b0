"""Continuous ingestion on Ray actors: one enumerator actor, a pool of reader actors.

The FLIP-27 split-request loop on Ray (the actors are in :mod:`icefloe.ray.actors`):

- ``EnumeratorActor`` (one, ``num_cpus=0``) runs the
  :class:`~icefloe.coordinator.Coordinator`, the same core as the local stream: it opens
  the catalog itself (catalog name + ``catalog.<prop>`` options: catalog objects do not
  always pickle), restores the checkpoint (a new start and a lineage reset are
  checkpointed at once), enumerates with retries on a thread of its own, hands splits
  to readers on request (a reader holds at most ``max_in_flight_per_reader``
  unacknowledged splits: backpressure), records acks and writes checkpoints (with the
  Nessie hashes of the committed snapshots) at most every ``checkpoint_interval_s`` and
  on close. When a reader dies, its unacknowledged splits are handed out again first,
  resumed at their acknowledged record offset.
- ``ReaderActor`` (``num_readers``) pulls a split, reads it with
  :func:`icefloe.local.worker.read_run` and either calls the ``sink`` (in the actor;
  the reader acks each batch once the sink returns) or keeps the batches in a small
  outbox the driver polls (the driver's consumer acks, like the local stream).
- :class:`RayStream` (the driver) creates the actors, supervises the readers
  (replacing dead ones), and iterates items (the stream API of
  :class:`~icefloe.coordinator.stream.StreamBase`) or waits.

Metrics: the enumerator actor exports the stream's metrics through ``ray.util.metrics``
every ``metrics_interval_s`` (:mod:`icefloe.ray.metrics`: Ray's metrics endpoint);
:meth:`RayStream.metrics` returns them on the driver, and ``metrics_port`` serves them
in the Prometheus text format from the driver too. Rows, batches and reader busy time
are what the reader actors delivered (to the sink, or to the driver's outbox) as they
last reported it (with each split request).

Delivery is at least once: a restart, or a reader's death, re-delivers only what was
not acknowledged; ``item.ack(wait=True)`` and a sink's ``acked(item)`` tell when an
ack is recorded (and checkpointed, when due). The driver's death ends the job's actors:
restart it on the same checkpoint.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import ray
from pyiceberg.catalog import Catalog
from ray.exceptions import RayActorError

from icefloe.catalog.loader import catalog_options
from icefloe.coordinator.item import StreamItem
from icefloe.coordinator.lag import Lag
from icefloe.coordinator.metrics import StreamMetrics
from icefloe.coordinator.stream import RawItem, StreamBase
from icefloe.enumerator.schema_track import SchemaChange
from icefloe.errors import InvalidOptionError
from icefloe.ray.actors import EnumeratorActor, ReaderActor, Sink
from icefloe.reader.context import ReadContext
from icefloe.source import IcebergSource
from icefloe.state.position import Position

log = logging.getLogger(__name__)



def catalog_as_options(catalog: str | Catalog | None,
                       options: Mapping[str, Any] | None) -> tuple[str | None, dict[str, Any]]:
    """``(catalog name, options)`` that reopen ``catalog`` in another process.

    A ``Catalog`` object becomes its name plus ``catalog.<prop>`` options, the embedded
    catalog (None / ``local``) ``catalog.home`` as the driver resolves it
    (:func:`icefloe.catalog.loader.catalog_options`); options given explicitly win. Runs on
    the driver.

    Raises:
        EngineError: a catalog object of a type icefloe cannot re-open by properties.
    """
    opts = dict(options or {})
    props: dict[str, Any] = dict(catalog_options(catalog))
    name = props.pop("catalog", None)
    return (catalog if not isinstance(catalog, Catalog) else name), {**props, **opts}


RayStreamItem = StreamItem
"""The stream item of every engine (:class:`icefloe.coordinator.item.StreamItem`)."""


_EnumeratorRemote = ray.remote(EnumeratorActor)
_ReaderRemote = ray.remote(ReaderActor)


# -- the driver ------------------------------------------------------------------------------


class RayStream(StreamBase):
    """A continuous read on Ray actors (see the module docstring). Runs on the driver.

    Driver mode (no ``sink``) has the API of every icefloe stream
    (:class:`~icefloe.coordinator.stream.StreamBase`): ``for item in stream``,
    ``item.ack()``, ``stop()``, ``lag``, ``stats``. With a ``sink``, call :meth:`run`.

    Args:
        table: ``namespace.table``.
        catalog: catalog name or ``Catalog`` (reopened in the enumerator actor from its
            name and properties); None for the embedded default.
        options: continuous-read options (``catalog.<prop>`` included).
        checkpoint: checkpoint directory / URI reachable from the enumerator actor's node;
            None keeps progress in memory.
        num_readers: reader actors.
        sink: None (iterate the stream on the driver and ack items), or a picklable
            callable / object with ``write(item)`` run in the reader actors.
        available_now: process what exists at start (the head then), then end.
        max_in_flight_per_reader: unacknowledged splits a reader may hold.
        checkpoint_interval_s: minimum seconds between checkpoint writes (0: every ack).
        reader_num_cpus: CPUs each reader actor reserves.
        metrics_interval_s: seconds between exports to ``ray.util.metrics`` (0: none).
        metrics_port / metrics_host: the Prometheus endpoint on the driver
            (:class:`~icefloe.coordinator.stream.StreamBase`; None: none).
        task_events: record the enumerator's and readers' actor calls as Ray task events
            (Ray's task list and timeline). Off by default: a stream makes several calls
            per split for as long as it runs, and Ray keeps each event in its GCS (up to
            ``RAY_task_events_max_num_task_in_gcs``): the soak measured +300 MB of GCS
            memory in 30 minutes with them on, none with them off.
    """

    def __init__(self, table: str, catalog: str | Catalog | None = None,
                 options: Mapping[str, Any] | None = None, checkpoint: str | None = None,
                 num_readers: int = 2, sink: Sink | None = None, available_now: bool = False,
                 max_in_flight_per_reader: int = 2, checkpoint_interval_s: float = 1.0,
                 reader_num_cpus: float = 1.0, metrics_interval_s: float = 5.0,
                 metrics_port: int | None = None, metrics_host: str = "127.0.0.1",
                 task_events: bool = False) -> None:
        super().__init__(metrics_port, metrics_host)
        if num_readers < 1:
            raise InvalidOptionError("num_readers", f"must be >= 1, got {num_readers}")
        self.table = table
        self.catalog_name, self.options = catalog_as_options(catalog, options)
        IcebergSource(table, self.catalog_name, self.options).options.for_mode("continuous")
        self.checkpoint = checkpoint
        self.num_readers = num_readers
        self.sink = sink
        self.available_now = available_now
        self.max_in_flight_per_reader = max_in_flight_per_reader
        self.checkpoint_interval_s = checkpoint_interval_s
        self.reader_num_cpus = reader_num_cpus
        self.metrics_interval_s = metrics_interval_s
        self.task_events = task_events
        self._last_metrics: StreamMetrics | None = None
        self.readers: dict[str, Any] = {}
        self.replaced: list[str] = []
        self._context: ReadContext | None = None
        self._last_lag = Lag()

    @property
    def rows(self) -> int:
        """Rows delivered to the driver's consumer."""
        return self.stats.rows

    def _open(self) -> None:
        """Create the enumerator actor (restores the checkpoint) and the reader actors."""
        self.enumerator: Any = _EnumeratorRemote.options(
            num_cpus=0, enable_task_events=self.task_events).remote(
            self.table, self.catalog_name, self.options, self.checkpoint,
            self.available_now, self.max_in_flight_per_reader,
            max(4, 2 * self.num_readers * self.max_in_flight_per_reader),
            self.checkpoint_interval_s, self.metrics_interval_s)
        context, base = ray.get(self.enumerator.start.remote())  # type: ignore[attr-defined]
        self._context = context
        self._base_schema_id = base
        for _ in range(self.num_readers):
            self._add_reader()

    def _add_reader(self) -> str:
        reader_id = f"reader-{uuid.uuid4().hex[:8]}"
        self.readers[reader_id] = _ReaderRemote.options(
            num_cpus=self.reader_num_cpus, enable_task_events=self.task_events).remote(
            reader_id, self.enumerator, self._context, self.sink,
            base_schema_id=self._base_schema_id)
        return reader_id

    def _replace(self, reader_id: str) -> str:
        """A reader died: reassign its splits, start another reader."""
        self.readers.pop(reader_id, None)
        ray.get(self.enumerator.reader_failed.remote(reader_id))
        self.replaced.append(reader_id)
        return self._add_reader()

    def _schema_change(self, schema_id: int) -> SchemaChange | None:
        return ray.get(self.enumerator.schema_change.remote(schema_id))

    def _send_ack(self, split_id: str, consumed: int | None, wait: bool) -> None:
        ack = self.enumerator.ack.remote(split_id, consumed)
        if wait:
            ray.get(ack)

    def status(self) -> dict[str, Any]:
        """The enumerator's view: committed position, in-flight and pending splits."""
        return dict(ray.get(self.enumerator.status.remote()))

    def committed(self) -> Position:
        """The committed (acknowledged, exclusive) position."""
        return self.status()["committed"]

    _watermark_per_item = False  # a remote call: once per split's first item

    def _watermark(self) -> int | None:
        return ray.get(self.enumerator.watermark.remote())

    @property
    def lag(self) -> Lag:
        """How far the committed position is behind the branch head, measured now (the
        last measure once the stream is stopped)."""
        if self._started and not self._closed:
            self._last_lag = ray.get(self.enumerator.lag.remote())
        return self._last_lag

    def metrics(self) -> StreamMetrics:
        """The stream's metrics, from the enumerator actor (the last ones once stopped).

        Raises:
            RuntimeError: the stream was never started.
        """
        if self._started and not self._closed:
            self._last_metrics = ray.get(self.enumerator.metrics.remote())
        if self._last_metrics is None:
            raise RuntimeError("the stream is not started: no metrics yet")
        return self._last_metrics

    def describe(self) -> dict[str, Any]:
        """Committed position, lag, throughput and the actors' state, for displays."""
        status = self.status()
        return {**super().describe(), "in_flight": status["in_flight"],
                "pending": status["pending"], "readers": len(self.readers),
                "replaced": len(self.replaced)}

    # -- sink mode --------------------------------------------------------------------

    def run(self, max_seconds: float | None = None, check_interval_s: float = 0.5) -> bool:
        """Sink mode: supervise the readers until the stream finishes (available-now: all
        acknowledged), :meth:`stop` or ``max_seconds``. Returns True when finished."""
        if self.sink is None:
            raise InvalidOptionError("sink", "run() needs a sink; without one, iterate the "
                                     "stream")
        self.start()
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        while not self._stopping.is_set():
            if deadline is not None and time.monotonic() > deadline:
                return False
            self._supervise(check_interval_s)
            if self.available_now and self.status()["finished"]:
                return True
        return False

    def _supervise(self, timeout_s: float) -> None:
        pings = {ray_id: actor.ping.remote() for ray_id, actor in self.readers.items()}
        ready, _ = ray.wait(list(pings.values()), num_returns=len(pings), timeout=timeout_s)
        done = set(ready)
        for reader_id, ref in pings.items():
            if ref not in done:
                continue  # busy or still starting: asked again next round
            try:
                ray.get(ref)
            except RayActorError:
                self._replace(reader_id)

    # -- driver mode ------------------------------------------------------------------

    def __iter__(self) -> Iterator[StreamItem]:
        """Driver mode: the stream's items; ack each once the sink has it.

        Available-now ends once every split is acknowledged or, for a consumer that
        does not ack everything, once enumeration is done and every reader reported
        idle after that (a reader still starting, or one that cannot be scheduled, no
        longer holds the end back when everything is acknowledged).
        """
        if self.sink is not None:
            raise InvalidOptionError("sink", "this stream has a sink; call run() instead "
                                     "of iterating")
        return super().__iter__()

    def _batches(self) -> Iterator[RawItem]:
        polls: dict[Any, tuple[str, float]] = {}

        def submit(reader_id: str) -> None:
            ref = self.readers[reader_id].poll.remote()
            polls[ref] = (reader_id, time.monotonic())

        for reader_id in list(self.readers):
            submit(reader_id)
        drained_at: float | None = None
        idle_since: dict[str, float] = {}
        last_status = 0.0
        while not self._stopping.is_set():
            ready, _ = ray.wait(list(polls), num_returns=1, timeout=0.5)
            for ref in ready:
                reader_id, submitted = polls.pop(ref)
                try:
                    items, idle = ray.get(ref)
                except RayActorError:
                    if self._stopping.is_set():
                        return
                    idle_since.pop(reader_id, None)
                    submit(self._replace(reader_id))
                    continue
                if idle:
                    idle_since[reader_id] = submitted
                else:
                    idle_since.pop(reader_id, None)
                for batch, split, consumed, last in items:
                    yield batch, split, consumed, last, reader_id
                    if self._stopping.is_set():
                        return
                if reader_id in self.readers:
                    submit(reader_id)
            if self.available_now and time.monotonic() - last_status > 0.2:
                last_status = time.monotonic()
                try:
                    status = self.status()  # ordered after this driver's acks
                except RayActorError:
                    if self._stopping.is_set():
                        return  # stop() from another thread ended the actors
                    raise
                if status["finished"]:
                    return  # all acknowledged: a reader still starting has nothing new
                if drained_at is None and status["drained"]:
                    drained_at = time.monotonic()
                if drained_at is not None and all(
                        idle_since.get(r, -1.0) > drained_at for r in self.readers):
                    return

    # -- shutdown ---------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Stop the readers, write the final checkpoint, end the actors."""
        try:
            self._last_lag = ray.get(self.enumerator.lag.remote(), timeout=30)
        except Exception as exc:  # the lag is for display only
            log.debug("lag not read at stop: %s", exc)
        try:
            self._last_metrics = ray.get(self.enumerator.metrics.remote(), timeout=30)
        except Exception as exc:  # for display only
            log.debug("metrics not read at stop: %s", exc)
        stops = [actor.stop.remote() for actor in self.readers.values()]
        ray.wait(stops, num_returns=len(stops), timeout=15)
        try:
            ray.get(self.enumerator.close.remote(), timeout=60)
        finally:
            for actor in self.readers.values():
                ray.kill(actor)
            ray.kill(self.enumerator)


def stream(table: str, catalog: str | Catalog | None = None,
           options: Mapping[str, Any] | None = None, checkpoint: str | None = None,
           num_readers: int = 2, sink: Sink | None = None, **kwargs: Any) -> RayStream:
    """A started :class:`RayStream` (use as a context manager). Runs on the driver.

    Without ``sink`` iterate it and ack items; with ``sink`` call :meth:`RayStream.run`.
    """
    s = RayStream(table, catalog=catalog, options=options, checkpoint=checkpoint,
                  num_readers=num_readers, sink=sink, **kwargs)
    s.start()
    return s
