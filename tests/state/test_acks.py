"""AckTracker: contiguous-prefix commits, out-of-order and partial acks, restore, threads."""

from __future__ import annotations

import dataclasses
import queue
import random
import threading
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icefloe.splits import FileSplit
from icefloe.state import AckTracker, Checkpoint, Position, UnknownSplitError, plan_fingerprint
from icefloe.state.position import Phase


def _split(snapshot_id: int, ordinal: int) -> FileSplit:
    return FileSplit(
        split_id=f"{snapshot_id}-{ordinal:04x}", file_path=f"/wh/{snapshot_id}/{ordinal}.parquet",
        file_format="PARQUET", start=0, length=100, record_count=10, file_size=100,
        file_record_count=10, spec_id=0, partition=(), snapshot_id=snapshot_id,
        sequence_number=1, ordinal=ordinal,
    )


def _sid(snapshot_id: int, ordinal: int) -> str:
    return _split(snapshot_id, ordinal).split_id


def _scan_of_three() -> AckTracker:
    tracker = AckTracker(Position("scan", 1, 1, 0))
    for k in range(3):
        assert tracker.register(_split(1, k)) == _split(1, k)
    tracker.unit_done("scan", 1, 1)
    return tracker


def test_in_order_acks_advance_one_split_at_a_time() -> None:
    tracker = _scan_of_three()
    assert tracker.committed() == Position("scan", 1, 1, 0)
    assert tracker.in_flight() == 3
    tracker.ack(_sid(1, 0))
    assert tracker.committed() == Position("scan", 1, 1, 1)
    tracker.ack(_sid(1, 1))
    assert tracker.committed() == Position("scan", 1, 1, 2)
    tracker.ack(_sid(1, 2))
    assert tracker.committed() == Position.after(1, 1)
    assert tracker.in_flight() == 0
    assert tracker.checkpoint_state() == (Position.after(1, 1), (), ())
    # the next units: changes(2) with hints, changes(3) without
    tracker.register(_split(2, 0), phase="incremental", sequence_number=2)
    tracker.ack(_sid(2, 0))
    assert tracker.committed() == Position("incremental", 2, 2, 1)
    tracker.unit_done("incremental", 2, 2)
    assert tracker.committed() == Position.after(2, 2)


def test_out_of_order_acks_commit_only_a_contiguous_prefix() -> None:
    tracker = _scan_of_three()
    tracker.ack(_sid(1, 2))
    tracker.ack(_sid(1, 1))
    assert tracker.committed() == Position("scan", 1, 1, 0)
    assert tracker.checkpoint_state() == (
        Position("scan", 1, 1, 0), (_sid(1, 1), _sid(1, 2)), ())
    assert tracker.in_flight() == 1
    tracker.ack(_sid(1, 0))
    assert tracker.committed() == Position.after(1, 1)
    assert tracker.checkpoint_state() == (Position.after(1, 1), (), ())


def test_partial_acks_are_offsets_and_monotonic() -> None:
    tracker = _scan_of_three()
    tracker.ack(_sid(1, 0), 7)
    tracker.ack(_sid(1, 0), 3)  # smaller: ignored
    tracker.ack(_sid(1, 2))
    tracker.ack(_sid(1, 1), 0)
    assert tracker.checkpoint_state() == (
        Position("scan", 1, 1, 0), (_sid(1, 2),), ((_sid(1, 0), 7),))
    assert tracker.in_flight() == 2
    tracker.ack(_sid(1, 0))
    assert tracker.committed() == Position("scan", 1, 1, 1)  # split 1 only partly acked
    assert tracker.checkpoint_state()[2] == ()  # a 0-record ack is no offset
    tracker.ack(_sid(1, 1), 5)
    assert tracker.checkpoint_state()[1:] == ((_sid(1, 2),), ((_sid(1, 1), 5),))
    with pytest.raises(ValueError, match=">= 0"):
        tracker.ack(_sid(1, 1), -1)


