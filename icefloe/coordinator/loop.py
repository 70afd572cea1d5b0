"""EnumerationLoop: the continuous enumeration thread of a :class:`Coordinator`.

One cycle: refresh the table (retried by the enumerator; a missing table is waited for
when ``onLineageBreak`` follows re-created tables), enumerate after the
position within the trigger limits (transient faults retried with
:func:`icefloe.retry.call_with_retry`), apply a lineage reset (``onLineageBreak``)
through the coordinator, which writes the reset checkpoint at once, register every
split with the ack tracker (with its unit's phase and snapshot sequence number) and
offer it to the :class:`~icefloe.coordinator.assigner.SplitAssigner`, remember the
Nessie commit hash each snapshot was seen at, pass a schema switch to the coordinator
before the splits read in the new schema, then wait ``pollIntervalMs`` when nothing was
new. Available-now stops at the head pinned when the loop started.

Every cycle reports to the coordinator's
:class:`~icefloe.coordinator.recorder.MetricsRecorder`: the poll's and the planning's
duration, each failed attempt (by operation, through
:func:`icefloe.retry.observe_retries`), what the loop is doing (for ``/healthz``) and how
it ended: a few counter updates per cycle.

Runs on a thread of its own; its error ends the loop and reaches the readers
through the assigner, after the splits enumerated before it.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import TYPE_CHECKING

from icefloe.enumerator.continuous import Limits, SchemaSwitch, UnitEnd
from icefloe.enumerator.lineage import snapshot_by_id
from icefloe.errors import IcefloeError, TableNotFoundError
from icefloe.logs import bind
from icefloe.retry import call_with_retry, observe_retries
from icefloe.splits.split import FileSplit
from icefloe.state.position import Phase, Position

if TYPE_CHECKING:
    from icefloe.coordinator.core import Coordinator

log = logging.getLogger(__name__)


class EnumerationLoop:
    """The enumeration thread's body (module docstring). Owned by one coordinator."""

    def __init__(self, coordinator: Coordinator, position: Position,
                 pinned_head: int | None, available_now: bool) -> None:
        self.coordinator = coordinator
        self.position = position
        self.pinned_head = pinned_head
        self.available_now = available_now
        self.seen_at: dict[int, str] = {}  # snapshot id -> Nessie commit hash seen at
        self._seen_lock = threading.Lock()

    def run(self) -> None:
        """Enumerate until stopped (or, available-now, past the pinned head)."""
        coord = self.coordinator
        stop = coord.stop_event
        try:
            with bind(table=coord.handle.identifier):  # this thread's log lines
                self._run(stop)
        except BaseException as exc:  # delivered to the readers in order
            # a typed error (a schema change under fail, a refused snapshot) says it all;
            # anything else gets its traceback
            log.warning("enumeration of %s failed: %s: %s", coord.handle.identifier,
                        type(exc).__name__, exc, exc_info=not isinstance(exc, IcefloeError),
                        extra={"table": coord.handle.identifier,
                               "error_type": type(exc).__name__})
            coord.recorder.ended(exc)
            coord.assigner.finish(exc)
            return
        coord.recorder.ended(None)
        coord.assigner.finish()

    def _run(self, stop: threading.Event) -> None:
        coord = self.coordinator
        opts = coord.options
        enumerator = coord.enumerator
        limits = Limits.from_options(opts)
        if opts.initial_delay_ms:
            stop.wait(opts.initial_delay_ms / 1000)
        recorder = coord.recorder
        first = True
        while not stop.is_set():
            if not first:
                recorder.set_phase("polling")
                started = time.monotonic()
                with observe_retries(functools.partial(recorder.failed, "refresh")):
                    self._refresh(stop)
                recorder.polled(time.monotonic() - started)
            first = False
            recorder.set_phase("planning")
            started = time.monotonic()
            with observe_retries(functools.partial(recorder.failed, "plan")):
                result = call_with_retry(
                    functools.partial(enumerator.enumerate, self.position, limits,
                                      self.pinned_head),
                    coord.retry, f"enumeration of {coord.handle.identifier}",
                    sleep=stop.wait)
            recorder.planned(time.monotonic() - started, len(result.splits))
            recorder.set_phase("handing")
            if result.reset:
                if not coord.reset_to(result.from_position, result.schema_reset):
                    return
                self.position = result.from_position  # the units' phases count from here
            commit_hash = coord.handle.commit_hash
            for item in result.items:
                if commit_hash is not None:
                    with self._seen_lock:
                        self.seen_at.setdefault(item.snapshot_id, commit_hash)
                if isinstance(item, UnitEnd):
                    coord.tracker.unit_done(item.phase, item.snapshot_id, item.sequence_number)
                    continue
                if isinstance(item, SchemaSwitch):
                    if not coord.schema_switched(item):
                        return
                    continue
                handed = coord.tracker.register(item, *self._unit_hint(item))
                if handed is None:  # acknowledged before the restart
                    continue
                coord.watermarks.register(handed)
                if not coord.assigner.offer(handed, stop):
                    return
            self.position = result.to_position
            if self.available_now and (self.pinned_head is None or (
                    self.position.is_unit_complete
                    and self.position.snapshot_id == self.pinned_head)):
                return
            if not result.items:
                recorder.set_phase("idle")
                stop.wait(opts.poll_interval_ms / 1000)

    def _refresh(self, stop: threading.Event) -> None:
        """Reload the table; the enumerator retries transient faults itself.

        A table that is missing while ``onLineageBreak`` follows a re-created table is
        waited for too (backoff and attempts of the retry policy): dropping and creating a
        table are two commits in most catalogs, and a poll between them must not end a
        stream whose strategy is to follow the new table. With ``fail`` (the default), or
        after the last attempt, the :class:`~icefloe.errors.TableNotFoundError` is raised.
        """
        coord = self.coordinator
        follows = coord.options.on_lineage_break != "fail"
        attempt = 1
        while True:
            try:
                coord.enumerator.refresh()
                return
            except TableNotFoundError as exc:
                if not follows or attempt >= coord.retry.max_attempts or stop.is_set():
                    raise
                delay = coord.retry.delay_s(attempt)
                log.warning("refresh of table %s failed (attempt %d of %d), retrying in "
                            "%.2fs: the table may be being re-created (onLineageBreak=%s): "
                            "%s", coord.handle.identifier, attempt, coord.retry.max_attempts,
                            delay, coord.options.on_lineage_break, exc,
                            extra={"table": coord.handle.identifier,
                                   "error_type": type(exc).__name__})
                stop.wait(delay)
                attempt += 1

    def _unit_hint(self, split: FileSplit) -> tuple[Phase, int]:
        """The phase and snapshot sequence number of the unit ``split`` belongs to."""
        position = self.position
        phase: Phase = "scan" if (position.phase == "scan"
                                  and split.snapshot_id == position.snapshot_id) else "incremental"
        snapshot = self.coordinator.handle.snapshot(split.snapshot_id)
        return phase, snapshot.sequence_number or 0

    def hashes_from(self, position: Position) -> tuple[tuple[int, str], ...]:
        """Nessie hashes of the committed snapshot and later ones (older ones dropped)."""
        seq = position.sequence_number
        metadata = self.coordinator.handle.metadata
        with self._seen_lock:
            seen = sorted(self.seen_at.items())
        keep = []
        for snapshot_id, commit_hash in seen:
            snap = snapshot_by_id(metadata, snapshot_id)
            if snap is None or (snap.sequence_number or 0) >= seq:
                keep.append((snapshot_id, commit_hash))
        return tuple(keep)
