"""The changelog oracle: per snapshot S with parent P, DELETE rows = rows(P) - rows(S) and
INSERT rows = rows(S) - rows(P) as multisets, rows(X) being PyIceberg's own scan of X."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyiceberg.table import Table

DATA = ["id", "kind", "ts", "day", "value"]
"""The data columns of the test tables (tests.helpers.tables.EVENTS_SCHEMA)."""


def row_key(row: dict[str, Any], columns: list[str] = DATA) -> tuple[Any, ...]:
    return tuple(row[c] for c in columns)


def rows_at(table: Table, snapshot_id: int | None) -> Counter[tuple[Any, ...]]:
    """PyIceberg's rows of ``snapshot_id`` (none for None) as a multiset."""
    if snapshot_id is None:
        return Counter()
    return Counter(map(row_key, table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist()))


def changes_by_commit(out: pa.Table | Iterable[dict[str, Any]]
                      ) -> dict[int, tuple[Counter[Any], Counter[Any]]]:
    """icefloe's change rows per commit snapshot: (removed rows, added rows)."""
    per: dict[int, tuple[Counter[Any], Counter[Any]]] = {}
    for row in out.to_pylist() if isinstance(out, pa.Table) else out:
        removed, added = per.setdefault(row["_commit_snapshot_id"], (Counter(), Counter()))
        side = removed if row["_change_type"] in ("DELETE", "UPDATE_BEFORE") else added
        side[row_key(row)] += 1
    return per


def check_every_snapshot(table: Table, out: pa.Table | Iterable[dict[str, Any]],
                         skip: Iterable[int] = ()) -> int:
    """Assert the oracle for every snapshot of ``table`` but ``skip``; returns how many
    snapshots changed rows."""
    per = changes_by_commit(out)
    skipped = set(skip)
    changed = 0
    for snapshot in table.snapshots():
        if snapshot.snapshot_id in skipped:
            continue
        before = rows_at(table, snapshot.parent_snapshot_id)
        after = rows_at(table, snapshot.snapshot_id)
        removed, added = per.get(snapshot.snapshot_id, (Counter(), Counter()))
        assert removed == before - after, f"DELETE rows of snapshot {snapshot.snapshot_id}"
        assert added == after - before, f"INSERT rows of snapshot {snapshot.snapshot_id}"
        changed += bool(removed or added)
    return changed
