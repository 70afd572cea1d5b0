"""The SeaweedFS launcher for tests and benchmarks: it lives in :mod:`icefloe.seaweed`
(``icefloe demo --s3`` uses it too) and is re-exported here under its old names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from icefloe.seaweed import (
    ACCESS_KEY,
    INSTALL_HINT,
    READ_ONLY_ACCESS_KEY,
    READ_ONLY_SECRET_KEY,
    REGION,
    SECRET_KEY,
    SeaweedFS,
    SeaweedUnavailable,
    free_port,
    weed_binary,
)

__all__ = [
    "ACCESS_KEY",
    "INSTALL_HINT",
    "READ_ONLY_ACCESS_KEY",
    "READ_ONLY_SECRET_KEY",
    "REGION",
    "SECRET_KEY",
    "SeaweedFS",
    "SeaweedUnavailable",
    "free_port",
    "running_or_skip",
    "weed_binary",
]


def running_or_skip(root: Path) -> Iterator[SeaweedFS]:
    """A fixture body: a SeaweedFS started under ``root`` for the fixture's scope, stopped
    at its end; skips (with the reason) only where the ``weed`` binary cannot start."""
    server = SeaweedFS(root)
    try:
        server.start()
    except SeaweedUnavailable as exc:
        pytest.skip(f"SeaweedFS cannot start here: {exc}")
    try:
        yield server
    finally:
        server.stop()
