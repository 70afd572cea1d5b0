"""Timing on a shared machine: interleaved rounds, medians, spread, and when a difference
is larger than the noise. Runs in the caller's process.

One measurement of a setting is not evidence: another process may have taken a core for
half a second. So every contender runs ``reps`` times, round-robin with the starting one
rotated each round (a slow patch of the machine hits every contender alike), and a
setting is compared with another by medians, and only believed faster when the gain is
larger than the spread of either setting's runs (:func:`beats`). Interference on a shared
machine only ever slows a run, so the spread leaves out the slowest run of every seven
(from five runs on): one stalled run does not hide a real difference. The benchmarks in
``benchmarks/`` use the same functions.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

MIN_GAIN = 0.05
"""A gain below 5 % is never reported as one, however quiet the machine: not worth a
change of settings."""


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """``(seconds, result)`` of one call (monotonic clock)."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def interleaved(contenders: dict[str, Callable[[], Any]], reps: int,
                warmup: bool = True) -> dict[str, list[tuple[float, Any]]]:
    """Run each contender ``reps`` times, round-robin, rotating which goes first.

    Returns ``{name: [(seconds, result), ...]}`` in the order of ``contenders``. With
    ``warmup`` each contender runs once untimed first (page cache, imports, thread pools).
    """
    names = list(contenders)
    if warmup:
        for name in names:
            contenders[name]()
    out: dict[str, list[tuple[float, Any]]] = {n: [] for n in names}
    for r in range(reps):
        order = names[r % len(names):] + names[:r % len(names)] if names else []
        for name in order:
            out[name].append(timed(contenders[name]))
    return out


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (at least one)."""
    return float(statistics.median(values))


def spread(seconds: Sequence[float]) -> float:
    """The runs' range relative to their median, ``(max - min) / median``, without the
    slowest :func:`trimmed` runs (0 for one run). The median is of all runs."""
    mid = median(seconds)
    kept = sorted(seconds)[:len(seconds) - trimmed(len(seconds))]
    return (max(kept) - min(kept)) / mid if mid > 0 else 0.0


def trimmed(runs: int) -> int:
    """How many of the slowest of ``runs`` runs :func:`spread` leaves out: none below
    five runs, then one per seven runs (at least one)."""
    return 0 if runs < 5 else max(1, runs // 7)


def gain(base: Sequence[float], other: Sequence[float]) -> float:
    """How much faster ``other`` ran than ``base`` (seconds of each run): the ratio of
    the medians minus one (0.5: 1.5x as fast; negative: slower)."""
    return median(base) / median(other) - 1.0


def noise(base: Sequence[float], other: Sequence[float]) -> float:
    """The larger :func:`spread` of the two settings' runs."""
    return max(spread(base), spread(other))


def beats(base: Sequence[float], other: Sequence[float]) -> bool:
    """Whether ``other`` is faster than ``base`` by more than the noise (and by at least
    :data:`MIN_GAIN`). Two settings that cannot differ pass this rarely, as their medians
    must differ by more than either's (trimmed) range: simulated with normal, log-normal,
    shifted-exponential and spiky noise, about 2-7 % of the time for three runs each,
    1-4.5 % for five, 0.03-0.9 % for seven, and 0.15-1 % for the tuner's confirmation (seven
    runs each, then fourteen when the first look leaves it undecided)."""
    g = gain(base, other)
    return g > noise(base, other) and g >= MIN_GAIN