def test_unit_with_zero_splits() -> None:
    tracker = AckTracker(Position.after(1, 1))
    tracker.unit_done("incremental", 2, 2)
    assert tracker.committed() == Position.after(2, 2)
    # behind an unacked split it waits
    tracker.register(_split(3, 0), sequence_number=3)
    tracker.unit_done("incremental", 3, 3)
    tracker.unit_done("incremental", 4, 4)
    assert tracker.committed() == Position.after(2, 2)
    tracker.ack(_sid(3, 0))
    assert tracker.committed() == Position.after(4, 4)
    # a scan of an empty table
    empty = AckTracker(Position("scan", 9, 5, 0))
    empty.unit_done("scan", 9, 5)
    assert empty.committed() == Position.after(9, 5)


def test_unknown_sequence_number_holds_the_position_until_unit_done() -> None:
    tracker = AckTracker(Position.after(1, 1))
    tracker.register(_split(2, 0))  # no hints: changes(2), sequence number unknown
    tracker.ack(_sid(2, 0))
    assert tracker.committed() == Position.after(1, 1)
    assert tracker.checkpoint_state()[1] == (_sid(2, 0),)
    tracker.register(_split(2, 1), phase="incremental", sequence_number=2)
    assert tracker.committed() == Position("incremental", 2, 2, 1)
    tracker.ack(_sid(2, 1))
    tracker.unit_done("incremental", 2, 2)
    assert tracker.committed() == Position.after(2, 2)


def test_unknown_and_committed_split_ids_raise_key_error() -> None:
    tracker = _scan_of_three()
    with pytest.raises(KeyError, match="not registered") as info:
        tracker.ack("nope")
    assert isinstance(info.value, UnknownSplitError)
    assert "'nope'" in str(info.value)
    tracker.ack(_sid(1, 0))
    tracker.ack(_sid(1, 2))
    tracker.ack(_sid(1, 2))  # acked again before commit: no-op
    with pytest.raises(UnknownSplitError):
        tracker.ack(_sid(1, 0))  # already committed and released


def test_contract_violations_are_value_errors() -> None:
    tracker = AckTracker(Position("scan", 1, 1, 0))
    tracker.register(_split(1, 3))
    with pytest.raises(ValueError, match="ordinal"):
        tracker.register(_split(1, 2))
    with pytest.raises(ValueError, match="twice"):
        tracker.register(dataclasses.replace(_split(1, 3), ordinal=4))
    with pytest.raises(ValueError, match="before unit_done"):
        tracker.register(_split(2, 0))
    with pytest.raises(ValueError, match="still open"):
        tracker.unit_done("incremental", 2, 2)
    with pytest.raises(ValueError, match="registered as"):
        tracker.register(_split(1, 5), phase="incremental")
    with pytest.raises(ValueError, match="sequence number"):
        tracker.register(_split(1, 5), sequence_number=7)
    tracker.unit_done("scan", 1, 1)
    with pytest.raises(ValueError, match="after its unit_done"):
        tracker.unit_done("scan", 1, 1)
    with pytest.raises(ValueError, match="after its unit_done"):
        tracker.register(_split(1, 9))


def test_restore_gives_the_same_position_and_resumes() -> None:
    tracker = AckTracker(Position("scan", 1, 1, 0))
    for k in range(6):
        tracker.register(_split(1, k))
    tracker.unit_done("scan", 1, 1)
    tracker.ack(_sid(1, 0))
    tracker.ack(_sid(1, 2))
    tracker.ack(_sid(1, 4))
    tracker.ack(_sid(1, 1), 4)
    state = tracker.checkpoint_state()
    assert state == (Position("scan", 1, 1, 1), (_sid(1, 2), _sid(1, 4)), ((_sid(1, 1), 4),))
    ckpt = Checkpoint("ns.t", "u", "main", plan_fingerprint(None, True, 1), state[0],
                      state[1], state[2])
    restored = AckTracker.from_checkpoint(ckpt)
    assert restored.committed() == tracker.committed()
    assert restored.checkpoint_state() == state
    # re-plan from the position: 2 is registered (-> None), 4 skipped (an ordinal gap)
    resumed = restored.register(_split(1, 1))
    assert resumed is not None and resumed.resume_rows == 4
    assert restored.register(_split(1, 2)) is None
    assert restored.register(_split(1, 3)) == _split(1, 3)
    assert restored.register(_split(1, 5)) == _split(1, 5)
    restored.unit_done("scan", 1, 1)
    assert restored.in_flight() == 3
    restored.ack(_sid(1, 1))
    assert restored.committed() == Position("scan", 1, 1, 3)
    restored.ack(_sid(1, 3))
    assert restored.committed() == Position("scan", 1, 1, 5)  # over the gap at 4
    assert _sid(1, 4) in restored.checkpoint_state()[1]  # kept until scan(1) is committed
    restored.ack(_sid(1, 5))
    assert restored.checkpoint_state() == (Position.after(1, 1), (), ())


