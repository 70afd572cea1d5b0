"""The tuner's time budget: ``90s``, ``2min``, ``1h``, seconds, or a timedelta."""

from __future__ import annotations

import datetime as dt

from icefloe.errors import InvalidOptionError
from icefloe.option_values import parse_duration_ms

DEFAULT_BUDGET = "3min"
MIN_BUDGET_S = 5.0


def parse_budget(value: str | float | dt.timedelta) -> float:
    """Seconds of a budget: ``90s``, ``2min``, ``1h``, a number of seconds, a timedelta.

    Raises:
        InvalidOptionError: not a duration, or shorter than :data:`MIN_BUDGET_S`.
    """
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        try:
            seconds = float(text) if text.replace(".", "", 1).isdigit() \
                else parse_duration_ms("budget", text) / 1000
        except InvalidOptionError:
            raise InvalidOptionError("budget", f"{value!r} is not a duration; give seconds "
                                     "or a number with a unit, e.g. 90s, 2min or 1h") from None
    if seconds < MIN_BUDGET_S:
        raise InvalidOptionError("budget", f"{value!r} is too short to measure anything; "
                                 f"give at least {MIN_BUDGET_S:.0f}s")
    return seconds
