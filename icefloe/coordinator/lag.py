"""Lag: how far the committed (acknowledged) position is behind the branch head.

Measured from the committed position, never from how far enumeration got: a stream
that planned everything but whose sink acknowledged nothing is as far behind as one
that planned nothing. Computed from the table metadata the coordinator already holds
(no catalog call).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from icefloe.enumerator.policy import Action, decide
from icefloe.errors import SnapshotPolicyError

if TYPE_CHECKING:
    from pyiceberg.table.snapshots import Snapshot

    from icefloe.enumerator.continuous import ContinuousEnumerator
    from icefloe.options import SourceOptions
    from icefloe.state.position import Position


@dataclass(frozen=True, slots=True)
class Lag:
    """How far the committed position is behind the branch head.

    Attributes:
        snapshots: snapshots whose changes are not all committed (the unit in progress
            counts whole).
        records: records those snapshots add (their summaries' ``added-records``; a scan
            in progress counts the snapshot's ``total-records``), counting only the
            snapshots the stream reads rows from: a snapshot its policy skips (a
            ``replace`` compaction, a skipped delete or overwrite) adds no records,
            files or bytes to the lag, though it counts in ``snapshots``.
        files: data files those snapshots add (``added-data-files``; a scan in progress:
            ``total-data-files``), Delta's ``numFilesOutstanding``.
        bytes: bytes of those files (``added-files-size``; a scan in progress:
            ``total-files-size``), Delta's ``numBytesOutstanding``.
        seconds: age of the oldest snapshot not all committed (0.0 when caught up).
        head_snapshot_id: the branch head measured against (None: no snapshot yet).
    """

    snapshots: int = 0
    records: int = 0
    seconds: float = 0.0
    head_snapshot_id: int | None = None
    files: int = 0
    bytes: int = 0

    @property
    def snapshots_behind(self) -> int:
        """Same as :attr:`snapshots` (the name the status line uses)."""
        return self.snapshots

    @property
    def seconds_behind(self) -> float:
        """Same as :attr:`seconds`."""
        return self.seconds


_TOTALS = {"records": "total-records", "files": "total-data-files",
           "bytes": "total-files-size"}
_ADDED = {"records": "added-records", "files": "added-data-files",
          "bytes": "added-files-size"}


def summary_int(snapshot: Snapshot, key: str) -> int:
    """The integer ``key`` of ``snapshot``'s summary (``total-data-files``,
    ``added-files-size``, ...); 0 where the summary or the key is missing or not a number."""
    summary = snapshot.summary
    value = summary.additional_properties.get(key) if summary is not None else None
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def _read(snapshot: Snapshot, options: SourceOptions) -> bool:
    """Whether the stream reads rows of ``snapshot`` (its policy does not skip it; one
    it would stop at counts: those rows are what the stream is waiting behind)."""
    try:
        return decide(snapshot, options) is Action.EMIT
    except SnapshotPolicyError:
        return True


def measure_lag(committed: Position, enumerator: ContinuousEnumerator,
                now_s: float | None = None) -> Lag:
    """The :class:`Lag` of ``committed`` against ``enumerator``'s current branch head.

    Raises:
        LineageError: ``committed`` left the lineage (the enumeration loop handles it).
    """
    head = enumerator.head()
    if head is None:
        return Lag()
    behind: list[tuple[Snapshot, dict[str, str] | None]] = []  # None: adds nothing
    if committed.snapshot_id is not None and committed.next_ordinal is not None:
        # the unit in progress: its rest is behind too
        current = enumerator.handle.snapshot(committed.snapshot_id)
        behind.append((current, _TOTALS if committed.phase == "scan" else _ADDED))
    behind.extend((s, _ADDED if _read(s, enumerator.options) else None)
                  for s in enumerator.snapshots_after(committed, head))
    if not behind:
        return Lag(head_snapshot_id=head.snapshot_id)
    now = time.time() if now_s is None else now_s
    oldest_ms = behind[0][0].timestamp_ms

    def total(what: str) -> int:
        return sum(summary_int(s, keys[what]) for s, keys in behind if keys is not None)

    return Lag(
        snapshots=len(behind),
        records=total("records"),
        seconds=max(0.0, now - oldest_ms / 1000),
        head_snapshot_id=head.snapshot_id,
        files=total("files"),
        bytes=total("bytes"),
    )
