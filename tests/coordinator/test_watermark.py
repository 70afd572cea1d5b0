"""WatermarkTracker: the smallest bound not yet acknowledged, never decreasing."""

from __future__ import annotations

import dataclasses

from icefloe.coordinator.watermark import WatermarkTracker
from icefloe.splits.split import FileSplit, new_split


def _split(split_id: str, bound: int | None) -> FileSplit:
    split = new_split(split_id, f"file:///{split_id}.parquet", "PARQUET", 0, 10, 1, 10, 1, 0,
                      (), 1, 1, 0)
    return dataclasses.replace(split, watermark_ms=bound)


def test_smallest_unacknowledged_bound_then_the_largest_acknowledged() -> None:
    tracker = WatermarkTracker()
    assert tracker.current() is None
    for name, bound in (("a", 10), ("b", 20), ("c", 30)):
        tracker.register(_split(name, bound))
    assert tracker.current() == 10
    tracker.acked("b")  # out of order: "a" still holds it
    assert tracker.current() == 10
    tracker.acked("a")
    assert tracker.current() == 30
    tracker.acked("c")
    assert tracker.current() == 30  # nothing outstanding: the largest acknowledged


def test_never_decreases_for_late_splits_resets_or_restores() -> None:
    tracker = WatermarkTracker(restored_ms=50)
    tracker.register(_split("old", 5))  # re-planned after a restart, or late data
    assert tracker.current() == 50
    tracker.acked("old")
    tracker.register(_split("new", 70))
    assert tracker.current() == 70
    tracker.reset()
    tracker.register(_split("late", 1))
    assert tracker.current() == 70


def test_splits_without_a_bound_do_not_hold_it() -> None:
    tracker = WatermarkTracker()
    tracker.register(_split("nostats", None))
    tracker.register(_split("x", 40))
    assert tracker.current() == 40
    tracker.acked("nostats")
    tracker.acked("x")
    assert tracker.current() == 40