def test_restored_ids_of_a_later_unit_are_released_when_it_commits() -> None:
    tracker = AckTracker(Position("incremental", 5, 5, 1), acked_beyond=[_sid(6, 0)],
                         offsets={_sid(6, 1): 3})
    tracker.register(_split(5, 1))
    tracker.unit_done("incremental", 5, 5)
    resumed = tracker.register(_split(6, 1), sequence_number=6)  # ordinal 0 skipped
    assert resumed is not None and resumed.resume_rows == 3
    tracker.ack(_sid(6, 0))  # a restored ack repeated: fine
    tracker.ack(_sid(5, 1))
    assert tracker.committed() == Position("incremental", 6, 6, 1)
    tracker.ack(_sid(6, 1))
    tracker.unit_done("incremental", 6, 6)
    assert tracker.checkpoint_state() == (Position.after(6, 6), (), ())


def test_committed_is_monotonic_under_threads() -> None:
    """Registration on one thread, acks (partial then full, out of order) on six others."""
    tracker = AckTracker(Position.after(0, 0))
    inboxes: list[queue.Queue[str | None]] = [queue.Queue() for _ in range(6)]
    stop = threading.Event()
    errors: list[str] = []

    def watch() -> None:
        last = tracker.committed().sort_key()
        while not stop.is_set():
            now = tracker.committed().sort_key()
            if now < last:
                errors.append(f"went back from {last} to {now}")
            last = now

    def acker(inbox: queue.Queue[str | None], seed: int) -> None:
        rng = random.Random(seed)
        held: list[str] = []
        while True:
            item = inbox.get()
            if item is not None:
                held.append(item)
            while held and (item is None or len(held) > 4):
                split_id = held.pop(rng.randrange(len(held)))
                tracker.ack(split_id, 1)
                tracker.ack(split_id)
            if item is None:
                return

    threads = [threading.Thread(target=watch)] + [
        threading.Thread(target=acker, args=(inbox, i)) for i, inbox in enumerate(inboxes)]
    for thread in threads:
        thread.start()
    rng = random.Random(7)
    for u in range(1, 21):
        for k in range(50):
            tracker.register(_split(u, k), sequence_number=u)
            rng.choice(inboxes).put(_sid(u, k))
        tracker.unit_done("incremental", u, u)
    for inbox in inboxes:
        inbox.put(None)
    for thread in threads[1:]:
        thread.join()
    stop.set()
    threads[0].join()
    assert not errors
    assert tracker.committed() == Position.after(20, 20)
    assert tracker.in_flight() == 0


# -- property: random hand-out sequences, random ack orders, crashes and restores ---------


@dataclass(frozen=True)
class _Unit:
    phase: Phase
    snapshot_id: int
    seq: int
    count: int


@st.composite
def _plans(draw: st.DrawFn) -> list[_Unit]:
    counts = draw(st.lists(st.integers(0, 4), min_size=1, max_size=5))
    scan_first = draw(st.booleans())
    return [_Unit("scan" if i == 0 and scan_first else "incremental", 100 + i, i + 1, n)
            for i, n in enumerate(counts)]


