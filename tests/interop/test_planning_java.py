"""Java Iceberg's ``planFiles()`` driver of the planning benchmark plans what icefloe plans.

The benchmark compares rates; this checks the Java side counts the same files as icefloe on
a small synthetic table (PyIceberg-written manifests), without and with the benchmark's
filter. Needs the interop environment (``make interop-env``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import java_planning
from benchmarks.bench_planning import filter_column_value

pytestmark = pytest.mark.interop
ROOT = Path(__file__).resolve().parents[2]
N_FILES = 2_000


def test_java_plans_the_files_icefloe_plans(tmp_path: Path) -> None:
    cp, why = java_planning.classpath()
    if cp is None:
        message = f"{why}; {java_planning.HOW_TO}"
        if os.environ.get("ICEFLOE_INTEROP_REQUIRED") == "1":
            pytest.fail(message)
        pytest.skip(message)
    script = (
        "import json, sys\n"
        "from benchmarks.bench_planning import filter_text\n"
        "from benchmarks.common import synthetic_table\n"
        "from icefloe.enumerator.planner import TableSplitPlanner\n"
        f"st = synthetic_table({N_FILES}, 2)\n"
        "t = st.static(); snap = t.metadata.snapshot_by_id(st.new_id)\n"
        "counts = [sum(1 for _ in TableSplitPlanner(t.metadata, t.io, t.schema(), f, True,"
        " 1 << 27).plan_snapshot(snap)) for f in (None, filter_text(st.n_files))]\n"
        "print(json.dumps([st.metadata_path, *counts]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, text=True,
                         capture_output=True,
                         env={**os.environ, "ICEFLOE_BENCH_DATA": str(tmp_path)})
    metadata, plain, filtered = json.loads(out.stdout.strip().splitlines()[-1])
    assert (plain, filtered) == (N_FILES, N_FILES // 10)
    java = java_planning.plan_files(metadata, 2)
    assert java["count"] == plain and len(java["seconds"]) == 2
    java_filtered = java_planning.plan_files(metadata, 1, 1, filter_column_value(N_FILES))
    assert java_filtered["count"] == filtered
