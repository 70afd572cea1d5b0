"""The test run's engine groups hold: under ``pytest -n 2 --dist loadgroup`` (``make test``)
every test using the shared SparkSession runs in one worker.

pytest 9.2 moved node ids to a structured form and pytest-xdist 3.8's ``loadgroup`` kept
writing the old field, so the grouping silently stopped (pytest-dev/pytest-xdist#1386):
each worker then started its own SparkSession and Ray. This runs a small suite through
the hook ``tests/conftest.py`` registers, in a child pytest, and reads which worker ran
what: a lock upgrade that breaks the grouping again fails here, not only slows CI.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = '''
import pytest
from tests.helpers.xdist_groups import pytest_collection_modifyitems  # noqa: F401

@pytest.fixture
def spark():
    return "shared"
'''

TESTS = '''
import pytest

@pytest.mark.parametrize("i", range(6))
def test_uses_spark(spark, i):
    assert spark == "shared"

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    pass
'''


def test_engine_fixture_tests_share_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_grouped.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED (\S+)", proc.stdout)
    assert len(ran) == 12, proc.stdout[-3000:]
    spark_workers = {worker for worker, node in ran if "test_uses_spark" in node}
    assert len(spark_workers) == 1, f"the spark group was split over {spark_workers}"
    assert all(node.endswith("@spark") for _, node in ran if "test_uses_spark" in node), ran
    assert not any("@" in node for _, node in ran if "test_free" in node), ran
