"""One local Ray for a test session: the ``ray_local`` fixture and Ray's warning filters.

Import both into a ``conftest.py`` (``tests/ray``, ``tests/coordinator``) to use them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")  # workers use this venv as is

RAY_WARNINGS = [
    # Ray Data's own DataContext setup touches its deprecated settings
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray"),
]
"""Targeted filters for warnings Ray raises from its own modules (add to ``pytestmark``)."""


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """A local Ray instance: 2 CPUs, ~200 MB object store, no dashboard."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, object_store_memory=200 * 1024 * 1024, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


STREAM_ENGINES = ["local", pytest.param("ray", marks=[pytest.mark.ray, *RAY_WARNINGS])]
"""The engines a stream suite runs on (the ``engine`` fixture's parameters)."""


@pytest.fixture(params=STREAM_ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """``"local"`` or ``"ray"`` (a local Ray instance started for it); a suite that imports
    it into its conftest runs each of its tests on both."""
    if request.param == "ray":
        pytest.importorskip("ray")
        request.getfixturevalue("ray_local")
    return str(request.param)
