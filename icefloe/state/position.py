"""Position: how far along a ref's lineage the enumeration (or the sink) has come.

A position names an enumeration *unit* and how much of it is done. Units, in
lineage order, are ``scan(S)`` (the initial full scan of snapshot S) and
``changes(S)`` (the data files snapshot S added). Positions are totally ordered
along one lineage:

- ``Position("scan", S, seq, k)``: inside the full scan of S; splits with ordinal < k
  are done (k is exclusive: the next split to hand out has ordinal k).
- ``Position("incremental", S, seq, k)``: inside the changes of S, same meaning of k.
- ``Position("incremental", S, seq, None)``: S and everything before it are done;
  enumeration continues with the snapshots AFTER S (exclusive).
- ``Position("incremental", None, 0, None)``: nothing done yet, start with the
  oldest snapshot of the lineage.

A completed ``scan(S)`` is the same as ``Position("incremental", S, seq, None)``.

Ordinals number a unit's splits in the order they are handed out: the deterministic file
order, or with ``watermarkColumn`` the event-time order (a split's ordinal is its rank by
the column's lower bound; why, in :mod:`icefloe.enumerator.event_time`). The plan
fingerprint of a checkpoint records which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Phase = Literal["scan", "incremental"]


@dataclass(frozen=True, slots=True, order=False)
class Position:
    """An exclusive enumeration position (see the module docstring)."""

    phase: Phase
    snapshot_id: int | None
    sequence_number: int
    next_ordinal: int | None

    @classmethod
    def beginning(cls) -> Position:
        """Before the oldest snapshot: every snapshot of the lineage is still to come."""
        return cls("incremental", None, 0, None)

    @classmethod
    def after(cls, snapshot_id: int, sequence_number: int) -> Position:
        """Everything through ``snapshot_id`` (inclusive) is done."""
        return cls("incremental", snapshot_id, sequence_number, None)

    @property
    def is_unit_complete(self) -> bool:
        """True when the position lies between units (no split ordinal inside one)."""
        return self.next_ordinal is None

    @property
    def last_complete_snapshot_id(self) -> int | None:
        """The newest snapshot whose data is fully done (None if none)."""
        if self.next_ordinal is None:
            return self.snapshot_id
        return None

    def sort_key(self) -> tuple[int, int, int]:
        """Order along one lineage (sequence numbers increase along a lineage)."""
        phase_rank = 0 if self.phase == "scan" else 1
        if self.next_ordinal is None:
            return (self.sequence_number, 2, 0)
        return (self.sequence_number, phase_rank, self.next_ordinal)

    def to_obj(self) -> list[Any]:
        return [self.phase, self.snapshot_id, self.sequence_number, self.next_ordinal]

    @classmethod
    def from_obj(cls, obj: Any) -> Position:
        phase, snapshot_id, seq, ordinal = obj
        if phase not in ("scan", "incremental"):
            raise ValueError(f"unknown position phase {phase!r}")
        return cls(phase, snapshot_id, seq, ordinal)

    def describe(self) -> str:
        if self.snapshot_id is None:
            return "before the first snapshot"
        if self.next_ordinal is None:
            return f"after snapshot {self.snapshot_id} (exclusive)"
        unit = "full scan" if self.phase == "scan" else "changes"
        return f"{unit} of snapshot {self.snapshot_id}, from split #{self.next_ordinal}"
