"""Waiting for a condition, never for a time (STYLE.md): :func:`wait_for`, and
:func:`ack_rows` for a stream's items."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

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


def ack_rows(items: Iterator[Any], rows: int) -> int:
    """Take items from a stream's iterator, acknowledging each, until at least ``rows``
    rows came (blocks like the iterator; a stream test's timeout bounds it). Returns the
    rows taken."""
    seen = 0
    while seen < rows:
        item = next(items)
        seen += item.batch.num_rows
        item.ack()
    return seen
