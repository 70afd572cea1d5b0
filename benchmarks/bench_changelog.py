"""Changelog of one merge-on-read UPDATE: icefloe's changelog vs reading both snapshots and
diffing them (what a user does without a changelog).

The table: the backfill benchmark's events (quick 2M rows in 4 files, full 20M in 20),
copied, then one merge-on-read UPDATE committed as Java writes one (a position delete
file naming the old rows plus a data file with their new values, one ``overwrite``
snapshot) touching 0.1% of the rows. Two shapes: a **clustered** update (consecutive
ids, as an UPDATE by a key range touches them) and a **scattered** one (every 1000th
row: every row group of every file holds some).

Contenders, each in a fresh subprocess (wall time, and peak RSS over the baseline taken
after imports and table load, from ``VmHWM``):
- icefloe: ``IcebergSource(changelog=true, startSnapshotId=P, endSnapshotId=S).read()``;
- read both and diff: icefloe's own ``to_arrow()`` of P and of S (the fastest reader here),
  then Arrow anti-joins on every column both ways (multiset-exact for unique rows).
Both must return the same changes (checked). Target (issue 18): >= 50x faster than the
diff, memory bounded by the change, not the table.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import (
    BenchTable,
    child_report,
    events_table_of,
    fmt_s,
    md_table,
    median,
    peak_rss_mb,
    pick,
    reset_peak_rss,
    rss_mb,
    run_child,
    verdict,
)

MODULE = "benchmarks.bench_changelog"
SPEED_TARGET = 50.0
SHAPES = ("clustered", "scattered")


def _update(bt: BenchTable, shape: str) -> tuple[int, int, int]:
    """Commit the merge-on-read UPDATE of ``shape``; returns (parent, snapshot, rows)."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files, schema_to_pyarrow
    from pyiceberg.manifest import DataFileContent
    from pyiceberg.table.snapshots import Operation
    from pyiceberg.typedef import Record

    from tests.helpers.tables import POSITION_DELETE_SCHEMA, _commit, _write_delete_file

    table = bt.table()
    parent = table.current_snapshot().snapshot_id
    tasks = sorted(table.scan().plan_files(), key=lambda t: t.file.file_path)
    total = sum(t.file.record_count for t in tasks)
    touched = total // 1000
    paths: list[str] = []
    positions: list[int] = []
    old: list[pa.Table] = []
    for task in tasks:
        n = task.file.record_count
        if shape == "clustered":  # a run of ids in the middle of the first file
            pos = np.arange(n // 2, n // 2 + touched) if task is tasks[0] else np.empty(0, int)
        else:
            pos = np.arange(0, n, 1000)
        if not len(pos):
            continue
        data = pq.read_table(task.file.file_path.removeprefix("file://"))
        old.append(data.take(pa.array(pos)))
        paths += [task.file.file_path] * len(pos)
        positions += pos.tolist()
    rows = pa.concat_tables(old)
    new = rows.set_column(rows.schema.get_field_index("value"), "value",
                          pa.array(np.full(rows.num_rows, -1.0)))
    deletes = pa.table({"file_path": paths, "pos": positions},
                       schema=schema_to_pyarrow(POSITION_DELETE_SCHEMA))
    delete_file = _write_delete_file(table, POSITION_DELETE_SCHEMA, deletes,
                                     DataFileContent.POSITION_DELETES, Record(), 0)
    added = list(_dataframe_to_data_files(table.metadata, new, table.io))
    snapshot = _commit(table, Operation.OVERWRITE, add=added, delete_files=[delete_file])
    return parent, snapshot.snapshot_id, rows.num_rows


def _table(scale: str, shape: str) -> tuple[BenchTable, int, int, int]:
    """The events table of ``scale`` (a copy of its own) with the update of ``shape``
    committed once (cached under ``benchmarks/data``)."""
    rows, files = pick(scale, (2_000_000, 4), (20_000_000, 20))
    bt = events_table_of(rows, files, cache=f"changelog-{shape}-{scale}")
    done = bt.root / ".update"
    if not done.exists():
        parent, snapshot, touched = _update(bt, shape)
        done.write_text(f"{parent} {snapshot} {touched}\n")
    parent, snapshot, touched = (int(v) for v in done.read_text().split())
    return bt, parent, snapshot, touched


def _child(contender: str, root: str, identifier: str, parent: str, snapshot: str) -> None:
    from icefloe import IcebergSource

    bt = BenchTable(Path(root), identifier)
    catalog = bt.catalog()
    bt.table()
    peak_before = peak_rss_mb()
    reset_peak_rss()
    base = rss_mb()
    start = time.perf_counter()
    if contender == "icefloe":
        src = IcebergSource(identifier, catalog=catalog, options={
            "changelog": "true", "startSnapshotId": parent, "endSnapshotId": snapshot})
        removed = added = 0
        for batch in src.read(parallelism=2):
            kinds = batch.column("_change_type").to_pylist()
            removed += kinds.count("DELETE")
            added += kinds.count("INSERT")
    else:
        before = IcebergSource(identifier, catalog=catalog,
                               options={"snapshotId": parent}).to_arrow()
        after = IcebergSource(identifier, catalog=catalog,
                              options={"snapshotId": snapshot}).to_arrow()
        keys = before.schema.names
        removed = before.join(after, keys=keys, join_type="left anti").num_rows
        added = after.join(before, keys=keys, join_type="left anti").num_rows
    seconds = time.perf_counter() - start
    peak = peak_rss_mb()
    child_report(contender=contender, seconds=seconds, removed=removed, added=added,
                 base_mb=base, over_mb=peak - base, peak_before_mb=peak_before)


CONTENDERS = ("icefloe", "diff")


def run(scale: str) -> str:
    reps = pick(scale, 3, 3)
    lines = []
    rows_md = []
    for shape in SHAPES:
        bt, parent, snapshot, touched = _table(scale, shape)
        res: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
        for r in range(reps):
            for name in CONTENDERS if r % 2 == 0 else CONTENDERS[::-1]:
                res[name].append(run_child(MODULE, name, str(bt.root), bt.identifier,
                                           str(parent), str(snapshot)))
        for name in CONTENDERS:
            got = {(x["removed"], x["added"]) for x in res[name]}
            assert got == {(touched, touched)}, f"{shape} {name}: {got} != {touched} each"
        t = {n: median([x["seconds"] for x in v]) for n, v in res.items()}
        mem = {n: median([x["over_mb"] for x in v]) for n, v in res.items()}
        speedup = t["diff"] / t["icefloe"]
        target = f" (target >= {SPEED_TARGET:.0f}x: {verdict(speedup >= SPEED_TARGET)})" \
            if shape == "clustered" else " (no target: every row group holds a change)"
        lines.append(f"- {shape} update of {touched:,} rows: icefloe **{speedup:.1f}x** "
                     f"faster than reading both snapshots and diffing{target}; peak "
                     f"{mem['icefloe']:.0f} MB over baseline vs {mem['diff']:.0f} MB")
        for name in CONTENDERS:
            rows_md.append([shape, name, fmt_s(t[name]), f"{mem[name]:.0f} MB",
                            ", ".join(f"{fmt_s(x['seconds'])} / {x['over_mb']:.0f} MB"
                                      for x in res[name])])
    total = pick(scale, "2M rows in 4 files", "20M rows in 20 files")
    return (
        f"One merge-on-read UPDATE touching 0.1% of the events table ({total}): a position "
        f"delete file and a data file of the new rows in one overwrite snapshot. Fresh "
        f"subprocess per measurement, {reps} alternating runs each, medians; peak RSS over "
        f"the baseline after imports and table load (`VmHWM`).\n\n"
        + "\n".join(lines) + "\n\n"
        + md_table(["update", "contender", "median", "peak RSS over baseline",
                    "runs (time / peak)"], rows_md)
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=5,
                    metavar=("CONTENDER", "ROOT", "TABLE", "PARENT", "SNAPSHOT"))
    ap.add_argument("--scale", default="quick")
    a = ap.parse_args()
    if a.child:
        _child(*a.child)
    else:
        print(run(a.scale))
