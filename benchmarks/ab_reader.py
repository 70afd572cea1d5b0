"""Before / after of a change to icefloe's reader: the same reads by two source trees,
interleaved in one run.

    uv run python -m benchmarks.ab_reader --before /path/to/other/tree [--rounds 5]

The tables are built once by this process (this tree's :mod:`benchmarks.common` and
:mod:`benchmarks.bench_objectstore`; quick scale): the backfill benchmark's big table
(2M rows, 4 files) and small files (1,000 files of 500 rows), the changelog
benchmark's clustered merge-on-read UPDATE (0.1% of 2M rows), and the object-store
benchmark's small (400 files) and large (3 x 1M rows) tables on SeaweedFS behind 10 ms
of latency each way. Each round starts one child process per tree, in alternating order
(before, after; then after, before; ...). A child imports ``icefloe`` from its tree
(``PYTHONPATH``, checked), reads each workload once untimed, then ``--reads`` times
timed, and reports the median wall and CPU seconds of each workload. The result: per
workload the median over rounds of both sides and the ratio before / after (> 1: after
is faster), with the per-round ratios' spread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("backfill big", "backfill small files", "changelog clustered",
             "object store small files", "object store large files")


def _child(spec: dict[str, Any]) -> None:
    """In the child: each workload once untimed, then ``spec['reads']`` times timed."""
    from pyiceberg.catalog import load_catalog

    import icefloe
    from icefloe import IcebergSource

    here = str(Path(icefloe.__file__).resolve().parent.parent)
    assert here == spec["tree"], f"icefloe imported from {here}, not {spec['tree']}"
    catalogs: dict[str, Any] = {}

    def read(work: dict[str, Any]) -> int:
        key = json.dumps(work["catalog"], sort_keys=True)
        if key not in catalogs:
            props = dict(work["catalog"])
            catalogs[key] = load_catalog(props.pop("name", "bench"), **props)
        src = IcebergSource(work["identifier"], catalog=catalogs[key],
                            options=work.get("options"))
        return sum(b.num_rows for b in src.read(parallelism=2))

    out: dict[str, Any] = {}
    for name, work in spec["workloads"].items():
        rows = read(work)  # warm: page cache, imports, thread pools, connections
        walls, cpus = [], []
        for _ in range(spec["reads"]):
            cpu0, start = time.process_time(), time.perf_counter()
            assert read(work) == rows
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu0)
        out[name] = {"rows": rows, "wall": statistics.median(walls),
                     "cpu": statistics.median(cpus)}
    print(json.dumps(out))


def _sql(root: Path) -> dict[str, str]:
    return {"type": "sql", "uri": f"sqlite:///{root}/catalog.db",
            "warehouse": (root / "warehouse").as_uri()}


def _workloads(stack: ExitStack, names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    from benchmarks.bench_changelog import _table as changelog_table
    from benchmarks.bench_objectstore import object_store
    from benchmarks.common import events_table, small_files_table

    big, small = events_table("quick"), small_files_table("quick")
    changes, parent, snapshot, _ = changelog_table("quick", "clustered")
    s3: dict[str, str] = {}
    if any(n.startswith("object store") for n in names):
        store = stack.enter_context(object_store())
        store.write_table("bench.small", 400, 500)
        store.write_table("bench.large", 3, 1_000_000)
        s3 = {"name": "bench-s3", **store.seaweed.rest_properties(
            endpoint=store.endpoints["10 ms each way"])}
    return {
        "backfill big": {"catalog": _sql(big.root), "identifier": big.identifier},
        "backfill small files": {"catalog": _sql(small.root), "identifier": small.identifier},
        "changelog clustered": {
            "catalog": _sql(changes.root), "identifier": changes.identifier,
            "options": {"changelog": "true", "startSnapshotId": str(parent),
                        "endSnapshotId": str(snapshot)}},
        "object store small files": {"catalog": s3, "identifier": "bench.small"},
        "object store large files": {"catalog": s3, "identifier": "bench.large"},
    }


def _run_side(tree: Path, spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child",
         json.dumps({**spec, "tree": str(tree)})],
        cwd=tree, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child in {tree} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ab_reader")
    ap.add_argument("--before", type=Path, help="the other source tree (the 'before')")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reads", type=int, default=3, help="timed reads per child and workload")
    ap.add_argument("--only", help="comma-separated workloads (default: all)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        _child(json.loads(a.child))
        return
    if a.before is None:
        ap.error("--before is required")
    trees = {"before": a.before.resolve(), "after": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    loads = []
    with ExitStack() as stack:
        names = WORKLOADS if a.only is None else tuple(a.only.split(","))
        spec = {"workloads": {k: v for k, v in _workloads(stack, names).items() if k in names},
                "reads": a.reads}
        for r in range(a.rounds):
            for side in ("before", "after") if r % 2 == 0 else ("after", "before"):
                loads.append(_loadavg())
                runs[side].append(_run_side(trees[side], spec))
                print(f"[ab] round {r + 1}/{a.rounds} {side}: " + ", ".join(
                    f"{w} {runs[side][-1][w]['wall']:.2f}s" for w in names),
                    file=sys.stderr, flush=True)
    lines = [f"{a.rounds} rounds, before/after alternating, {a.reads} timed reads per child "
             f"and workload (medians); load average {min(loads):.1f}-{max(loads):.1f}",
             "| workload | before (median wall) | after | before/after wall (spread) "
             "| before/after CPU (spread) |", "|---|---|---|---|---|"]
    for w in names:
        b, f = runs["before"], runs["after"]
        assert {x[w]["rows"] for x in b} == {x[w]["rows"] for x in f}, f"{w}: rows differ"
        row = [w, f"{statistics.median(x[w]['wall'] for x in b):.3f} s",
               f"{statistics.median(x[w]['wall'] for x in f):.3f} s"]
        for key in ("wall", "cpu"):
            ratios = sorted(x[w][key] / y[w][key] for x, y in zip(b, f, strict=True))
            mid = statistics.median(x[w][key] for x in b) / statistics.median(
                x[w][key] for x in f)
            row.append(f"{mid:.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})")
        lines.append("| " + " | ".join(row) + " |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
