"""Fixtures of the changelog tests."""

from tests.helpers.ray_local import engine, ray_local

__all__ = ["engine", "ray_local"]
