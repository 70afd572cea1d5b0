"""StreamMetrics: the one value of a continuous read's metrics, and their names.

:class:`StreamMetrics` is what ``stream.metrics()`` returns on every engine; it is built
by the coordinator (:meth:`icefloe.coordinator.Coordinator.metrics`) from counters it
keeps anyway (:mod:`~icefloe.coordinator.recorder`) and the lag of the committed
position (:mod:`~icefloe.coordinator.lag`). Engines only export it:
:mod:`icefloe.metrics.prometheus` (the CLI's ``--metrics-port``, ``metrics_port=``) and
:mod:`icefloe.ray.metrics` (``ray.util.metrics``), both from :data:`METRICS`, the one
table of names, types and meanings (the README's Metrics section lists the same).

Names follow the anchors: Iceberg's Flink source (``pendingRecords``,
``unassignedSplits``, ``assignedSplits``, ``finishedSplits``,
``elapsedSecondsSinceLastSplitDiscovery``), Kafka's consumer lag, Delta's
``numFilesOutstanding`` / ``numBytesOutstanding``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["gauge", "counter"]


@dataclass(frozen=True, slots=True)
class StreamMetrics:
    """A continuous read's metrics at one moment (all engines; README "Metrics").

    Lag is measured from the committed (acknowledged) position to the branch head
    (:class:`~icefloe.coordinator.lag.Lag`); counters count since the stream started in
    this process (a restart starts them at 0, as Prometheus counters expect).

    Attributes:
        table: the table read (``namespace.table``).
        lag_snapshots: snapshots not all committed (a unit in progress counts whole).
        lag_records: records those snapshots add (Kafka's lag, in records).
        lag_files: data files they add (Delta's ``numFilesOutstanding``).
        lag_bytes: bytes of those files (Delta's ``numBytesOutstanding``).
        lag_seconds: age of the oldest snapshot not all committed (0 when caught up).
        head_snapshot_id: the branch head the lag is measured against (None: empty).
        committed_snapshot_id: the snapshot of the committed position (None: nothing).
        pending_splits: splits enumerated and waiting for a reader (Flink's
            ``unassignedSplits``).
        pending_records: records of those splits (Flink's ``pendingRecords``).
        pending_bytes: bytes of those splits.
        assigned_splits: splits handed to readers and not yet fully acknowledged
            (Flink's ``assignedSplits``).
        discovered_splits: splits enumerated (counter).
        finished_splits: splits fully acknowledged (Flink's ``finishedSplits``; counter).
        seconds_since_last_split_discovery: since the last poll that found new splits, or
            since the start when none did yet (Flink's
            ``elapsedSecondsSinceLastSplitDiscovery``).
        polls: successful polls of the catalog (table refreshes; counter).
        poll_seconds: time spent in successful polls, the backoff of retried attempts
            included (counter; rate / polls = mean).
        last_poll_seconds: duration of the last successful poll.
        planning_seconds: time spent enumerating (planning splits; counter).
        last_planning_seconds: duration of the last enumeration.
        last_successful_poll_unix: wall-clock time (seconds since the epoch) of the last
            successful poll (the stream's start before the first).
        seconds_since_last_successful_poll: age of that poll.
        consecutive_failures: failed attempts of the poll or planning in a row (0 once
            one succeeds).
        retries: failed attempts that were retried, by ``(operation, error type)``;
            operations: ``refresh`` (catalog poll), ``plan`` (manifest reads),
            ``checkpoint`` (store writes), ``read`` (a split's data read by a reader; a
            transient fault re-reads it from the last record delivered).
        errors: failures that were not retried (permanent, or the last attempt), by
            ``(operation, error type)``; an ``enumeration`` error ended the stream.
        checkpoints: checkpoints written (counter).
        checkpoint_seconds: time spent writing checkpoints (counter).
        last_checkpoint_seconds: duration of the last checkpoint write.
        checkpoint_age_seconds: since the last checkpoint write (None: none written).
        checkpoint_bytes: size of the last checkpoint written (0: none).
        rows: rows delivered to the consumer (counter; on Ray: what the reader actors
            gave to the sink or the driver's outbox, as last reported with a split
            request).
        batches: batches delivered to the consumer (counter; on Ray as ``rows``).
        reader_busy_seconds: time readers spent reading and decoding, summed over the
            readers (counter; not waiting for splits or for the consumer; a retry's
            backoff counts).
        enumeration_alive: the enumeration loop runs (False once it failed or finished).
        healthy: see :meth:`icefloe.coordinator.recorder.MetricsRecorder.health`.
        health_reason: one line saying why not healthy ("" when healthy).
    """

    table: str
    lag_snapshots: int = 0
    lag_records: int = 0
    lag_files: int = 0
    lag_bytes: int = 0
    lag_seconds: float = 0.0
    head_snapshot_id: int | None = None
    committed_snapshot_id: int | None = None
    pending_splits: int = 0
    pending_records: int = 0
    pending_bytes: int = 0
    assigned_splits: int = 0
    discovered_splits: int = 0
    finished_splits: int = 0
    seconds_since_last_split_discovery: float = 0.0
    polls: int = 0
    poll_seconds: float = 0.0
    last_poll_seconds: float = 0.0
    planning_seconds: float = 0.0
    last_planning_seconds: float = 0.0
    last_successful_poll_unix: float = 0.0
    seconds_since_last_successful_poll: float = 0.0
    consecutive_failures: int = 0
    retries: Mapping[tuple[str, str], int] = field(default_factory=dict)
    errors: Mapping[tuple[str, str], int] = field(default_factory=dict)
    checkpoints: int = 0
    checkpoint_seconds: float = 0.0
    last_checkpoint_seconds: float = 0.0
    checkpoint_age_seconds: float | None = None
    checkpoint_bytes: int = 0
    rows: int = 0
    batches: int = 0
    reader_busy_seconds: float = 0.0
    enumeration_alive: bool = True
    healthy: bool = True
    health_reason: str = ""


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """How one :class:`StreamMetrics` field is exported.

    Attributes:
        field: the attribute of :class:`StreamMetrics`.
        name: the Prometheus / Ray name (``icefloe_`` prefix; counters end in ``_total``).
        kind: ``gauge`` or ``counter``.
        help: one line: what it measures, in which unit.
        labels: extra label names (``retries`` / ``errors``: ``operation``, ``error``).
    """

    field: str
    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()


_BY_KIND = ("operation", "error")

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("lag_snapshots", "icefloe_lag_snapshots", "gauge",
               "Snapshots after the committed position (not all acknowledged)."),
    MetricSpec("lag_records", "icefloe_lag_records", "gauge",
               "Records those snapshots add (Kafka's lag); a snapshot the stream's policy "
               "skips (a `replace` compaction, a skipped delete or overwrite) adds none."),
    MetricSpec("lag_files", "icefloe_lag_files", "gauge",
               "Data files those snapshots add (Delta's numFilesOutstanding)."),
    MetricSpec("lag_bytes", "icefloe_lag_bytes", "gauge",
               "Bytes of those files (Delta's numBytesOutstanding)."),
    MetricSpec("lag_seconds", "icefloe_lag_seconds", "gauge",
               "Age of the oldest commit not all acknowledged, in seconds."),
    MetricSpec("pending_splits", "icefloe_pending_splits", "gauge",
               "Splits waiting for a reader (Flink's unassignedSplits)."),
    MetricSpec("pending_records", "icefloe_pending_records", "gauge",
               "Records of the splits waiting for a reader (Flink's pendingRecords)."),
    MetricSpec("pending_bytes", "icefloe_pending_bytes", "gauge",
               "Bytes of the splits waiting for a reader."),
    MetricSpec("assigned_splits", "icefloe_assigned_splits", "gauge",
               "Splits held by readers, not fully acknowledged (Flink's assignedSplits)."),
    MetricSpec("discovered_splits", "icefloe_discovered_splits_total", "counter",
               "Splits enumerated."),
    MetricSpec("finished_splits", "icefloe_finished_splits_total", "counter",
               "Splits fully acknowledged (Flink's finishedSplits)."),
    MetricSpec("seconds_since_last_split_discovery",
               "icefloe_seconds_since_last_split_discovery", "gauge",
               "Seconds since a poll last found new splits "
               "(Flink's elapsedSecondsSinceLastSplitDiscovery)."),
    MetricSpec("polls", "icefloe_polls_total", "counter", "Successful catalog polls."),
    MetricSpec("poll_seconds", "icefloe_poll_seconds_total", "counter",
               "Seconds spent in successful catalog polls."),
    MetricSpec("last_poll_seconds", "icefloe_last_poll_seconds", "gauge",
               "Duration of the last successful catalog poll, in seconds."),
    MetricSpec("planning_seconds", "icefloe_planning_seconds_total", "counter",
               "Seconds spent planning splits."),
    MetricSpec("last_planning_seconds", "icefloe_last_planning_seconds", "gauge",
               "Duration of the last planning, in seconds."),
    MetricSpec("last_successful_poll_unix", "icefloe_last_successful_poll_timestamp_seconds",
               "gauge", "Unix time of the last successful catalog poll."),
    MetricSpec("consecutive_failures", "icefloe_consecutive_failures", "gauge",
               "Failed poll or planning attempts in a row (0 once one succeeds)."),
    MetricSpec("retries", "icefloe_retries_total", "counter",
               "Failed attempts that were retried, by operation and error type.", _BY_KIND),
    MetricSpec("errors", "icefloe_errors_total", "counter",
               "Failures not retried (permanent or last attempt), by operation and error "
               "type.", _BY_KIND),
    MetricSpec("checkpoints", "icefloe_checkpoints_total", "counter",
               "Checkpoints written."),
    MetricSpec("checkpoint_seconds", "icefloe_checkpoint_seconds_total", "counter",
               "Seconds spent writing checkpoints."),
    MetricSpec("last_checkpoint_seconds", "icefloe_last_checkpoint_seconds", "gauge",
               "Duration of the last checkpoint write, in seconds."),
    MetricSpec("checkpoint_age_seconds", "icefloe_checkpoint_age_seconds", "gauge",
               "Seconds since the last checkpoint write (absent before the first)."),
    MetricSpec("checkpoint_bytes", "icefloe_checkpoint_bytes", "gauge",
               "Size of the last checkpoint written, in bytes."),
    MetricSpec("rows", "icefloe_rows_total", "counter", "Rows delivered."),
    MetricSpec("batches", "icefloe_batches_total", "counter", "Batches delivered."),
    MetricSpec("reader_busy_seconds", "icefloe_reader_busy_seconds_total", "counter",
               "Seconds readers spent reading and decoding (summed over readers)."),
    MetricSpec("enumeration_alive", "icefloe_enumeration_alive", "gauge",
               "1 while the enumeration loop runs."),
    MetricSpec("healthy", "icefloe_healthy", "gauge",
               "1 when /healthz answers 200 (enumeration alive, last poll recent)."),
)
"""Every exported metric, in README order. Each has the label ``table``."""


def samples(metrics: StreamMetrics, spec: MetricSpec) -> list[tuple[tuple[str, ...], float]]:
    """``(label values, value)`` of ``spec`` in ``metrics`` (no sample for a None)."""
    value = getattr(metrics, spec.field)
    if spec.labels:
        return [(tuple(key), float(count)) for key, count in sorted(value.items())]
    if value is None:
        return []
    return [((), float(value))]
