"""The test run's xdist groups: tests using a session-wide engine run in one worker.

Apart from ``tests/conftest.py`` (which imports PyIceberg, PyArrow and the table helpers),
so that tests/test_xdist_groups.py runs this very hook in a child pytest cheaply;
``tests/conftest.py`` imports the hook, which registers it there.
"""

from __future__ import annotations

import pytest

ENGINE_FIXTURES = {"spark": "spark", "ray_local": "ray", "connect_server": "connect"}
"""Session-wide engines (the Spark suite's SparkSession, the local Ray, one Spark Connect
server) by fixture name, and the ``xdist_group`` their tests go into: under ``pytest -n N
--dist loadgroup`` (``make test``) the tests of one engine run in one worker, which starts
it once. Tests that start their own Spark or Ray processes are spread freely."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Puts each test using a fixture of :data:`ENGINE_FIXTURES` into that engine's
    ``xdist_group`` (the first one found wins).

    ``tryfirst``: pytest-xdist's worker reads the groups in its own hook of the same name,
    which otherwise runs before the conftest's and sees no group (tests/test_xdist_groups.py).
    """
    for item in items:
        for fixture, group in ENGINE_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
                break
