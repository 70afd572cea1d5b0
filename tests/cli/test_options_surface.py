"""Finding 7 of issue 17: did-you-mean, one case rule on every engine, Flink durations,
one-line filter errors, the mode rule of ``start-snapshot-id`` / ``startsnapshotid``."""

from __future__ import annotations

import pytest

from icefloe.errors import InvalidOptionError
from icefloe.options import SourceOptions


def _error(raw: dict[str, str]) -> InvalidOptionError:
    with pytest.raises(InvalidOptionError) as caught:
        SourceOptions.parse(raw).for_mode("bounded")
    return caught.value


@pytest.mark.parametrize(("typo", "meant"), [("snapshotIdd", "snapshotId"),
                                             ("snapshot_id", "snapshotId"),
                                             ("pollIntervalMillis", "pollIntervalMs"),
                                             ("ignoreDelete", "ignoreDeletes")])
def test_did_you_mean(typo: str, meant: str) -> None:
    message = str(_error({typo: "1"}))
    assert f"did you mean {meant!r}?" in message
    assert "\n" not in message


@pytest.mark.parametrize("spelling", ["snapshotid", "SNAPSHOTID", "SnapshotId", "versionasof"])
def test_names_match_ignoring_case(spelling: str) -> None:
    """The rule Spark imposes (it lower-cases every key) holds in Python and the CLI too."""
    assert SourceOptions.parse({spelling: "7"}).for_mode("bounded").snapshot_id == 7


def test_a_lower_cased_name_of_two_options_is_resolved_by_mode() -> None:
    options = SourceOptions.parse({"startsnapshotid": "5"})
    assert options.for_mode("bounded").start_snapshot_id == 5
    assert options.for_mode("continuous").starting_version == 5
    # exact spellings keep their own meaning
    with pytest.raises(InvalidOptionError, match="startSnapshotId"):
        SourceOptions.parse({"startSnapshotId": "5"}).for_mode("continuous")


@pytest.mark.parametrize(("value", "ms"), [("10s", 10_000), ("500 ms", 500), ("2min", 120_000),
                                           ("1h", 3_600_000), ("1500", 1500), ("0.5s", 500)])
def test_flink_durations(value: str, ms: int) -> None:
    for key in ("monitor-interval", "pollIntervalMs"):
        assert SourceOptions.parse({key: value}).poll_interval_ms == ms


def test_bad_duration_names_the_key_and_the_units() -> None:
    with pytest.raises(InvalidOptionError) as caught:
        SourceOptions.parse({"monitor-interval": "10 parsecs"})
    assert "'10 parsecs'" in str(caught.value) and "10s" in str(caught.value)


def test_filter_error_is_one_short_line_with_a_position() -> None:
    message = str(_error({"filter": "id > 3 AND"}))
    assert "\n" not in message and len(message) < 250
    assert "column 11" in message and "Expected" not in message
