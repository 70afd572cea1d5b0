"""MetricsRecorder: the counters and the health of one continuous read.

Runs where the coordinator runs. The enumeration loop reports each poll, planning and
failed attempt; the coordinator reports checkpoint writes and finished splits. Every
report is a few counter updates (nothing per batch, nothing that walks the table's
history); :meth:`MetricsRecorder.values` gives them to
:meth:`icefloe.coordinator.Coordinator.metrics` when someone asks.

Health (``/healthz``, :attr:`StreamMetrics.healthy`), in this order:

1. unhealthy once the enumeration ended with an error (the stream is dead);
2. unhealthy while the poll (or its planning) fails and is retried: from the first
   failed attempt until an attempt succeeds;
3. unhealthy when the last successful poll is not *recent* while the loop is polling
   or idle: older than ``2 * pollIntervalMs`` plus the retry budget (the sum of the
   backoff waits of ``maxAttempts`` attempts, ``retryBackoffMs`` doubled each time, capped
   at 10 s each). A loop that is planning or waiting for readers to take its splits
   (backpressure from a slow sink) is working, not stale: the lag metrics show that.

Healthy otherwise, including after an available-now stream finished its enumeration.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Literal

from icefloe.retry import RetryPolicy

Phase = Literal["starting", "polling", "planning", "handing", "idle", "ended"]


def retry_budget_s(policy: RetryPolicy) -> float:
    """Seconds of backoff waits between ``policy.max_attempts`` attempts."""
    return sum(policy.delay_s(attempt) for attempt in range(1, policy.max_attempts))


class MetricsRecorder:
    """Counters of one read (module docstring). Thread-safe: one lock, held briefly.

    Args:
        poll_interval_s: the stream's ``pollIntervalMs``, in seconds.
        retry: the stream's retry policy (``maxAttempts``, ``retryBackoffMs``).
    """

    def __init__(self, poll_interval_s: float, retry: RetryPolicy) -> None:
        self.stale_after_s = 2 * poll_interval_s + retry_budget_s(retry)
        self._lock = threading.Lock()
        now = time.monotonic()
        self.started = now
        self.phase: Phase = "starting"
        self.polls = 0
        self.poll_s = 0.0
        self.last_poll_s = 0.0
        self.last_poll_ok = now
        self.last_poll_ok_unix = time.time()
        self.planning_s = 0.0
        self.last_planning_s = 0.0
        self.discovered = 0
        self.last_discovery = now
        self.consecutive_failures = 0
        self.last_failure = ""
        self.retries: collections.Counter[tuple[str, str]] = collections.Counter()
        self.errors: collections.Counter[tuple[str, str]] = collections.Counter()
        self.checkpoints = 0
        self.checkpoint_s = 0.0
        self.last_checkpoint_s = 0.0
        self.last_checkpoint: float | None = None
        self.checkpoint_bytes = 0
        self.finished_splits = 0
        self.ended_with: str | None = None

    # -- reports -------------------------------------------------------------------------

    def set_phase(self, phase: Phase) -> None:
        """What the enumeration loop does now."""
        self.phase = phase

    def failed(self, operation: str, exc: BaseException, retrying: bool) -> None:
        """A failed attempt of ``operation`` (a :data:`icefloe.retry.RetryListener`)."""
        self.count_failure(operation, type(exc).__name__, retrying, str(exc))

    def count_failure(self, operation: str, error_type: str, retrying: bool,
                      message: str = "") -> None:
        """:meth:`failed` by the error's type name (a failure reported from another
        process: a Ray reader actor's read)."""
        with self._lock:
            key = (operation, error_type)
            if retrying:
                self.retries[key] += 1
            else:
                self.errors[key] += 1
            if operation in ("refresh", "plan"):
                self.consecutive_failures += 1
                self.last_failure = f"{operation} failed: {error_type}: " + \
                    " ".join(message.split())[:200]

    def polled(self, seconds: float) -> None:
        """A successful poll (table refresh) that took ``seconds``."""
        with self._lock:
            self.polls += 1
            self.poll_s += seconds
            self.last_poll_s = seconds
            self.last_poll_ok = time.monotonic()
            self.last_poll_ok_unix = time.time()
            self.consecutive_failures = 0

    def planned(self, seconds: float, splits: int) -> None:
        """An enumeration that took ``seconds`` and found ``splits`` new splits."""
        with self._lock:
            self.planning_s += seconds
            self.last_planning_s = seconds
            self.consecutive_failures = 0
            if splits:
                self.discovered += splits
                self.last_discovery = time.monotonic()

    def split_finished(self) -> None:
        """A split was fully acknowledged."""
        self.finished_splits += 1  # called under the coordinator's lock

    def checkpoint_written(self, seconds: float, nbytes: int) -> None:
        """A checkpoint of ``nbytes`` bytes was written in ``seconds``."""
        with self._lock:
            self.checkpoints += 1
            self.checkpoint_s += seconds
            self.last_checkpoint_s = seconds
            self.last_checkpoint = time.monotonic()
            self.checkpoint_bytes = nbytes

    def ended(self, exc: BaseException | None) -> None:
        """The enumeration loop ended (``exc``: with that error)."""
        with self._lock:
            self.phase = "ended"
            if exc is not None:
                self.errors[("enumeration", type(exc).__name__)] += 1
                self.ended_with = f"enumeration failed: {type(exc).__name__}: " + \
                    " ".join(str(exc).split())[:200]

    # -- reading -------------------------------------------------------------------------

    def health(self, now: float | None = None) -> tuple[bool, str]:
        """``(healthy, reason)`` by the rules of the module docstring."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if self.ended_with is not None:
                return False, self.ended_with
            if self.consecutive_failures:
                return False, (f"{self.consecutive_failures} failed attempt(s) in a row, "
                               f"retrying; last: {self.last_failure}")
            age = now - self.last_poll_ok
            if self.phase in ("polling", "idle") and age > self.stale_after_s:
                return False, (f"no successful poll for {age:.1f}s (limit "
                               f"{self.stale_after_s:.1f}s: 2 x pollIntervalMs + retry "
                               "budget)")
            return True, ""

    def values(self, now: float | None = None) -> dict[str, object]:
        """The recorder's fields of :class:`~icefloe.coordinator.metrics.StreamMetrics`."""
        now = time.monotonic() if now is None else now
        healthy, reason = self.health(now)
        with self._lock:
            return {
                "discovered_splits": self.discovered,
                "finished_splits": self.finished_splits,
                "seconds_since_last_split_discovery": now - self.last_discovery,
                "polls": self.polls,
                "poll_seconds": self.poll_s,
                "last_poll_seconds": self.last_poll_s,
                "planning_seconds": self.planning_s,
                "last_planning_seconds": self.last_planning_s,
                "last_successful_poll_unix": self.last_poll_ok_unix,
                "seconds_since_last_successful_poll": now - self.last_poll_ok,
                "consecutive_failures": self.consecutive_failures,
                "retries": dict(self.retries),
                "errors": dict(self.errors),
                "checkpoints": self.checkpoints,
                "checkpoint_seconds": self.checkpoint_s,
                "last_checkpoint_seconds": self.last_checkpoint_s,
                "checkpoint_age_seconds": None if self.last_checkpoint is None
                else now - self.last_checkpoint,
                "checkpoint_bytes": self.checkpoint_bytes,
                "enumeration_alive": self.phase != "ended",
                "healthy": healthy,
                "health_reason": reason,
            }
