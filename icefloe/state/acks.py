"""AckTracker: turns out-of-order sink acknowledgements into a committed position.

Runs where the enumerator runs; acks may arrive from any thread (every public
method takes one lock). Like a Kafka offset commit, the committed position
advances only over a contiguous prefix of fully acknowledged splits and completed
units, never backwards, and memory is released for everything inside that prefix.

Contract with the enumerator, in hand-out order (units in lineage order, ordinals
ascending within a unit):

- ``register(split)`` for every split handed out. A split does not carry its
  unit's phase, nor the snapshot's sequence number (``split.sequence_number`` is
  the data file's), so pass ``phase`` / ``sequence_number`` when known. Without
  them, a split of the unit in progress continues it, and a split of a new
  snapshot opens ``changes(split.snapshot_id)`` whose sequence number is learned
  from ``unit_done`` (until then ``committed()`` does not enter that unit).
- ``unit_done(phase, snapshot_id, sequence_number)`` after the last split of a unit
  (also for a unit with no split).
- After a restore, splits in ``acked_beyond`` may either be skipped (an ordinal gap:
  the tracker treats a gap as acknowledged) or registered (``register`` returns None:
  do not hand it out). A split in ``offsets`` must be registered; ``register``
  returns it resumed at the acknowledged offset. Never skip a split for any other
  reason: a gap is taken as acknowledged data.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from icefloe.errors import UnknownSplitError
from icefloe.splits.split import FileSplit
from icefloe.state.position import Phase, Position

if TYPE_CHECKING:
    from icefloe.state.checkpoint import Checkpoint

__all__ = ["AckTracker", "UnknownSplitError"]


class _Split:
    __slots__ = ("acked", "ordinal", "rows", "split_id")

    def __init__(self, split_id: str, ordinal: int, rows: int, acked: bool) -> None:
        self.split_id = split_id
        self.ordinal = ordinal
        self.rows = rows
        self.acked = acked


class _Unit:
    """A unit after the committed prefix: its registered, not yet committed splits."""

    __slots__ = ("done", "done_through", "last_ordinal", "phase", "sequence_number",
                 "snapshot_id", "splits")

    def __init__(self, phase: Phase, snapshot_id: int, sequence_number: int | None,
                 done_through: int) -> None:
        self.phase = phase
        self.snapshot_id = snapshot_id
        self.sequence_number = sequence_number
        self.done_through = done_through  # ordinals below it are committed
        self.last_ordinal = done_through - 1  # highest ordinal registered (or implied)
        self.splits: deque[_Split] = deque()
        self.done = False

    def name(self) -> str:
        kind = "scan" if self.phase == "scan" else "changes"
        return f"{kind}({self.snapshot_id})"


def _snapshot_of(split_id: str) -> int | None:
    """Snapshot id prefix of an id made by ``make_split_id`` (None if not of that shape)."""
    head, sep, _ = split_id.partition("-")
    if not sep or not head.isdigit():
        return None
    return int(head)


class AckTracker:
    """Tracks handed-out splits and sink acks; yields the committed (exclusive) position.

    Args:
        committed: the committed position to start from (a checkpoint's, or the
            initial position: ``Position("scan", S, seq, 0)`` starts with ``scan(S)``).
        acked_beyond: restored ids of fully acknowledged splits after ``committed``.
        offsets: restored ``split id -> acknowledged source records`` after ``committed``.
    """

    def __init__(self, committed: Position, acked_beyond: Iterable[str] = (),
                 offsets: Iterable[tuple[str, int]] | Mapping[str, int] = ()) -> None:
        self._lock = threading.Lock()
        self._committed = committed
        self._units: deque[_Unit] = deque()
        self._by_id: dict[str, _Split] = {}
        self._in_flight = 0
        # restored state of splits not registered (yet); grouped by snapshot-id prefix
        self._restored_acked: dict[int | None, set[str]] = {}
        for split_id in acked_beyond:
            self._restored_acked.setdefault(_snapshot_of(split_id), set()).add(split_id)
        pairs = offsets.items() if isinstance(offsets, Mapping) else offsets
        self._restored_offsets: dict[str, int] = {s: int(n) for s, n in pairs}
        if committed.snapshot_id is not None and committed.next_ordinal is not None:
            self._units.append(_Unit(committed.phase, committed.snapshot_id,
                                     committed.sequence_number, committed.next_ordinal))

    @classmethod
    def from_checkpoint(cls, ckpt: Checkpoint) -> AckTracker:
        """A tracker restored from ``ckpt``'s position, acked_beyond and offsets."""
        return cls(ckpt.position, ckpt.acked_beyond, ckpt.offsets)

    # -- enumerator side -------------------------------------------------------------

    def register(self, split: FileSplit, phase: Phase | None = None,
                 sequence_number: int | None = None) -> FileSplit | None:
        """Record that ``split`` is handed out next (see the module docstring).

        Args:
            split: the next split in hand-out order.
            phase: its unit's phase (default: the unit in progress, else ``incremental``:
                the only ``scan`` unit is the one a ``scan`` starting position names).
            sequence_number: its unit's snapshot sequence number (not the file's).

        Returns:
            None if a restored checkpoint already acknowledged the whole split (do not
            hand it out); else the split to hand out, resumed at the restored offset.

        Raises:
            ValueError: out of order (ordinal not ascending in its unit, a new unit
                before ``unit_done`` of the previous one, or an id registered twice).
        """
        with self._lock:
            unit = self._unit_for(split, phase, sequence_number)
            if split.ordinal <= unit.last_ordinal:
                raise ValueError(
                    f"split {split.split_id} has ordinal {split.ordinal} but {unit.name()} "
                    f"is already past ordinal {unit.last_ordinal}; register splits in "
                    "hand-out order")
            if split.split_id in self._by_id:
                raise ValueError(f"split {split.split_id} is registered twice")
            group = self._restored_acked.get(_snapshot_of(split.split_id))
            acked = group is not None and split.split_id in group
            if acked:
                assert group is not None
                group.discard(split.split_id)
            rows = max(split.resume_rows, self._restored_offsets.pop(split.split_id, 0))
            entry = _Split(split.split_id, split.ordinal, rows, acked)
            unit.last_ordinal = split.ordinal
            unit.splits.append(entry)
            self._by_id[split.split_id] = entry
            if acked:
                self._advance()
                return None
            self._in_flight += 1
            self._advance()  # an ordinal gap may move the committed position
            return split.with_position(rows) if rows != split.resume_rows else split

    def _open_unit(self) -> _Unit | None:
        return self._units[-1] if self._units and not self._units[-1].done else None

    def _check_not_finished(self, snapshot_id: int, phase: Phase | None, what: str) -> None:
        """Raise if the unit of ``snapshot_id`` is already done (or behind the position)."""
        last = self._units[-1] if self._units else None
        if last is not None:
            finished = last.snapshot_id == snapshot_id and phase in (None, last.phase)
        else:
            finished = self._committed.is_unit_complete and \
                self._committed.snapshot_id == snapshot_id
        if finished:
            raise ValueError(f"{what} of snapshot {snapshot_id} after its unit_done")

    def _unit_for(self, split: FileSplit, phase: Phase | None,
                  sequence_number: int | None) -> _Unit:
        unit = self._open_unit()
        if unit is not None:
            if unit.snapshot_id != split.snapshot_id:
                raise ValueError(
                    f"split {split.split_id} of snapshot {split.snapshot_id} registered "
                    f"before unit_done of {unit.name()}; call unit_done after a unit's "
                    "last split")
            if phase is not None and phase != unit.phase:
                raise ValueError(f"split {split.split_id} registered as {phase} in "
                                 f"{unit.name()}")
            self._learn_sequence(unit, sequence_number)
            return unit
        self._check_not_finished(split.snapshot_id, phase, f"split {split.split_id}")
        unit = _Unit(phase or "incremental", split.snapshot_id, sequence_number, 0)
        self._units.append(unit)
        return unit

    @staticmethod
    def _learn_sequence(unit: _Unit, sequence_number: int | None) -> None:
        if sequence_number is None:
            return
        if unit.sequence_number is None:
            unit.sequence_number = sequence_number
        elif unit.sequence_number != sequence_number:
            raise ValueError(
                f"{unit.name()} has sequence number {unit.sequence_number}, "
                f"not {sequence_number}")

    def unit_done(self, phase: Phase, snapshot_id: int, sequence_number: int) -> None:
        """Record that every split of unit ``phase``/``snapshot_id`` has been registered.

        Raises:
            ValueError: another unit is still open, or this unit was already done.
        """
        with self._lock:
            open_unit = self._open_unit()
            if open_unit is None:
                self._check_not_finished(snapshot_id, phase, "unit_done")
                open_unit = _Unit(phase, snapshot_id, sequence_number, 0)
                self._units.append(open_unit)
            elif open_unit.snapshot_id != snapshot_id or open_unit.phase != phase:
                raise ValueError(
                    f"unit_done of {phase} snapshot {snapshot_id} while {open_unit.name()} "
                    "is still open")
            self._learn_sequence(open_unit, sequence_number)
            open_unit.done = True
            self._advance()

    # -- sink side -------------------------------------------------------------------------

    def ack(self, split_id: str, consumed_rows: int | None = None) -> None:
        """Acknowledge a split: entirely (``None``) or its first ``consumed_rows`` source
        records (counted from the start of the split, resumed records included).

        Partial acks are monotonic (a smaller count than one seen is ignored); acking
        an already fully acked split again is a no-op while it is not yet committed.

        Raises:
            UnknownSplitError (an IcefloeError and a KeyError): the id is not registered,
                or its split is already inside the committed position (acknowledge a
                split once).
            ValueError: a negative ``consumed_rows``.
        """
        if consumed_rows is not None and consumed_rows < 0:
            raise ValueError(f"consumed_rows must be >= 0, got {consumed_rows}")
        with self._lock:
            entry = self._by_id.get(split_id)
            if entry is None:
                if any(split_id in group for group in self._restored_acked.values()):
                    return
                raise UnknownSplitError(
                    f"ack of split {split_id!r}, which is not registered: never handed out, "
                    f"or already acknowledged and committed (committed position: "
                    f"{self._committed.describe()})")
            if entry.acked:
                return
            if consumed_rows is not None:
                entry.rows = max(entry.rows, consumed_rows)
                return
            entry.acked = True
            self._in_flight -= 1
            self._advance()

    # -- state -----------------------------------------------------------------------------

    def committed(self) -> Position:
        """The committed position (exclusive); monotonic over the tracker's life."""
        with self._lock:
            return self._committed

    def in_flight(self) -> int:
        """Registered splits not yet fully acknowledged."""
        with self._lock:
            return self._in_flight

    def checkpoint_state(self) -> tuple[Position, tuple[str, ...], tuple[tuple[str, int], ...]]:
        """``(position, acked_beyond, offsets)`` for a :class:`Checkpoint`, one consistent cut.

        ``acked_beyond``: fully acked splits after the position (hand-out order, then
        restored ones not re-registered). ``offsets``: partly acked splits after it.
        Restored ids not re-registered are kept until their snapshot's unit is
        committed (an id not made by ``make_split_id`` is kept for good: harmless).
        """
        with self._lock:
            acked: list[str] = []
            offsets: list[tuple[str, int]] = []
            for unit in self._units:
                for entry in unit.splits:
                    if entry.acked:
                        acked.append(entry.split_id)
                    elif entry.rows > 0:
                        offsets.append((entry.split_id, entry.rows))
            for group in self._restored_acked.values():
                acked.extend(sorted(group))
            offsets.extend(sorted(self._restored_offsets.items()))
            return self._committed, tuple(acked), tuple(offsets)

    def __repr__(self) -> str:
        with self._lock:
            return (f"AckTracker(committed={self._committed.describe()!r}, "
                    f"in_flight={self._in_flight}, open_units={len(self._units)})")

    # -- the commit rule -------------------------------------------------------------------

    def _inside(self, unit: _Unit) -> bool:
        pos = self._committed
        return pos.next_ordinal is not None and pos.snapshot_id == unit.snapshot_id \
            and pos.phase == unit.phase

    def _advance(self) -> None:
        """Move the committed position over the acknowledged prefix (lock held)."""
        while self._units:
            unit = self._units[0]
            if unit.sequence_number is None:
                return  # cannot name a position inside it yet
            while unit.splits and unit.splits[0].acked:
                entry = unit.splits.popleft()
                del self._by_id[entry.split_id]
                unit.done_through = entry.ordinal + 1
            if unit.splits:
                # ordinals below the head that were never registered were skipped as acked
                through = unit.splits[0].ordinal
            elif unit.done:
                self._units.popleft()
                self._committed = Position.after(unit.snapshot_id, unit.sequence_number)
                self._restored_acked.pop(unit.snapshot_id, None)
                for split_id in [s for s in self._restored_offsets
                                 if _snapshot_of(s) == unit.snapshot_id]:
                    del self._restored_offsets[split_id]
                continue
            else:
                through = unit.done_through
            inside = self._inside(unit)
            if through > 0 and (not inside or through > (self._committed.next_ordinal or 0)):
                self._committed = Position(unit.phase, unit.snapshot_id, unit.sequence_number,
                                           through)
            return
