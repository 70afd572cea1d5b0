"""Fixtures of the changelog tests."""

from tests.helpers.ray_local import ray_local

__all__ = ["ray_local"]
