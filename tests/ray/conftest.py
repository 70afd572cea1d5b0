"""One local Ray for the whole Ray suite (session-scoped), shut down at the end."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")

from tests.helpers.ray_local import RAY_WARNINGS, ray_local

__all__ = ["RAY_WARNINGS", "ray_local"]
