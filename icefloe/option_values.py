"""Value parsers of source options: each takes the option's name (for the error) and a value
as it arrives (a string from Spark or the CLI, a Python value from the API) and returns the
parsed value or raises :class:`~icefloe.errors.InvalidOptionError` naming the option, the
value and what to give instead. Pure functions, no I/O; :mod:`icefloe.options` applies them.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal

from icefloe.errors import InvalidOptionError

MAX_UNSIGNED_64 = 2**64 - 1


def parse_duration_ms(name: str, value: Any) -> int:
    """Milliseconds from an integer (ms) or a duration in Flink's form (``10s``, ``500 ms``,
    ``2min``, ``1h``, ``1d``; units ms, s, min, h, d and their long names)."""
    if isinstance(value, bool):
        raise InvalidOptionError(name, f"{value!r} is not a duration")
    if isinstance(value, int):
        return parse_int(name, value, minimum=0)
    if isinstance(value, dt.timedelta):
        return int(value.total_seconds() * 1000)
    text = str(value).strip().lower()
    if text.isascii() and text.isdigit():
        return int(text)
    match = _DURATION.fullmatch(text)
    if match is None:
        raise InvalidOptionError(
            name, f"{value!r} is not a duration; give milliseconds (5000) or a number with a "
            "unit: ms, s, min, h, d (e.g. 10s, 500ms, 2min)")
    number, unit = float(match.group(1)), match.group(2)
    for units, factor in _DURATION_UNITS:
        if unit in units:
            return int(number * factor)
    raise AssertionError(unit)  # pragma: no cover - the pattern admits only known units


_DURATION_UNITS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1),
    (("s", "sec", "secs", "second", "seconds"), 1000),
    (("m", "min", "mins", "minute", "minutes"), 60_000),
    (("h", "hour", "hours"), 3_600_000),
    (("d", "day", "days"), 86_400_000),
)
_DURATION = re.compile(
    r"(\d+(?:\.\d+)?)\s*(" + "|".join(sorted(
        (u for units, _ in _DURATION_UNITS for u in units), key=len, reverse=True)) + r")")


def parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise InvalidOptionError(name, f"{value!r} is not a boolean; use true or false")


def parse_int(name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidOptionError(name, f"{value!r} is not an integer")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise InvalidOptionError(name, f"{value!r} is not an integer") from None
    if number < minimum:
        raise InvalidOptionError(name, f"{number} is below the minimum {minimum}")
    return number


def parse_snapshot_id(name: str, value: Any) -> int:
    """Parse a snapshot id: an unsigned 64-bit integer (or its decimal string)."""
    text = str(value).strip()
    # isdigit() alone accepts superscripts ('²') and non-ASCII digits int() rejects or reads
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()) \
            or int(text) > MAX_UNSIGNED_64:
        raise InvalidOptionError(
            name, f"{value!r} is not a snapshot id; give an unsigned 64-bit integer such as 1234"
        )
    return int(text)


def parse_timestamp_ms(name: str, value: Any) -> int:
    """Parse milliseconds since the epoch, or an ISO-8601 timestamp (naive means UTC)."""
    if isinstance(value, dt.datetime):
        moment = value
    else:
        text = str(value).strip()
        digits = text.removeprefix("-")
        if digits.isascii() and digits.isdigit():
            return int(text)
        try:
            moment = dt.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidOptionError(
                name,
                f"{value!r} is not a timestamp; give milliseconds since the epoch or ISO-8601 "
                "such as 2026-01-31T12:00:00+00:00",
            ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def parse_names(name: str, value: Any, allowed: tuple[str, ...] | None = None) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    names = tuple(str(item).strip() for item in items if str(item).strip())
    if not names:
        raise InvalidOptionError(name, "is empty; give at least one name, comma-separated")
    if allowed is not None:
        for item in names:
            if item not in allowed:
                raise InvalidOptionError(
                    name, f"{item!r} is not one of {', '.join(allowed)}"
                )
    return names


def parse_starting_version(name: str, value: Any) -> int | Literal["latest", "earliest"]:
    text = str(value).strip()
    if text in ("latest", "earliest"):
        return text  # type: ignore[return-value]
    try:
        return parse_snapshot_id(name, text)
    except InvalidOptionError:
        raise InvalidOptionError(
            name, f"{value!r} is not a snapshot id, 'latest' or 'earliest'"
        ) from None


IO_CONCURRENCY_MAX = 256
"""Largest ``ioConcurrency``: more requests in flight per reader thread only queue."""


def parse_io_concurrency(name: str, value: Any) -> int | None:
    """``auto`` -> None; else an integer 0..:data:`IO_CONCURRENCY_MAX` (0: no prefetching)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    if isinstance(value, bool):
        raise InvalidOptionError(name, f"{value!r} is not 'auto' or an integer from 0 to "
                                 f"{IO_CONCURRENCY_MAX}")
    try:
        number = int(str(value).strip())
    except ValueError:
        number = -1
    if not 0 <= number <= IO_CONCURRENCY_MAX:
        raise InvalidOptionError(
            name, f"{value!r} is not 'auto' or an integer from 0 to {IO_CONCURRENCY_MAX} "
            "(requests in flight per reader thread on an object store; 0 turns prefetching off)")
    return number


def check_filter(text: str) -> str:
    from pyiceberg.expressions.parser import parse

    try:
        parse(text)
    except Exception as exc:  # pyparsing raises its own ParseException (with the grammar)
        loc = getattr(exc, "loc", None)
        where = f" at column {loc + 1} ({text[loc:][:30]!r})" if isinstance(loc, int) else ""
        raise InvalidOptionError(
            "filter", f"{text!r} does not parse as a row filter{where}; write comparisons "
            "joined by AND / OR / NOT, like \"kind = 'a' AND id >= 10\""
        ) from None
    return text