def _covered(plan: list[_Unit], pos: Position) -> set[str]:
    """Split ids at or before ``pos`` (exclusive position: the ones it says are done)."""
    done: set[str] = set()
    for unit in plan:
        if pos.snapshot_id == unit.snapshot_id and pos.next_ordinal is not None:
            return done | {_sid(unit.snapshot_id, k) for k in range(pos.next_ordinal)}
        done |= {_sid(unit.snapshot_id, k) for k in range(unit.count)}
        if pos.snapshot_id == unit.snapshot_id:
            return done
    assert pos.snapshot_id is None or pos.snapshot_id < 100
    return set()


def _items_after(plan: list[_Unit], pos: Position) -> list[tuple[_Unit, int | None]]:
    """What the enumerator re-plans after ``pos``: (unit, ordinal) and (unit, None) = done."""
    items: list[tuple[_Unit, int | None]] = []
    started = pos.snapshot_id is None or pos.snapshot_id < 100
    for unit in plan:
        if not started:
            if unit.snapshot_id != pos.snapshot_id:
                continue
            started = True
            if pos.next_ordinal is None:
                continue
            items += [(unit, k) for k in range(pos.next_ordinal, unit.count)]
            items.append((unit, None))
            continue
        items += [(unit, k) for k in range(unit.count)]
        items.append((unit, None))
    return items


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=_plans(), data=st.data())
def test_property_prefix_commit_with_restores(plan: list[_Unit], data: st.DataObject) -> None:
    first = plan[0]
    start = Position("scan", first.snapshot_id, first.seq, 0) if first.phase == "scan" \
        else Position.after(99, 0)
    tracker = AckTracker(start)
    items = _items_after(plan, start)
    fully_acked: set[str] = set()
    outstanding: list[str] = []  # handed out by the current tracker, not fully acked
    last_key = start.sort_key()
    last_covered: set[str] = set()

    while items or outstanding:
        moves = (["hand_out"] if items else []) + (["ack", "partial"] if outstanding else [])
        move = data.draw(st.sampled_from([*moves, "restore"]))
        if move == "hand_out":
            unit, ordinal = items.pop(0)
            if ordinal is None:
                tracker.unit_done(unit.phase, unit.snapshot_id, unit.seq)
            else:
                hints = data.draw(st.booleans())
                split = _split(unit.snapshot_id, ordinal)
                given_split = tracker.register(
                    split, unit.phase if hints else None, unit.seq if hints else None)
                if given_split is None:
                    assert split.split_id in fully_acked
                else:
                    assert split.split_id not in fully_acked  # acked data never comes back
                    outstanding.append(split.split_id)
        elif move == "ack":
            split_id = outstanding.pop(data.draw(st.integers(0, len(outstanding) - 1)))
            tracker.ack(split_id)
            fully_acked.add(split_id)
        elif move == "partial":
            split_id = outstanding[data.draw(st.integers(0, len(outstanding) - 1))]
            tracker.ack(split_id, data.draw(st.integers(0, 10)))
        else:  # crash: restore from the checkpoint state, re-plan from its position
            position, acked_beyond, offsets = tracker.checkpoint_state()
            assert set(acked_beyond) <= fully_acked
            assert not set(acked_beyond) & set(outstanding)
            tracker = AckTracker(position, acked_beyond, offsets)
            assert tracker.committed() == position
            outstanding = []
            skipped = set(acked_beyond)
            items = [
                (unit, k) for unit, k in _items_after(plan, position)
                if k is None or _sid(unit.snapshot_id, k) not in skipped
                or data.draw(st.booleans())  # a skipped split may still be registered
            ]
        committed = tracker.committed()
        key = committed.sort_key()
        covered = _covered(plan, committed)
        assert key >= last_key, (committed, last_key)
        assert covered >= last_covered
        assert covered <= fully_acked, covered - fully_acked
        last_key, last_covered = key, covered

    last = plan[-1]
    assert tracker.committed() == Position.after(last.snapshot_id, last.seq)
    assert tracker.in_flight() == 0
    assert tracker.checkpoint_state() == (Position.after(last.snapshot_id, last.seq), (), ())
