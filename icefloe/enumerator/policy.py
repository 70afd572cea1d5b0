"""The snapshot-kind policy table of the design: emit, emit added files, skip or fail.

| op | default | ignoreDeletes | ignoreChanges | skipChangeCommits | skipDeletes | skipOverwrites |
|-----------|---------|---------|------------|------|------|------|
| append    | emit    | emit    | emit       | emit | emit | emit |
| replace   | skip    | skip    | skip       | skip | skip | skip |
| delete    | fail    | skip    | skip       | skip | skip | fail |
| overwrite | fail    | fail    | emit added | skip | fail | skip |

``skipDeletes`` / ``skipOverwrites`` are Iceberg Spark's ``streaming-skip-delete-snapshots``
/ ``streaming-skip-overwrite-snapshots``: each skips its one operation only (Spark's
``shouldProcess``). With ``appends_only`` (the ``start-snapshot-id`` / ``end-snapshot-id``
aliases: Iceberg's incremental append scan) every snapshot but an append is passed over.
A changelog read (``changelog=true``) emits every snapshot but a replace (a compaction
changes no row), whatever its operation: deletes and overwrites become DELETE rows.
"""

from __future__ import annotations

import enum

from pyiceberg.table.snapshots import Snapshot

from icefloe.errors import SnapshotPolicyError
from icefloe.options import SourceOptions


class Action(enum.Enum):
    EMIT = "emit"
    SKIP = "skip"


def operation_of(snapshot: Snapshot) -> str:
    """The Iceberg operation of a snapshot (``append`` when the summary has none)."""
    summary = snapshot.summary
    if summary is None:
        return "append"
    op = summary.operation
    return str(op.value if hasattr(op, "value") else op)


def decide(snapshot: Snapshot, options: SourceOptions) -> Action:
    """What to do with the changes of ``snapshot``.

    Raises:
        SnapshotPolicyError: a delete or overwrite the options do not allow; the message
            names the snapshot, its operation and the options that would allow it.
    """
    op = operation_of(snapshot)
    if op == "append":
        return Action.EMIT
    if options.changelog:
        return Action.SKIP if op == "replace" else Action.EMIT
    if op == "replace" or options.appends_only:
        return Action.SKIP
    if op == "delete":
        if options.ignore_deletes or options.ignore_changes or options.skip_change_commits \
                or options.skip_deletes:
            return Action.SKIP
        raise SnapshotPolicyError(
            snapshot.snapshot_id, op,
            f"snapshot {snapshot.snapshot_id} is a delete; set ignoreDeletes=true (or "
            "ignoreChanges / skipChangeCommits / skipDeletes) to skip it",
        )
    if op == "overwrite":
        if options.skip_change_commits or options.skip_overwrites:
            return Action.SKIP
        if options.ignore_changes:
            return Action.EMIT
        raise SnapshotPolicyError(
            snapshot.snapshot_id, op,
            f"snapshot {snapshot.snapshot_id} is an overwrite; set ignoreChanges=true to emit "
            "its added files (rows may repeat), or skipOverwrites=true (or skipChangeCommits) "
            "to skip it",
        )
    raise SnapshotPolicyError(
        snapshot.snapshot_id, op,
        f"snapshot {snapshot.snapshot_id} has unknown operation {op!r}; set skipChangeCommits=true "
        "to skip it",
    )
