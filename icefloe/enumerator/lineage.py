"""Snapshot lineage of a ref: which snapshots come after a position.

Runs on the enumerator. PyIceberg's ancestor walk with icefloe's typed errors for a
broken lineage and an expired position, over an index of the snapshots by id.

PyIceberg's ``ancestors_of`` finds each parent with ``TableMetadata.snapshot_by_id``, a
linear search of the snapshot list: a walk over a backlog of N snapshots costs N²/2
comparisons (10,000 snapshots: 31 s of a 70 s catch-up, measured). :func:`ancestors`
walks the same chain through a dict built once per metadata object.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from icefloe.errors import ExpiredPositionError, LineageBreakError, SnapshotNotFoundError

_INDEX_LOCK = threading.Lock()
_INDEX: tuple[TableMetadata, dict[int, Snapshot]] | None = None


def snapshot_index(metadata: TableMetadata) -> dict[int, Snapshot]:
    """The snapshots of ``metadata`` by id (built once per metadata object: the last one
    is kept, so a stream that refreshes its table builds it once per new metadata).
    Callers must not modify it. Thread-safe."""
    global _INDEX
    with _INDEX_LOCK:
        cached = _INDEX
        if cached is not None and cached[0] is metadata:
            return cached[1]
        index = {snapshot.snapshot_id: snapshot for snapshot in metadata.snapshots}
        _INDEX = (metadata, index)
        return index


def remember_index(metadata: TableMetadata, index: dict[int, Snapshot]) -> None:
    """Make ``index`` what :func:`snapshot_index` returns for ``metadata`` (the caller
    built it for less than a pass over the snapshots: the metadata parser, from the last
    file's). It must map exactly ``metadata.snapshots`` by id, and nobody may modify it."""
    global _INDEX
    with _INDEX_LOCK:
        _INDEX = (metadata, index)


def snapshot_by_id(metadata: TableMetadata, snapshot_id: int) -> Snapshot | None:
    """``metadata.snapshot_by_id`` through :func:`snapshot_index` (a dict lookup)."""
    return snapshot_index(metadata).get(snapshot_id)


def ancestors(snapshot: Snapshot | None, metadata: TableMetadata) -> Iterator[Snapshot]:
    """``snapshot`` and its ancestors, newest first, as PyIceberg's ``ancestors_of`` (the
    walk ends at a snapshot without a parent or whose parent is not in ``metadata``)."""
    index = snapshot_index(metadata)
    while snapshot is not None:
        yield snapshot
        parent = snapshot.parent_snapshot_id
        if parent is None:
            return
        snapshot = index.get(parent)


def snapshots_between(
    metadata: TableMetadata,
    to_snapshot_inclusive: Snapshot,
    from_snapshot_id_exclusive: int | None,
    *,
    what: str = "table",
) -> list[Snapshot]:
    """Ancestors of ``to_snapshot_inclusive`` after ``from_snapshot_id_exclusive``, oldest first.

    With ``from_snapshot_id_exclusive`` None, every ancestor (the oldest one included).
    An empty list when both are the same snapshot.

    Raises:
        ExpiredPositionError: the from-snapshot is no longer in the table metadata.
        LineageBreakError: the from-snapshot exists but is not an ancestor of the target.
    """
    chain: list[Snapshot] = []
    for snapshot in ancestors(to_snapshot_inclusive, metadata):
        if snapshot.snapshot_id == from_snapshot_id_exclusive:
            chain.reverse()
            return chain
        chain.append(snapshot)
    if from_snapshot_id_exclusive is None:
        chain.reverse()
        return chain
    if snapshot_by_id(metadata, from_snapshot_id_exclusive) is None:
        raise ExpiredPositionError(
            f"snapshot {from_snapshot_id_exclusive} of {what} is no longer in the table metadata "
            "(expired); its successors cannot be found. Set failOnDataLoss=false to continue "
            "from the oldest snapshot still in the lineage"
        )
    raise LineageBreakError(
        f"snapshot {from_snapshot_id_exclusive} of {what} is not an ancestor of snapshot "
        f"{to_snapshot_inclusive.snapshot_id} (rollback or branch reset?). Set onLineageBreak="
        "restartFromStart or restartFromHead to continue"
    )


def snapshot_as_of(metadata: TableMetadata, head: Snapshot | None, timestamp_ms: int,
                   what: str) -> Snapshot:
    """The newest ancestor of ``head`` committed at or before ``timestamp_ms`` (inclusive).

    Raises:
        SnapshotNotFoundError: the timestamp is before the ref's first snapshot.
    """
    oldest = None
    for snapshot in ancestors(head, metadata):
        if snapshot.timestamp_ms <= timestamp_ms:
            return snapshot
        oldest = snapshot
    first = f" (the first is at {oldest.timestamp_ms} ms)" if oldest is not None else ""
    raise SnapshotNotFoundError(
        f"{what} has no snapshot at or before timestamp {timestamp_ms} ms{first}; "
        "give a later timestamp"
    )


def snapshot_current_at(metadata: TableMetadata, timestamp_ms: int, what: str) -> Snapshot:
    """The snapshot that was the table's current one at ``timestamp_ms`` (inclusive).

    Time travel by timestamp, as Iceberg's Java ``SnapshotUtil.snapshotIdAsOfTime``, Spark and
    PyIceberg resolve it: from the snapshot log, so after a rollback a timestamp when the
    abandoned snapshot was current reads that snapshot, not an ancestor of today's head.

    Raises:
        SnapshotNotFoundError: the timestamp is before the first logged snapshot, or the
            snapshot current then was expired.
    """
    log = sorted(metadata.snapshot_log, key=lambda entry: entry.timestamp_ms)
    current = None
    for entry in log:
        if entry.timestamp_ms > timestamp_ms:
            break
        current = entry
    if current is None:
        first = f" (the first is at {log[0].timestamp_ms} ms)" if log else ""
        raise SnapshotNotFoundError(
            f"{what} has no snapshot at or before timestamp {timestamp_ms} ms{first}; "
            "give a later timestamp"
        )
    snapshot = snapshot_by_id(metadata, current.snapshot_id)
    if snapshot is None:
        raise SnapshotNotFoundError(
            f"snapshot {current.snapshot_id}, current in {what} at timestamp {timestamp_ms} ms, "
            "was expired; give a later timestamp"
        )
    return snapshot
