"""The schema-change stream suite runs against the local engine and Ray (when installed)."""

from __future__ import annotations

from tests.helpers.ray_local import engine, ray_local

__all__ = ["engine", "ray_local"]
