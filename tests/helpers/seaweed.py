"""The SeaweedFS launcher for tests and benchmarks: it lives in :mod:`icefloe.seaweed`
(``icefloe demo --s3`` uses it too) and is re-exported here under its old names."""

from __future__ import annotations

import os
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
    "REQUIRED_VARIABLE",
    "SECRET_KEY",
    "SeaweedFS",
    "SeaweedUnavailable",
    "free_port",
    "running_or_skip",
    "weed_binary",
]


REQUIRED_VARIABLE = "ICEFLOE_S3_REQUIRED"
"""Set to ``1`` (the Makefile's ``test`` target does), a SeaweedFS that cannot start fails
the S3 tier instead of skipping it: a broken launcher or binary must not pass CI."""


def running_or_skip(root: Path) -> Iterator[SeaweedFS]:
    """A fixture body: a SeaweedFS started under ``root`` for the fixture's scope, stopped
    at its end; skips (with the reason) only where the ``weed`` binary cannot start, and
    fails there instead when :data:`REQUIRED_VARIABLE` is ``1``."""
    server = SeaweedFS(root)
    try:
        server.start()
    except SeaweedUnavailable as exc:
        message = f"SeaweedFS cannot start here: {exc}"
        if os.environ.get(REQUIRED_VARIABLE) == "1":
            pytest.fail(f"{message} ({REQUIRED_VARIABLE}=1: the S3 tier is required)")
        pytest.skip(message)
    try:
        yield server
    finally:
        server.stop()
