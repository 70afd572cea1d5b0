"""The SeaweedFS launcher for tests and benchmarks: it lives in :mod:`icefloe.seaweed`
(``icefloe demo --s3`` uses it too) and is re-exported here under its old names."""

from __future__ import annotations

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
    "weed_binary",
]
