"""Waiting for a condition, never for a time (STYLE.md): :func:`wait_for`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], what: str, timeout_s: float = 120.0,
             every_s: float = 0.05) -> T:
    """``probe()``'s first truthy value, asked every ``every_s``; fails naming ``what``
    after ``timeout_s`` (a bound for a loaded machine, not a speed check)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every_s)
