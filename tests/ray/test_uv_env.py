"""``import icefloe.ray`` opts Ray's workers out of ``uv run`` environments, whichever of
Ray and icefloe.ray was imported first, and keeps a user's own setting.

Each case runs in a fresh interpreter: Ray reads ``RAY_ENABLE_UV_RUN_RUNTIME_ENV`` into
``ray._private.ray_constants`` when it is imported, and ``ray.init`` consults that constant.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("ray")

VAR = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"
PROBE = f"""
import json, os, sys
for name in sys.argv[1].split(","):
    __import__(name)
from ray._private import ray_constants
print(json.dumps([ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV, os.environ.get("{VAR}")]))
"""


def _probe(order: str, value: str | None) -> list[object]:
    env = {k: v for k, v in os.environ.items() if k != VAR}
    if value is not None:
        env[VAR] = value
    out = subprocess.run([sys.executable, "-c", PROBE, order], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("order", ["icefloe.ray", "ray,icefloe.ray"])
def test_workers_use_the_driver_environment(order: str) -> None:
    assert _probe(order, None) == [False, "0"]


def test_ray_alone_keeps_its_default() -> None:  # the probe itself can tell
    assert _probe("ray", None) == [True, None]


@pytest.mark.parametrize("order", ["icefloe.ray", "ray,icefloe.ray"])
def test_a_users_setting_is_kept(order: str) -> None:
    assert _probe(order, "1") == [True, "1"]


def test_variable_set_after_import_ray_decides() -> None:
    """A program (or a test's monkeypatch) that sets the variable after ``import ray``:
    Ray's constant already holds Ray's default; icefloe.ray brings it in line."""
    env = {k: v for k, v in os.environ.items() if k != VAR}
    script = (f"import json, os, ray\nos.environ['{VAR}'] = '0'\nimport icefloe.ray\n"
              "from ray._private import ray_constants\n"
              f"print(json.dumps(ray_constants.{VAR}))")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) is False
