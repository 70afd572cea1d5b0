"""The soak harness (benchmarks/bench_soak.py) in seconds, so it does not rot between soaks.

A real writer (PyIceberg appends into a SQLite catalog), a real local stream in a child
process, two short windows; the exactly-once check against the writer's ids and
PyIceberg's scan of the head, and the report's verdicts. The Java writer's own smoke test
needs the interop environment (marker ``interop``).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import bench_soak


def test_ids_count_duplicates_but_not_replays_of_the_same_batch() -> None:
    ids = bench_soak.Ids()
    ids.add([0, 1, 2], key=7)
    ids.add([0, 1, 2], key=7)  # a replayed micro-batch into an idempotent sink
    assert ids.report() == {"rows": 3, "distinct": 3, "duplicates": 0, "min_id": 0,
                            "max_id": 2}
    ids.add([2, 3], key=8)      # id 2 again in another batch: a duplicate
    ids.add([4])
    ids.add([4])                # no key: every delivery counts
    r = ids.report()
    assert (r["rows"], r["distinct"], r["duplicates"], r["max_id"]) == (3 + 2 + 1 + 1, 5, 2, 4)
    ids.add([1000, 7], key=9)  # ids out of order, past the ledger's end
    assert ids.report() == {"rows": 9, "distinct": 7, "duplicates": 2, "min_id": 0,
                            "max_id": 1000}
    with pytest.raises(ValueError, match="id -1 is negative"):
        ids.add([-1], key=10)


def test_slope_fits_a_trend_and_a_flat_line() -> None:
    assert bench_soak.slope([0, 1, 2, 3], [1.0, 3.0, 5.0, 7.0]) == pytest.approx(2.0)
    assert bench_soak.slope([0, 1, 2, 3], [2.0, 2.0, 2.0, 2.0]) == pytest.approx(0.0)
    assert bench_soak.slope([1.0], [5.0]) == 0.0


def test_a_short_soak_on_the_local_engine_delivers_every_row_once(tmp_path: Path) -> None:
    result = bench_soak.soak(minutes=4 / 60, engines=["local"], writer="pyiceberg", rate=5,
                             history=5, window_s=2, idle_s=0.5)
    assert len(result["windows"]) == 2
    assert result["commits"] > 5 and result["written"] == 5 * result["commits"]
    check = result["checks"]["local"]
    assert check == {"rows": result["written"], "distinct": result["written"],
                     "duplicates": 0, "lost": 0, "exactly_once": True}
    assert result["oracle_same"] and result["oracle_rows"] == result["written"]
    for window in result["windows"]:
        m = window["engines"]["local"]
        # two-second windows: the CPU figures are clock ticks of noise, present and finite
        assert window["commits"] > 0 and m["rss_mb"] > 0
        assert math.isfinite(m["cpu_per_snapshot_ms"]) and m["cpu_per_idle_poll_ms"] >= 0
    text = bench_soak.summarize(result)
    assert "every row exactly once: **met**" in text
    assert f"{result['written']} rows, 0 lost, 0 duplicates" in text
    bench_soak.plot(result, tmp_path / "soak.png")
    assert (tmp_path / "soak.png").stat().st_size > 10_000
    # the per-poll log: every append (one data file each) was enumerated in exactly one
    # poll, and the history the polls saw grew to the table's snapshots
    records = result["poll_records"]["local"]
    assert sum(r["splits"] for r in records) == result["commits"]
    assert sum(r["units"] for r in records) == result["commits"]
    assert records[-1]["history"] == result["commits"]
    assert all(r["refresh_ms"] >= 0 and r["enumerate_ms"] >= 0 for r in records)
    assert [r["t"] for r in records] == sorted(r["t"] for r in records)
    bench_soak.plot_polls({**result, "poll_records": {"local": records * 2}},
                          tmp_path / "polls.png")
    assert (tmp_path / "polls.png").stat().st_size > 10_000


def test_ols_recovers_the_coefficients_of_a_linear_cost() -> None:
    rows = [{"units": u, "h": h, "cpu_ms": 0.3 + 2.0 * u + 0.05 * h + (0.01 if i % 2 else -0.01)}
            for i, (u, h) in enumerate((u, h) for u in range(5) for h in (1.0, 4.0, 9.0))]
    fit = bench_soak.ols(rows, "cpu_ms", ["units", "h"])
    assert fit["1"][0] == pytest.approx(0.3, abs=0.02)
    assert fit["units"][0] == pytest.approx(2.0, abs=0.01)
    assert fit["h"][0] == pytest.approx(0.05, abs=0.01)
    assert 0 < fit["units"][1] < 0.01  # the standard error of a near-exact fit
    assert bench_soak.ols(rows[:3], "cpu_ms", ["units", "h"]) == {}  # too few rows


def test_poll_fits_find_a_cost_that_grows_with_history_and_one_that_does_not() -> None:
    records = []
    process = 0.0
    for i in range(400):
        history = 1000 + 10 * i
        units = i % 3  # idle, one new snapshot, two
        # 0.3 ms a poll; 2 ms per new snapshot plus 0.5 ms per 1,000 snapshots of history
        cpu = 0.3 + units * (2.0 + 0.5 * history / 1000)
        process += (cpu + 1.0) / 1000
        records.append({"t": i * 0.2, "refresh_ms": cpu / 2, "enumerate_ms": cpu / 2,
                        "process_cpu": process, "units": units, "splits": units,
                        "history": history, "load1": 1.0 + (i % 7) / 10})
    fits = bench_soak.poll_fits(records)
    assert fits["idle"]["h"][0] == pytest.approx(0.0, abs=1e-6)
    assert fits["new"]["units"][0] == pytest.approx(2.0, abs=1e-3)
    assert fits["new"]["units_h"][0] == pytest.approx(0.5, abs=1e-3)
    assert fits["process"]["units_h"][0] == pytest.approx(0.5, abs=0.1)
    text = bench_soak.summarize_polls({"poll_records": {"ray": records}})
    assert text.startswith("| engine |") and "| ray | 399 (133 idle) | 1,010-4,990 |" in text


@pytest.mark.interop
def test_the_java_writer_commits_what_pyiceberg_reads() -> None:
    from benchmarks.java_planning import classpath

    if classpath()[0] is None:
        pytest.skip(f"no interop environment: {classpath()[1]}")
    result = bench_soak.soak(minutes=3 / 60, engines=["local"], writer="java", rate=10,
                             history=20, window_s=3, idle_s=0.5)
    assert result["commits"] > 20 and result["oracle_same"]
    assert result["checks"]["local"]["exactly_once"]


def test_a_jvms_native_memory_and_trim_are_read_from_jcmd(tmp_path: Path) -> None:
    """A real JVM under Native Memory Tracking: its categories (the committed heap at its
    -Xms), counts, and the RSS before and after glibc's trim, as the Spark child reads
    its driver JVM's."""
    import shutil
    import subprocess

    if shutil.which("java") is None or shutil.which("jcmd") is None:
        pytest.skip("no JDK (java, jcmd) on PATH")
    source = tmp_path / "Idle.java"
    source.write_text("public class Idle { public static void main(String[] a) throws "
                      "Exception { System.out.println(\"up\"); Thread.sleep(120_000); } }")
    proc = subprocess.Popen(["java", "-Xms64m", "-Xmx64m", "-XX:NativeMemoryTracking=summary",
                             str(source)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        nmt = bench_soak.nmt_summary(proc.pid)
        assert nmt["Java Heap"] == pytest.approx(64.0)
        assert nmt["Total"] > nmt["Java Heap"] + nmt["Code"] + nmt["Metaspace"] > 64
        assert nmt["classes"] > 100 and nmt["threads"] > 2
        before, after = bench_soak.trim_native_heap(proc.pid)
        assert 0 < after <= before + 1  # a trim frees or keeps; it does not grow the JVM
    finally:
        proc.kill()
        proc.communicate()
    assert bench_soak.nmt_summary(proc.pid) == {}  # no JVM there: empty, not an error


def test_the_memory_tables_show_growth_first_to_last() -> None:
    def window(t: float, jvm: float, code: float) -> dict[str, object]:
        return {"t_min": t, "engines": {"spark": {
            "roles": {"driver jvm": jvm, "driver python": 200.0, "tiny": 0.2},
            "nmt_mb": {"Total": 1400.0 + code, "Code": code, "classes": 19_000.0}}}}

    lines = bench_soak._memory_tables(
        [window(1.0, 1390.0, 40.0), window(2.0, 1400.0, 50.0), window(3.0, 1420.0, 55.0)],
        "spark")
    text = "\n".join(lines)
    assert "| driver jvm | 1390.0 | 1400.0 | 1420.0 | +30.0 |" in text
    assert "| Code | 40.0 | 50.0 | 55.0 | +15.0 |" in text
    assert "tiny" not in text  # under a megabyte throughout
    assert bench_soak._memory_tables([{"t_min": 1.0, "engines": {"spark": {}}}], "spark") == []
