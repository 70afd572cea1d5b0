"""The noise rule and the interleaving, on constructed timings (deterministic)."""

from __future__ import annotations

import pytest

from icefloe.tuning.measure import MIN_GAIN, beats, gain, interleaved, noise, spread, trimmed


def test_a_gain_larger_than_both_spreads_beats() -> None:
    base = [1.0, 1.1, 1.05]
    fast = [0.50, 0.52, 0.55]
    assert gain(base, fast) == pytest.approx(1.05 / 0.52 - 1)
    assert noise(base, fast) == pytest.approx(max(0.1 / 1.05, 0.05 / 0.52))
    assert beats(base, fast)
    assert not beats(fast, base)  # slower never beats


def test_a_gain_inside_the_spread_is_noise() -> None:
    base = [1.0, 1.6, 1.2]       # spread 50 %
    other = [0.9, 1.0, 0.95]     # 26 % faster: inside base's spread
    assert gain(base, other) > 0.2
    assert not beats(base, other)


def test_equal_settings_never_beat_each_other() -> None:
    runs = [0.2, 0.21, 0.2, 0.22, 0.2, 0.21, 0.2]
    assert not beats(runs, list(runs))


def test_a_tiny_gain_is_below_the_minimum_even_without_noise() -> None:
    base = [1.0, 1.0, 1.0]
    other = [1 / (1 + MIN_GAIN / 2)] * 3
    assert noise(base, other) == 0
    assert not beats(base, other)


def test_spread_is_the_range_over_the_median() -> None:
    assert spread([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert spread([0.5]) == 0


def test_interleaved_rotates_who_goes_first() -> None:
    calls: list[str] = []
    contenders = {n: (lambda n=n: calls.append(n) or n) for n in ("a", "b", "c")}
    out = interleaved(contenders, reps=3, warmup=False)
    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert [len(v) for v in out.values()] == [3, 3, 3]
    assert out["b"][0][1] == "b"


def test_the_spread_leaves_out_the_slowest_run_of_every_seven() -> None:
    """Interference only slows a run: from five runs on, the slowest one (one per seven)
    is left out of the range; the median stays that of all runs."""
    assert [trimmed(n) for n in (1, 3, 4, 5, 7, 13, 14, 21)] == [0, 0, 0, 1, 1, 1, 2, 3]
    stalled = [0.30, 0.31, 0.29, 0.74, 0.30, 0.32, 0.30]  # one run stalled by the machine
    assert spread(stalled) == pytest.approx((0.32 - 0.29) / 0.30)
    assert spread([0.30, 0.31, 0.29, 0.74]) == pytest.approx((0.74 - 0.29) / 0.305)


def test_one_stalled_run_does_not_hide_a_real_difference() -> None:
    """The CI run that refused the rule before: baseline ~0.30 s with one run stalled to
    0.74 s, the candidate 2.4x as fast; the whole range called it noise (146 %)."""
    base = [0.30, 0.31, 0.29, 0.74, 0.30, 0.32, 0.30]
    fast = [0.125, 0.13, 0.12, 0.126, 0.14, 0.125, 0.127]
    assert (max(base) - min(base)) / 0.30 > gain(base, fast)  # the old rule's verdict
    assert beats(base, fast)
    assert not beats(fast, base)


def test_two_stalled_runs_of_seven_are_still_noise() -> None:
    base = [0.30, 0.31, 0.29, 0.74, 0.30, 0.81, 0.30]
    other = [0.14, 0.13, 0.12, 0.126, 0.14, 0.125, 0.127]
    assert not beats(base, other)
