"""Opt Ray's workers out of ``uv run`` environments (imported first by :mod:`icefloe.ray`).

Under ``uv run``, Ray would start its workers with ``uv run`` in a copy of the working
directory (a fresh environment without icefloe's dependencies). icefloe's workers need
the driver's environment as is, so ``RAY_ENABLE_UV_RUN_RUNTIME_ENV`` is set to ``0``
unless the user set it. ``import ray`` reads the variable into
``ray._private.ray_constants``, which ``ray.init`` consults: if Ray was imported before
the variable was set (before icefloe.ray, or before the user set it), that constant is
brought in line with the variable too. The variable's value, the user's or ours, decides.
"""

from __future__ import annotations

import os
import sys

VARIABLE = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"


def opt_out() -> None:
    """Set the variable to ``0`` unless it is set, and Ray's constant (if Ray is imported)
    to what the variable says (as Ray's ``env_bool`` reads it). Runs on the driver: at
    ``import icefloe.ray`` and before icefloe starts Ray."""
    value = os.environ.setdefault(VARIABLE, "0")
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and hasattr(constants, VARIABLE):
        setattr(constants, VARIABLE, value.lower() in ("true", "1"))


opt_out()
