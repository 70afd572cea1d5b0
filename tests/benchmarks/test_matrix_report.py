"""The defaults matrix's verdicts, table and figure from recorded cells (no measuring: the
matrix itself runs with ``python -m benchmarks.bench_matrix``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_matrix
from benchmarks.bench_matrix import (
    MB,
    cell_files,
    draw,
    paired,
    ratios,
    report,
    steal_s,
    undecided,
)


def _cell(size: int, groups: int, link: str, defaults: float, pyarrow: float,
          pyiceberg: float, tuned: float) -> dict[str, Any]:
    files, rows = cell_files(size, groups)
    return {"size": size, "row_groups": groups, "link": link, "files": files, "rows": rows,
            "bytes": files * size, "tune": "within-noise: parallelism=4 (1.01x)",
            "tuned": {"parallelism": 4}, "load": ["3.1 2.0 1.0", "3.5 2.1 1.0"],
            "seconds": {"icefloe (defaults)": [defaults] * 3, "icefloe (tuned)": [tuned] * 3,
                        "pyarrow dataset": [pyarrow] * 3, "pyiceberg": [pyiceberg] * 3}}


def test_verdicts_table_and_figure(tmp_path: Path) -> None:
    recorded = {
        "1:1:local-disk": _cell(MB, 1, "local disk", 1.0, 1.2, 1.6, 0.95),
        "256:4:s3-30-ms": _cell(256 * MB, 4, "s3 30 ms", 1.0, 0.9, 1.6, 0.8),
    }
    assert ratios(recorded["256:4:s3-30-ms"]) == {
        "pyarrow dataset": 0.9, "pyiceberg": 1.6, "icefloe (tuned)": 0.8}
    text = report("quick", recorded, None)
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    assert len(lines) == 3  # header and one row per cell
    assert "| **met** |" in lines[1]
    assert "**missed** (pyarrow, tuned) |" in lines[2]  # no spread: a real miss
    assert "**1 of 2 cells meet every target.**" in text
    assert cell_files(MB, 1) == (64, 40_000) and cell_files(1_000 * MB, 16)[0] == 1
    target = tmp_path / "matrix.png"
    draw(recorded, target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["matrix.png"]  # no temporary left


def test_a_missed_target_with_its_ceiling_shown(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """A target a profile showed out of reach reads "ceiling: <reason>" when missed; a
    cell missing another target too stays "missed" for that one."""
    monkeypatch.setattr(bench_matrix, "CEILINGS", {
        ("32:1:local-disk", "pyiceberg"): "CPU, decode 0.26 s of PyIceberg's 0.30 s",
        ("32:4:s3-10-ms", "pyiceberg"): "CPU"})
    recorded = {
        "32:1:local-disk": _cell(32 * MB, 1, "local disk", 1.0, 1.2, 1.2, 0.95),
        "32:4:s3-10-ms": _cell(32 * MB, 4, "s3 10 ms", 1.0, 0.9, 1.2, 1.0),
        "1:1:local-disk": _cell(MB, 1, "local disk", 1.0, 1.2, 1.6, 0.95),
    }
    text = report("quick", recorded, None)
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    by_size = {ln.split(" | ")[0]: ln for ln in lines[1:]}
    assert "| ceiling (pyiceberg): CPU, decode 0.26 s of PyIceberg's 0.30 s |" in \
        next(ln for ln in lines if "local disk" in ln and "32 MB" in ln)
    assert "| **missed** (pyarrow); ceiling (pyiceberg): CPU |" in \
        next(ln for ln in lines if "s3 10 ms" in ln)
    assert "| **met** |" in by_size["| 1 MB"]
    assert "**1 of 3 cells meet every target; 1 more miss only targets a profile shows " \
        "out of reach" in text
    draw(recorded, tmp_path / "matrix.png")
    assert (tmp_path / "matrix.png").stat().st_size > 0



def test_the_tuned_target_is_judged_on_the_tuned_pairs_reads() -> None:
    """Where the tuned pair was read 5 times, its ratio and verdict come from those reads
    (the other peers' from the cell's 3); "within noise" only where the pair's spread
    covers the difference, else "missed"."""
    cell = _cell(MB, 1, "s3 10 ms", 1.0, 0.9, 1.6, 0.8)
    cell["tuned_pair"] = {"icefloe (defaults)": [1.0, 1.3, 0.8, 1.1, 0.9],
                          "icefloe (tuned)": [0.85, 1.2, 0.8, 0.95, 0.75]}
    r = ratios(cell)
    # by round: 0.85, 0.92, 1.0, 0.86, 0.83
    assert r["icefloe (tuned)"] == pytest.approx(0.95 / 1.1)
    assert r["pyarrow dataset"] == pytest.approx(0.9)
    text = report("quick", {"1:1:s3-10-ms": cell}, None)
    assert "**missed** (pyarrow, tuned within noise)" in text  # spread 0.3 > gain 0.18
    cell["tuned_pair"] = {"icefloe (defaults)": [1.0, 1.02, 0.99, 1.01, 1.5],
                          "icefloe (tuned)": [0.8, 0.81, 0.79, 0.8, 0.82]}
    assert "**missed** (pyarrow, tuned) |" in report("quick", {"1:1:s3-10-ms": cell}, None)
    # which 3-read results ask for the tuned pair's 5: the ratio within the noise of 0.9
    assert undecided([1.0, 1.2, 0.9], [0.95, 1.0, 1.1])  # 0.95x, spread 0.3
    assert not undecided([1.0, 1.01, 0.99], [0.7, 0.71, 0.69])  # 0.70x, spread 0.03
    assert not undecided([1.0, 1.01, 0.99], [1.1, 1.11, 1.09])  # 1.10x


def test_a_cpu_ceiling_from_the_cells_own_figures() -> None:
    """PyIceberg's 1.5x is out of reach where the least CPU any process of the cell spent
    on a read, spread over every core, is longer than 1.5x PyIceberg allows; not where it
    fits, nor for PyArrow's target, nor without the decode's figure."""
    cell = _cell(MB, 1, "local disk", 0.20, 0.15, 0.24, 0.20)
    cell["cores"] = 2
    cell["cpu"] = {"icefloe (defaults)": [0.36] * 3, "icefloe (tuned)": [0.37] * 3,
                   "pyarrow dataset": [0.33, 0.34, 0.50], "pyiceberg": [0.4] * 3,
                   bench_matrix.DECODE: [0.35] * 3}
    # floor: PyArrow's 0.34 s / 2 cores = 0.17 s > 0.24 / 1.5 = 0.16 s
    why = bench_matrix.cpu_ceiling(cell, "pyiceberg")
    assert why is not None and "pyarrow dataset's 0.34 s" in why and "0.17 s" in why
    assert bench_matrix.cpu_ceiling(cell, "pyarrow dataset") is None
    row = report("quick", {"1:1:local-disk": cell}, None)
    assert "**missed** (pyarrow); ceiling (pyiceberg): CPU: the least CPU" in row
    cell["cores"] = 4  # 0.34 / 4 = 0.085 s: within reach
    assert bench_matrix.cpu_ceiling(cell, "pyiceberg") is None
    cell["cores"] = 2
    cell["seconds"]["pyiceberg"] = [0.27] * 3  # needs 0.18 s >= 0.17 s: within reach
    assert bench_matrix.cpu_ceiling(cell, "pyiceberg") is None
    del cell["cpu"][bench_matrix.DECODE]  # recorded before the decode was measured
    cell["seconds"]["pyiceberg"] = [0.24] * 3
    assert bench_matrix.cpu_ceiling(cell, "pyiceberg") is None
    # such a cell keeps session 11's profiled ceiling
    assert "decoding the files alone takes 0.32 s" in report(
        "quick", {"1:1:local-disk": cell}, None)


def _s3_cell(pyiceberg: float, pyarrow: float = 0.5) -> dict[str, Any]:
    """An S3 cell at 10 ms with the figures of :func:`bench_matrix.s3_bound`: decode
    0.28 s + fetch 0.06 s of CPU, the fetch's servers 0.13 s, the readers' 0.40 s and
    0.20 s; 2 cores."""
    cell = _cell(32 * MB, 4, "s3 10 ms", 0.6, pyarrow, pyiceberg, 0.6)
    cell["cores"] = 2
    cell["seconds"][bench_matrix.DECODE] = [0.2] * 3
    cell["seconds"][bench_matrix.FETCH] = [0.1] * 3
    readers = ["icefloe (defaults)", "icefloe (tuned)", "pyarrow dataset", "pyiceberg"]
    cell["cpu"] = {**{n: [0.4] * 3 for n in readers}, bench_matrix.DECODE: [0.28] * 3,
                   bench_matrix.FETCH: [0.05, 0.06, 0.2]}
    cell["server_cpu"] = {**{n: [0.2] * 3 for n in readers}, bench_matrix.DECODE: [0.0] * 3,
                          bench_matrix.FETCH: [0.13] * 3}
    cell["server_idle_cpu_s"] = 0.0
    return cell


def test_the_s3_floor_adds_planning_to_the_datas_cpu() -> None:
    """On S3 the bound is planning's 4 round trips (0.08 s at 10 ms), the data file's
    HEAD and its GET's way out (0.03 s), plus the data's CPU (decode + Arrow's S3 client +
    the servers' for the fetch) over the cores: 0.11 + (0.28 + 0.06 + 0.13) / 2 = 0.345 s.
    A ceiling for 1.5x PyIceberg where that exceeds PyIceberg's time / 1.5 (the old rule,
    the decode's 0.14 s, shows none there), none where it does not."""
    cell = _s3_cell(pyiceberg=0.39)  # needs <= 0.26 s
    found = bench_matrix.s3_bound(cell)
    assert found is not None and found["which"] == "data after planning"
    assert found["bound"] == pytest.approx(0.08 + 0.03 + (0.28 + 0.06 + 0.13) / 2)
    assert found["bounds"]["round trips"] == pytest.approx(0.12)  # 4 + 2 round trips
    assert found["bounds"]["whole"] == pytest.approx((0.34 + 0.13) / 2)
    why = bench_matrix.s3_ceiling(cell, "pyiceberg")
    assert why is not None and "0.345 s; 1.5x PyIceberg (0.390 s) needs <= 0.260 s" in why
    assert "decode 0.28 s + Arrow's S3 client 0.06 s + SeaweedFS and proxy 0.13 s" in why
    assert bench_matrix.cpu_ceiling(cell, "pyiceberg") is None  # the local rule: 0.14 s
    text = report("full", {"32:4:s3-10-ms": cell}, None)
    assert "ceiling (pyiceberg): S3 floor: planning's 4 round trips (0.08 s) and the " \
        "data's GET's way after its file's HEAD (0.03 s)" in text
    assert "| 0.345 (data after planning); servers 0.20 / 0.20 / 0.20; decode 0.28 + " \
        "fetch 0.06 + 0.13 |" in text
    assert bench_matrix.s3_ceiling(_s3_cell(pyiceberg=0.53), "pyiceberg") is None  # 0.353
    assert bench_matrix.s3_ceiling(cell, "icefloe (tuned)") is None
    # the servers' background over each read's time is not the read's
    cell["server_idle_cpu_s"] = 0.1  # the fetch's 0.13 - 0.1 x 0.1 s; icefloe's 0.14
    found = bench_matrix.s3_bound(cell)
    assert found is not None and found["bound"] == pytest.approx(0.11 + 0.46 / 2)


def test_the_s3_floor_counts_the_round_trips_every_arrow_reader_pays() -> None:
    """Where the data's CPU is small, the bound is the round trips in series: the
    manifest list's and the manifest's HEAD and GET, then the data file's HEAD and GET
    (6 x 2 x delay); at 30 ms 0.36 s."""
    cell = _s3_cell(pyiceberg=0.5)
    cell["link"] = "s3 30 ms"
    cell["cpu"] = {n: [0.02] * 3 for n in cell["cpu"]}
    cell["cpu"][bench_matrix.DECODE] = cell["cpu"][bench_matrix.FETCH] = [0.01] * 3
    cell["server_cpu"] = {n: [0.01] * 3 for n in cell["server_cpu"]}
    found = bench_matrix.s3_bound(cell)
    assert found is not None and found["which"] == "round trips"
    assert found["bound"] == pytest.approx(6 * 0.06)
    # planning, the file's HEAD and the GET's way out, then 0.03 s of CPU over 2 cores
    assert found["bounds"]["data after planning"] == pytest.approx(4 * 0.06 + 0.09 + 0.015)
    why = bench_matrix.s3_ceiling(cell, "pyiceberg")  # needs <= 0.333 s
    assert why is not None and "planning's 4 round trips in series, then 2 for the " \
        "data: 6 x 0.06 s is 0.360 s" in why


def test_the_s3_floor_only_maxes_what_the_cell_refutes() -> None:
    """Where a reader's whole CPU is below decode + fetch, those are not a floor of the
    data's work: the bound is then the round trips or the least whole read's CPU, with
    nothing added; where a reader's servers' CPU is below the fetch's, the data's
    server term counts 0."""
    cell = _s3_cell(pyiceberg=0.39)
    cell["cpu"]["pyiceberg"] = [0.30] * 3  # < 0.34
    found = bench_matrix.s3_bound(cell)
    assert found is not None and "data after planning" not in found["bounds"]
    assert found["bound"] == pytest.approx((0.30 + 0.13) / 2) and found["which"] == "whole"
    assert bench_matrix.s3_ceiling(cell, "pyiceberg") is None  # 0.215 <= 0.26
    cell = _s3_cell(pyiceberg=0.39)
    cell["server_cpu"]["pyarrow dataset"] = [0.10] * 3  # < the fetch's 0.13
    found = bench_matrix.s3_bound(cell)
    assert found is not None and found["data_server"] == 0.0
    assert found["bounds"]["data after planning"] == pytest.approx(0.11 + 0.34 / 2)
    assert found["bounds"]["whole"] == pytest.approx((0.34 + 0.10) / 2)
    assert found["bound"] == pytest.approx(0.28) and found["which"] == "data after planning"
    why = bench_matrix.s3_ceiling(cell, "pyiceberg")  # 0.28 > 0.39 / 1.5
    assert why is not None and "SeaweedFS and proxy" not in why
    assert "the servers' CPU left out: pyarrow dataset's reads cost them less" in why


def test_the_s3_floor_takes_each_readers_data_cpu_where_planning_was_timed() -> None:
    """With the planning pass's CPU (icefloe's and PyIceberg's, timed alone), the data's
    client CPU is the least of decode + fetch and each reader's own less its planning's
    (PyArrow's as it is: its files are listed before its clock), so a reader whose whole
    read took less than decode + fetch no longer drops the data's term: session 22's
    32 MB x 16 at 30 ms (icefloe 0.58 s of CPU with its planning, decode + fetch 0.61 s)."""
    cell = _s3_cell(pyiceberg=0.39)
    cell["cpu"]["icefloe (defaults)"] = [0.32] * 3  # < decode + fetch, 0.34
    assert "data after planning" not in bench_matrix.s3_bound(cell)["bounds"]  # no plan CPU
    cell["planning"] = {"seconds": [0.09] * 3, "cpu": [0.02, 0.03, 0.5],
                        "pyiceberg": {"seconds": [0.1] * 3, "cpu": [0.05] * 3}}
    found = bench_matrix.s3_bound(cell)
    assert found is not None and found["data_who"] == "icefloe (defaults)"
    assert found["data"] == pytest.approx(0.32 - 0.03)  # less its planning's median
    # the fetch's servers' 0.13 s is <= every reader's 0.2 s: counted
    assert found["bounds"]["data after planning"] == pytest.approx(0.11 + (0.29 + 0.13) / 2)
    assert found["which"] == "data after planning"
    assert "icefloe (defaults)'s, its planning's taken off, 0.29 s" in \
        bench_matrix.s3_ceiling(cell, "pyiceberg")  # 0.32 > 0.39 / 1.5 = 0.26
    cell["cpu"]["pyiceberg"] = [0.30] * 3  # less its planning's 0.05: 0.25, the least
    assert bench_matrix.s3_bound(cell)["data_who"] == "pyiceberg"
    assert bench_matrix.s3_bound(cell)["data"] == pytest.approx(0.25)
    cell["cpu"]["pyarrow dataset"] = [0.24] * 3  # nothing taken off PyArrow's
    assert bench_matrix.s3_bound(cell)["data"] == pytest.approx(0.24)


def test_the_s3_floor_against_pyarrow_only_from_planning() -> None:
    """PyArrow's 1.0x is out of reach only where planning's round trips, which its timing
    leaves out, carry the bound past its time: not where the data's floor alone does
    (without planning: 0.03 + 0.235 = 0.265 s)."""
    cell = _s3_cell(pyiceberg=0.9, pyarrow=0.27)  # without planning 0.265 s <= 0.27 s
    why = bench_matrix.s3_ceiling(cell, "pyarrow dataset")
    assert why is not None and "1.0x PyArrow (its listing before its clock) (0.270 s)" in why
    cell = _s3_cell(pyiceberg=0.9, pyarrow=0.25)  # 0.265 s > 0.25 s without planning
    assert bench_matrix.s3_ceiling(cell, "pyarrow dataset") is None


def test_a_decided_miss_counts_the_rounds_whose_own_floor_is_above_the_need() -> None:
    """Each round's need (PyIceberg's read / 1.5) against the S3 floor of that round's
    own reads: round 0 needs 0.26 s where its floor is 0.11 + (0.28 + 0.05 + 0.13) / 2 =
    0.34 s; rounds 1 and 2 need 0.567 s and 0.533 s, above their floors (0.345 s; 0.265 s,
    the whole read's CPU, where the fetch's 0.2 s puts decode + fetch past the readers'
    0.4 s). The cell's medians show no ceiling (0.345 s <= 0.533 s) and the miss is
    decided (0.65x, 1.42x, 1.33x): the verdict says 1 of 3 rounds."""
    cell = _s3_cell(pyiceberg=0.8, pyarrow=0.7)
    cell["seconds"]["pyiceberg"] = [0.39, 0.85, 0.80]
    rounds = bench_matrix.round_floors(cell, "pyiceberg")
    assert [need for need, _ in rounds] == pytest.approx([0.26, 0.85 / 1.5, 0.80 / 1.5])
    assert [floor for _, floor in rounds] == pytest.approx(
        [0.11 + 0.46 / 2, 0.11 + 0.47 / 2, (0.4 + 0.13) / 2])
    assert bench_matrix.s3_ceiling(cell, "pyiceberg") is None
    assert not bench_matrix.within_noise(cell, "pyiceberg")
    assert bench_matrix.cell_verdict("32:4:s3-10-ms", cell) == \
        "**missed** (pyiceberg; its round's floor above the need in 1 of 3 rounds)"
    assert bench_matrix.round_floors(cell, "icefloe (tuned)") == []
    local = _cell(32 * MB, 4, "local disk", 0.6, 0.7, 0.8, 0.6)
    assert bench_matrix.round_floors(local, "pyiceberg") == []
    cell["seconds"]["pyiceberg"] = [0.70, 0.85, 0.80]  # no round's floor above its need
    assert bench_matrix.cell_verdict("32:4:s3-10-ms", cell) == "**missed** (pyiceberg)"


def test_a_run_records_arrows_memory_pool_and_the_kernels_huge_pages(tmp_path: Path) -> None:
    """Each cell records the pool its contenders' processes get and the transparent huge
    pages mode; the report's header names them, runs recorded before as "not recorded"."""
    import pyarrow as pa

    thp = tmp_path / "enabled"
    thp.write_text("always [madvise] never\n")
    backend = pa.default_memory_pool().backend_name
    assert bench_matrix.memory_setting(thp) == f"{backend}, huge pages madvise"
    assert bench_matrix.memory_setting(tmp_path / "missing").endswith("huge pages unknown")
    old = _cell(MB, 1, "local disk", 1.0, 1.2, 1.6, 0.95)
    new = {**old, "memory": "mimalloc, huge pages madvise"}
    assert "transparent huge pages: not recorded;" in report("quick", {"1:1:local-disk": old},
                                                               None)
    pooled = bench_matrix.pool([{"1:1:local-disk": old}, {"1:1:local-disk": new}])
    assert pooled["1:1:local-disk"]["memories"] == ["not recorded",
                                                   "mimalloc, huge pages madvise"]
    assert "transparent huge pages: mimalloc, huge pages madvise / not recorded;" in \
        report("quick", pooled, None)


def test_cells_without_the_s3_figures_still_report() -> None:
    """An S3 cell recorded before the fetch and the servers were measured has no S3
    bound; it reports as before (the local rule, "-" in the floor's column)."""
    cell = _s3_cell(pyiceberg=0.39)
    del cell["server_cpu"], cell["server_idle_cpu_s"]
    del cell["cpu"][bench_matrix.FETCH], cell["seconds"][bench_matrix.FETCH]
    assert bench_matrix.s3_bound(cell) is None
    cell["link"], cell["size"] = "s3 30 ms", 256 * MB  # a cell with no CEILINGS entry
    text = report("full", {"256:4:s3-30-ms": cell}, None)
    assert "**missed** (pyarrow, pyiceberg) | within-noise" in text and text.endswith(" | - |")
    assert bench_matrix.s3_bound(_cell(MB, 1, "local disk", 1, 1, 1, 1)) is None


_CHILD = """
import sys, time
start = time.process_time()
while time.process_time() - start < 0.3:
    pass
print("burnt", flush=True)
sys.stdin.read()
"""


def test_the_servers_cpu_read_from_proc_and_their_processes(tmp_path: Path) -> None:
    """:func:`bench_matrix.servers_cpu` reads a live process's CPU (it burns 0.3 s);
    :meth:`Links.server_pids` finds SeaweedFS's process tree and the proxy of the link's
    delay among this process's children, not the other link's proxy."""
    import subprocess
    import sys

    def child(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", _CHILD, *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)

    burner = child()
    try:
        assert burner.stdout is not None and burner.stdout.readline() == "burnt\n"
        used = bench_matrix.servers_cpu([burner.pid])
        assert 0.29 <= used < 5  # its 0.3 s, in 10 ms ticks; not the machine's
    finally:
        burner.communicate("")
    spawn = "import subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1]])"
    weed = subprocess.Popen([sys.executable, "-c", spawn, _CHILD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    proxies = [child("--proxy", "1", "0.01"), child("--proxy", "1", "0.03")]
    try:
        assert weed.stdout is not None and weed.stdout.readline() == "burnt\n"

        class Seaweed:
            proc = weed

        links = bench_matrix.Links(tmp_path, Seaweed(), {})
        pids = links.server_pids("s3 10 ms")
        assert pids[0] == weed.pid and len(pids) == 3 and proxies[0].pid in pids
        assert proxies[1].pid not in pids and proxies[1].pid in links.server_pids("s3 30 ms")
        assert links.server_pids("local disk") == []
        assert bench_matrix.servers_cpu(pids) >= 0.29  # the grandchild's burn
    finally:
        for proc in [weed, *proxies]:
            proc.communicate("")


def test_ratios_pair_the_reads_of_one_round() -> None:
    """Session 18's shape: the defaults' first three rounds in a slow spell, PyArrow's
    middle reads in a fast one. The ratio of the medians (2.2 / 3.0 = 0.73x) compares reads
    of different spells; by round, PyArrow is slower in 3 of 5 (median 1.10x)."""
    defaults = [3.0, 3.1, 3.0, 2.0, 2.1]
    pyarrow = [3.3, 2.2, 2.1, 2.2, 2.3]
    assert paired(defaults, pyarrow) == pytest.approx(2.3 / 2.1)
    cell = _cell(MB, 1, "local disk", 1.0, 1.0, 1.6, 1.0)
    cell["seconds"]["icefloe (defaults)"] = defaults
    cell["seconds"]["pyarrow dataset"] = pyarrow
    assert ratios(cell)["pyarrow dataset"] == pytest.approx(2.3 / 2.1)
    assert paired([1.0, 2.0], [1.0, 2.0, 9.0]) == 1.0  # a read without its round's partner: out


def test_the_steal_of_a_cells_reads_is_reported() -> None:
    """The share of the cores' time the hypervisor gave away during the round-robin reads,
    from the recorded per-read steal; and this machine's counter moves forward only."""
    cell = _cell(MB, 1, "local disk", 1.0, 1.2, 1.6, 0.95)
    cell["cores"] = 2
    cell["steal"] = {"icefloe (defaults)": [0.3, 0.3, 0.3], "pyarrow dataset": [0.0] * 3,
                     "icefloe (tuned)": [0.0] * 3, "pyiceberg": [0.0] * 3}
    row = next(ln for ln in report("quick", {"1:1:local-disk": cell}, None).splitlines()
               if ln.startswith("| 1 MB"))
    # 0.9 s stolen over 3 * (1.0 + 0.95 + 1.2 + 1.6) s of reads on 2 cores
    assert "| 3.1-3.5; steal 3 % |" in row
    first = steal_s()
    assert 0.0 <= first <= steal_s()


def test_planning_timed_alone_shows_pyarrows_target_out_of_reach() -> None:
    """PyArrow's files are listed before its clock: where icefloe's reads less its
    planning (timed alone, recorded with the cell) meet 1.0x, the miss is a ceiling; where
    they would not, it stays missed; PyIceberg plans in its own time, so never for it."""
    from benchmarks.bench_matrix import DECODE, planning_ceiling

    cell = _cell(MB, 1, "local disk", 0.35, 0.30, 0.60, 0.35)
    cell["cpu"] = {n: [0.1] * 3 for n in (*cell["seconds"], DECODE)}  # no CPU ceiling
    cell["planning"] = {"seconds": [0.06, 0.05, 0.07]}
    assert planning_ceiling(cell, "pyiceberg") is None
    why = planning_ceiling(cell, "pyarrow dataset")
    assert why is not None and "planning (0.060 s" in why and "without it 1.03x" in why
    row = next(ln for ln in report("quick", {"1:1:local-disk": cell}, None).splitlines()
               if ln.startswith("| 1 MB"))
    assert "| 0.86x (0.86-0.86) |" in row and "| ceiling (pyarrow): planning (0.060 s" in row
    cell["planning"] = {"seconds": [0.02] * 3}  # 0.30 / 0.33: still short of 1.0x
    assert planning_ceiling(cell, "pyarrow dataset") is None
    assert "**missed** (pyarrow)" in report("quick", {"1:1:local-disk": cell}, None)


def test_the_figure_shades_a_tuned_setting_that_is_the_defaults_read_as_met() -> None:
    """The figure's colours follow the verdicts: a tuned target missed by the ratio of two
    identical reads (``same_read``) is met in the table and green in the figure (session
    21's figure had two such cells red while the table called them met)."""
    from benchmarks.bench_matrix import shade

    cell = _cell(256 * MB, 16, "s3 30 ms", 1.0, 1.2, 1.6, 0.71)
    key = "256:16:s3-30-ms"
    assert shade(cell, key, "icefloe (tuned)") == 0  # missed: red
    assert "**missed** (tuned)" in bench_matrix.cell_verdict(key, cell)
    cell["same_read"] = True
    assert shade(cell, key, "icefloe (tuned)") == 3  # met: green
    assert bench_matrix.cell_verdict(key, cell) == "**met**"
    assert shade(cell, key, "pyarrow dataset") == 3 and shade(None, key, "pyiceberg") == 1
    cell["seconds"]["pyarrow dataset"] = [0.9] * 3
    assert shade(cell, key, "pyarrow dataset") == 0
    cell["seconds"]["pyarrow dataset"] = [0.8, 0.9, 1.05]  # a round reaches 1.0x
    assert shade(cell, key, "pyarrow dataset") == 4  # missed within noise: pale red
    assert "**missed** (pyarrow within noise)" in bench_matrix.cell_verdict(key, cell)


def test_the_interval_of_a_cells_ratio_is_the_sign_tests_order_statistics() -> None:
    """The interval of the rounds' ratios: their least and most for 5 rounds (94 %), the
    2nd least and most for 10 (98 %; the 3rd would cover only 89 %), the 6th for 20."""
    from benchmarks.bench_matrix import paired_interval

    base = [2.0] * 20
    peer = [2.0 * r for r in (0.5, 1.4, 0.8, 1.1, 0.9, 1.0, 1.2, 0.6, 1.3, 0.7,
                              0.55, 1.45, 0.85, 1.15, 0.95, 1.05, 1.25, 0.65, 1.35, 0.75)]
    assert paired_interval(base[:5], peer[:5]) == pytest.approx((0.5, 1.4))
    assert paired_interval(base[:10], peer[:10]) == pytest.approx((0.6, 1.3))
    assert paired_interval(base, peer) == pytest.approx((0.75, 1.2))
    assert paired_interval(base[:10], peer[:10], confidence=0.8) == pytest.approx((0.7, 1.2))
    assert paired_interval([1.0], [0.9]) == pytest.approx((0.9, 0.9))


def test_a_missed_target_is_within_noise_where_its_interval_reaches_it() -> None:
    """PyArrow's 1.0x missed by the median of the rounds' ratios is "within noise" where
    a round's ratio at the interval's edge reaches 1.0x, a plain miss where none does; the
    count of cells that miss only within noise is in the report's summary."""
    cell = _cell(MB, 1, "local disk", 1.0, 0.9, 1.6, 1.0)
    cell["seconds"]["pyarrow dataset"] = [0.8, 0.9, 1.05]  # 3 rounds: least and most
    assert ratios(cell)["pyarrow dataset"] == pytest.approx(0.9)
    text = report("quick", {"1:1:local-disk": cell}, None)
    assert "| 0.90x (0.80-1.05) |" in text
    assert "**missed** (pyarrow within noise) |" in text
    assert "**0 of 1 cells meet every target; 1 more miss only within noise.**" in text
    cell["seconds"]["pyarrow dataset"] = [0.8, 0.9, 0.95]
    assert "**missed** (pyarrow) |" in report("quick", {"1:1:local-disk": cell}, None)


def _run_cell(defaults: list[float], pyarrow: list[float], idle: float, server: list[float],
              same: bool, load: str) -> dict[str, Any]:
    cell = _cell(32 * MB, 4, "s3 10 ms", 1.0, 1.0, 1.6, 1.0)
    n = len(defaults)
    cell["seconds"] = {"icefloe (defaults)": defaults, "icefloe (tuned)": [1.0] * n,
                       "pyarrow dataset": pyarrow, "pyiceberg": [1.6] * n}
    cell["cpu"] = {name: [0.5] * n for name in cell["seconds"]}
    cell["server_cpu"] = {name: list(server) for name in cell["seconds"]}
    cell["server_idle_cpu_s"] = idle
    cell["same_read"] = same
    cell["load"] = [load, load]
    cell["planning"] = {"seconds": [0.1] * n, "rows": 1, "cpu": [idle] * n,
                        "pyiceberg": {"seconds": [0.2] * n, "cpu": [0.05] * n}}
    return cell


def test_two_whole_runs_pooled_into_one_verdict_per_cell() -> None:
    """``pool``: every contender's reads of both runs with their rounds kept (a ratio pairs
    reads of the same run's round), the servers' CPU net of each run's own background, the
    tuned pair per run (one with its longer pair), ``same_read`` only where every run read
    the same; cells not in every run are left out, a cell of another table refused."""
    from benchmarks.bench_matrix import _servers, pool

    one = {"32:4:s3-10-ms": _run_cell([1.0, 2.0, 1.0], [0.9, 1.8, 0.9], 0.1, [0.5] * 3,
                                      True, "1.0 1.0 1.0"),
           "1:1:local-disk": _cell(MB, 1, "local disk", 1.0, 1.2, 1.6, 1.0)}
    two = {"32:4:s3-10-ms": _run_cell([2.0, 1.0, 1.0], [2.4, 1.2, 1.2], 0.0, [0.3] * 3,
                                      False, "4.0 4.0 4.0")}
    two["32:4:s3-10-ms"]["tuned_pair"] = {"icefloe (defaults)": [1.0] * 5,
                                          "icefloe (tuned)": [0.5] * 5}
    pooled = pool([one, two])
    assert list(pooled) == ["32:4:s3-10-ms"]
    cell = pooled["32:4:s3-10-ms"]
    assert cell["seconds"]["pyarrow dataset"] == [0.9, 1.8, 0.9, 2.4, 1.2, 1.2]
    # rounds: 0.9 0.9 0.9 1.2 1.2 1.2; pooled as medians of times it would be 1.2 / 1.0
    assert ratios(cell)["pyarrow dataset"] == pytest.approx(1.05)
    # run one's 0.5 s less 0.1 s/s of its background over 1-2 s reads; run two's 0.3 s
    assert cell["server_cpu"]["pyarrow dataset"] == pytest.approx(
        [0.41, 0.32, 0.41] + [0.3] * 3)
    assert _servers(cell, "pyarrow dataset") == pytest.approx(0.31)  # their median
    assert cell["tuned_pair"]["icefloe (tuned)"] == [1.0] * 3 + [0.5] * 5
    assert cell["same_read"] is False and cell["runs"] == 2
    assert cell["planning"]["seconds"] == [0.1] * 6
    assert cell["planning"]["cpu"] == [0.1] * 3 + [0.0] * 3
    assert cell["planning"]["pyiceberg"] == {"seconds": [0.2] * 6, "cpu": [0.05] * 6}
    text = report("full", pooled, None)
    assert "**2 independent whole runs of the matrix pooled**" in text
    assert "3 timed reads each per run" in text
    assert "| 1.0-1.0, 4.0-4.0 |" in text
    assert "run 1: within-noise: parallelism=4 (1.01x); the same read as the defaults / " \
        "run 2: within-noise" in text
    two["32:4:s3-10-ms"]["rows"] += 1
    with pytest.raises(ValueError, match="32:4:s3-10-ms: the runs' rows differ"):
        pool([one, two])


def test_the_pool_command_reports_and_draws_pooled_cells(tmp_path: Path) -> None:
    """``python -m benchmarks.bench_matrix --pool A B`` prints the pooled table and draws
    the figure where ``--figure`` says; one file alone is refused, a missing one named."""
    import json
    import subprocess
    import sys

    from benchmarks.common import ROOT

    runs = []
    for i, seconds in enumerate(([1.0, 2.0, 1.0], [2.0, 1.0, 1.0])):
        path = tmp_path / f"run{i}.json"
        path.write_text(json.dumps({"32:4:s3-10-ms": _run_cell(
            seconds, [s * 1.1 for s in seconds], 0.0, [0.2] * 3, True, "1.0 1.0 1.0")}))
        runs.append(str(path))
    figure = tmp_path / "pooled.png"
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_matrix", "full", "--pool",
                           *runs, "--figure", str(figure)], cwd=ROOT.parent,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "**2 independent whole runs of the matrix pooled**" in done.stdout
    assert "| 1.10x (1.10-1.10) |" in done.stdout
    assert figure.read_bytes()[:4] == b"\x89PNG"
    alone = subprocess.run([sys.executable, "-m", "benchmarks.bench_matrix", "--pool",
                            runs[0]], cwd=ROOT.parent, capture_output=True, text=True,
                           timeout=120)
    assert alone.returncode == 2 and "--pool needs two or more results files" in alone.stderr
    typo = subprocess.run([sys.executable, "-m", "benchmarks.bench_matrix", "--pool",
                           runs[0], str(tmp_path / "run9.json")], cwd=ROOT.parent,
                          capture_output=True, text=True, timeout=120)
    assert typo.returncode == 2 and "--pool: cannot read" in typo.stderr
    assert "run9.json" in typo.stderr and "Traceback" not in typo.stderr
    kept = sorted((ROOT / "runs").glob("matrix-session*.json"))
    assert kept and all(path.name in typo.stderr for path in kept)  # the kept runs named


@pytest.mark.parametrize(("argv", "named"), [(["fulll"], "'fulll'"),
                                             (["full", "--cells", "32:4:s3-10ms", "--report"],
                                              "32:4:s3-10ms")])
def test_a_misspelled_scale_or_cell_is_refused_by_name(argv: list[str], named: str) -> None:
    """Before, a misspelled scale raised a traceback and an unknown cell key measured
    nothing without a word."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_matrix", *argv],
                         capture_output=True, text=True, timeout=120,
                         cwd=Path(bench_matrix.__file__).resolve().parents[1])
    assert out.returncode == 2, out.stderr
    assert named in out.stderr and "Traceback" not in out.stderr


def test_a_run_of_some_cells_does_not_redraw_the_whole_matrix_figure(tmp_path: Path) -> None:
    """The figure of results holding every cell of the scale is the matrix's own; one of
    a few cells goes beside its results file; ``--figure`` wins either way."""
    every: dict[str, dict[str, Any]] = {key: {} for key in bench_matrix.keys("full")}
    some = dict(list(every.items())[:2])
    results = tmp_path / "matrix-results-some.json"
    assert bench_matrix.figure_path("full", every, None, results) == bench_matrix.FIGURE
    assert bench_matrix.figure_path("full", some, None, results) == \
        tmp_path / "matrix-results-some.png"
    assert bench_matrix.figure_path("full", some, tmp_path / "f.png", results) == \
        tmp_path / "f.png"


def test_the_kept_whole_runs_are_whole_and_report() -> None:
    """Each whole run kept in ``benchmarks/runs`` (committed, for later runs on the same
    read code to be pooled with: ``benchmarks/data`` is a cache, and sessions 21-24's
    results went with their checkouts) holds every cell of the full matrix, every
    contender's reads in every cell and its planning timed alone, and reports as one
    row per cell; two or more pool."""
    import json

    from benchmarks.bench_matrix import keys, pool
    from benchmarks.common import ROOT

    kept = sorted((ROOT / "runs").glob("matrix-session*.json"))
    assert kept, "no whole run of the matrix kept in benchmarks/runs"
    runs = [json.loads(path.read_text()) for path in kept]
    for path, run in zip(kept, runs, strict=True):
        assert set(run) == keys("full"), path.name
        for key, cell in run.items():
            reads = cell["seconds"]
            assert {"icefloe (defaults)", "icefloe (tuned)", "pyarrow dataset",
                    "pyiceberg"} <= set(reads), (path.name, key)
            assert len({len(reads[n]) for n in ("icefloe (defaults)", "pyarrow dataset",
                                               "pyiceberg")}) == 1, (path.name, key)
            assert cell["planning"]["seconds"], (path.name, key)
        table = [line for line in report("full", run, None).splitlines()
                 if line.startswith("| ") and "MB |" in line]
        assert len(table) == len(keys("full")), path.name
    if len(runs) > 1:
        assert set(pool(runs)) == keys("full")
