"""Opt Ray's workers out of ``uv run`` environments (imported first by :mod:`icefloe.ray`).

Under ``uv run``, Ray would start its workers with ``uv run`` in a copy of the working
directory (a fresh environment without icefloe's dependencies). icefloe's workers need
the driver's environment as is, so ``RAY_ENABLE_UV_RUN_RUNTIME_ENV`` is set to ``0``
unless the user set it. ``import ray`` reads the variable into
``ray._private.ray_constants``, which ``ray.init`` consults: if Ray was imported before
icefloe.ray, that constant is set too (a user's own setting is kept either way).
"""

from __future__ import annotations

import os
import sys

VARIABLE = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"


def opt_out() -> None:
    """Set the variable (and Ray's constant, if Ray is imported) unless the user set it."""
    if VARIABLE in os.environ:
        return
    os.environ[VARIABLE] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and hasattr(constants, VARIABLE):
        setattr(constants, VARIABLE, False)


opt_out()
