"""Start-up cost of a process: ``import icefloe.reader`` (what a Spark / Ray worker loads),
``icefloe --version`` and ``icefloe plan`` of a one-file table, each in a fresh process.

Two conditions: without bytecode (``PYTHONDONTWRITEBYTECODE=1`` and nothing compiled, as a
``uv sync`` without ``--compile-bytecode`` leaves a CI machine) and with bytecode compiled
once (into a private ``PYTHONPYCACHEPREFIX``, the state ``make setup`` now installs).
Targets from issue 17: ``icefloe plan`` under 1 s wall, ``import icefloe.reader`` under
0.3 s, both with bytecode.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import md_table

RUNS = {"quick": 3, "full": 7}


def _table(home: Path) -> None:
    import pyarrow as pa

    from icefloe.catalog.loader import embedded_catalog

    catalog = embedded_catalog(home)
    catalog.create_namespace_if_not_exists("db")
    table = catalog.create_table("db.small", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": list(range(1000))}))


_PYICEBERG_PLAN = (
    "import os; from pyiceberg.catalog.sql import SqlCatalog; h = os.environ['ICEFLOE_HOME']; "
    "c = SqlCatalog('local', uri=f'sqlite:///{h}/catalog.db', warehouse=f'file://{h}/warehouse'); "
    "print(len(list(c.load_table('db.small').scan().plan_files())))"
)
"""What ``icefloe plan db.small`` does, done by PyIceberg alone: open the catalog, load the
table, plan its files."""


def _time(cmd: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(scale: str) -> str:
    runs = RUNS.get(scale, 3)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        _table(home)
        base = {**os.environ, "ICEFLOE_HOME": str(home)}
        cold = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
        cold.pop("PYTHONPYCACHEPREFIX", None)
        warm = {**base, "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
        warm.pop("PYTHONDONTWRITEBYTECODE", None)
        commands = {
            "import icefloe.reader": [sys.executable, "-c", "import icefloe.reader"],
            "icefloe --version": [sys.executable, "-m", "icefloe.cli", "--version"],
            "icefloe plan db.small (1 file)": [sys.executable, "-m", "icefloe.cli", "plan",
                                               "db.small"],
            # the floors, below which icefloe cannot go while it reads through pyarrow's
            # dataset module and PyIceberg's FileIO and projection (RESULTS.md, "Start-up")
            "floor: import pyarrow.dataset": [sys.executable, "-c", "import pyarrow.dataset"],
            "floor: import pyiceberg.io.pyarrow": [sys.executable, "-c",
                                                   "import pyiceberg.io.pyarrow"],
            "peer: PyIceberg load_table + plan_files": [sys.executable, "-c", _PYICEBERG_PLAN],
        }
        targets = {"import icefloe.reader": "< 0.3 s", "icefloe plan db.small (1 file)": "< 1 s"}
        for cmd in commands.values():  # compile every module once into the private prefix
            subprocess.run(cmd, env=warm, check=True, capture_output=True)
        rows = []
        for name, cmd in commands.items():
            rows.append([name, f"{_time(cmd, cold, runs):.2f} s",
                         f"{_time(cmd, warm, runs):.2f} s", targets.get(name, "-")])
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"Wall time of a fresh process, median of {runs} runs, on a machine whose load "
            f"average was {load} (1, 5, 15 min) at the end; on a loaded machine every "
            "figure grows with the load.\n\n"
            + md_table(["command", "no bytecode", "bytecode compiled", "target"], rows)
            + "\n\n`python -m benchmarks.run --only startup`")
