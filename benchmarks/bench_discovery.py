"""Incremental discovery: the cost of finding one new snapshot's files.

Synthetic tables (see :func:`benchmarks.common.synthetic_table`) of 1k..100k (full: 1M)
files and 10..10,000 snapshots; the newest snapshot appended 10 files. Contenders,
interleaved on the same loaded metadata:

- icefloe: ``TableSplitPlanner.plan_added(new_snapshot)``;
- PyIceberg: ``table.incremental_append_scan(from_snapshot_id_exclusive=prev,
  to_snapshot_id_inclusive=new).plan_files()``;
- naive re-scan: plan both snapshots fully (icefloe's own planner) and diff paths —
  measured once per file count (it does not depend on the snapshot count).

Targets: icefloe's cost within 2x from the smallest to the biggest table; >= 100x
less than the full re-scan at the biggest table.
"""

from __future__ import annotations

from benchmarks.common import (
    fmt_s,
    interleaved,
    md_table,
    median,
    pick,
    synthetic_table,
    verdict,
)
from icefloe.enumerator.planner import TableSplitPlanner


def _planner(table) -> TableSplitPlanner:  # type: ignore[no-untyped-def]
    return TableSplitPlanner(table.metadata, table.io, table.schema(), None, True,
                             128 * 1024 * 1024)


def run(scale: str) -> str:
    sizes = pick(scale, (1_000, 10_000, 100_000), (1_000, 10_000, 100_000, 1_000_000))
    snaps = (10, 1_000, 10_000) if scale == "quick" else (10, 100, 1_000, 10_000)
    reps = 5
    rows = []
    added: dict[tuple[int, int], float] = {}
    rescan: dict[int, float] = {}
    for n_files in sizes:
        for n_snaps in snaps:
            st = synthetic_table(n_files, n_snaps)
            table = st.static()
            planner = _planner(table)
            new = table.metadata.snapshot_by_id(st.new_id)
            prev = table.metadata.snapshot_by_id(st.prev_id)

            def icefloe(planner=planner, new=new) -> int:  # type: ignore[no-untyped-def]
                return sum(1 for _ in planner.plan_added(new))

            def pyiceberg(table=table, st=st) -> int:  # type: ignore[no-untyped-def]
                return len(table.incremental_append_scan(
                    from_snapshot_id_exclusive=st.prev_id,
                    to_snapshot_id_inclusive=st.new_id).plan_files())

            contenders = {"icefloe": icefloe, "pyiceberg": pyiceberg}
            if n_snaps == snaps[0]:
                def rescan_diff(planner=planner, new=new, prev=prev) -> int:  # type: ignore[no-untyped-def]
                    before = {s.file_path for s in planner.plan_snapshot(prev)}
                    return len({s.file_path for s in planner.plan_snapshot(new)} - before)
                contenders["rescan"] = rescan_diff
            r_reps = reps if n_files <= 10_000 else 1
            res = interleaved({k: v for k, v in contenders.items() if k != "rescan"}, reps)
            if "rescan" in contenders:
                rr = interleaved({"rescan": contenders["rescan"]}, r_reps,
                                 warmup=n_files <= 10_000)
                rescan[n_files] = median([x[0] for x in rr["rescan"]])
                assert rr["rescan"][0][1] == 10
            assert res["icefloe"][0][1] == 10 and res["pyiceberg"][0][1] == 10
            t_ice = median([x[0] for x in res["icefloe"]])
            t_pi = median([x[0] for x in res["pyiceberg"]])
            added[(n_files, n_snaps)] = t_ice
            rows.append([f"{n_files:,}", f"{n_snaps:,}", fmt_s(t_ice), fmt_s(t_pi),
                         f"{t_pi / t_ice:.1f}x", fmt_s(rescan[n_files]),
                         f"{rescan[n_files] / t_ice:,.0f}x"])
    lo = median([added[(sizes[0], s)] for s in snaps])
    hi = median([added[(sizes[-1], s)] for s in snaps])
    growth = hi / lo
    worst = max(added.values()) / min(added.values())
    vs_rescan = rescan[sizes[-1]] / max(added[(sizes[-1], s)] for s in snaps)
    return (
        f"Median of {reps} interleaved runs (re-scan: {reps} runs up to 10k files, 1 run "
        "above). Every contender found exactly the 10 new files.\n\n"
        f"- icefloe cost growth {sizes[0]:,} -> {sizes[-1]:,} files: **{growth:.2f}x** "
        f"(median over snapshot counts; worst cell/best cell {worst:.2f}x; target <= 2x: "
        f"{verdict(growth <= 2)})\n"
        f"- vs naive full re-scan-and-diff at {sizes[-1]:,} files: **{vs_rescan:,.0f}x** less "
        f"(worst snapshot count; target >= 100x: {verdict(vs_rescan >= 100)})\n\n"
        + md_table(["files", "snapshots", "icefloe plan_added", "PyIceberg incremental",
                    "PyIceberg / icefloe", "re-scan + diff", "re-scan / icefloe"], rows)
    )


if __name__ == "__main__":
    import sys

    print(run(sys.argv[1] if len(sys.argv) > 1 else "quick"))
