"""Arrow's allocator and the kernel's transparent huge pages, measured per reader.

PyArrow's wheels allocate through mimalloc (v3), which on Linux backs its 1 GiB arena with
transparent huge pages (``MADV_HUGEPAGE``) and purges freed memory after a second, parts
of huge pages included; the kernel then splits, compacts and zeroes 2 MiB pages again as
the next read faults them back (RESULTS.md, "Session 24"). mimalloc's ``allow_thp``
option (the environment's ``MIMALLOC_ALLOW_THP``, read once when PyArrow loads) changes
that: 0 no huge pages, 2 huge pages never purged in part.

For each cell (a table of :mod:`benchmarks.bench_matrix`'s, on its link) and each setting
(mimalloc's default, ``MIMALLOC_ALLOW_THP=0``, ``MIMALLOC_ALLOW_THP=2``), each contender
(icefloe with defaults, PyArrow's dataset reader, PyIceberg's scan) reads in a process of
its own with that environment (:class:`~benchmarks.bench_matrix.Contender`), ``reads``
times, round-robin over the processes with the first rotated each round. Reported per
contender and setting: the first read (a fresh process faulting its memory in: a CLI
run's one read) and the median of the later ones (a long backfill's steady state), with
their least and most; and icefloe's paired ratio to each peer under each setting.

Run: ``uv run python -m benchmarks.bench_allocator [--reads 6] [--cells 256:16:s3-10-ms
...] [--results FILE]`` (under ``flock /tmp/icefloe-bench.lock``; nothing else running).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.bench_matrix import (
    DELAYS,
    MB,
    Contender,
    cached_files,
    links,
    memory_setting,
    paired,
)

SETTINGS: dict[str, dict[str, str]] = {
    "mimalloc's default": {},
    "MIMALLOC_ALLOW_THP=0": {"MIMALLOC_ALLOW_THP": "0"},
    "MIMALLOC_ALLOW_THP=2": {"MIMALLOC_ALLOW_THP": "2"},
}
"""The settings compared: variables added to each contender's environment."""

CONTENDERS = ("icefloe (defaults)", "pyarrow dataset", "pyiceberg")

CELLS = ("256:16:s3-10-ms", "32:1:s3-10-ms", "1000:16:s3-30-ms", "256:4:local-disk",
         "1:1:local-disk")
"""Default cells: ``size MB:row groups:link`` (the link's spaces as dashes)."""


def parse_cell(key: str) -> tuple[int, int, str]:
    """``(size MB, row groups, link)`` of ``"256:16:s3-10-ms"``."""
    size, groups, link = key.split(":", 2)
    return int(size), int(groups), link.replace("-", " ")


def firsts(cell: dict[str, Any], field: str, setting: str, contender: str) -> list[float]:
    """The first read of each run's process (``field``: ``seconds`` or ``cpu``)."""
    reads = cell[field][setting][contender]
    return [reads[0]] if "runs" not in cell else reads[:cell["runs"]]


def laters(cell: dict[str, Any], field: str, setting: str, contender: str) -> list[float]:
    """The later reads of each run's process, run after run (round order kept)."""
    reads = cell[field][setting][contender]
    return reads[1:] if "runs" not in cell else reads[cell["runs"]:]


def summary(first: list[float], later: list[float]) -> dict[str, Any]:
    """The first reads' median and the later ones' median, least and most (seconds)."""
    return {"first": round(median(first), 3), "later": round(median(later), 3),
            "least": round(min(later), 3), "most": round(max(later), 3)}


def run_cell(where: Any, key: str, reads: int) -> dict[str, Any]:
    """One cell: every contender under every setting, ``reads`` round-robin rounds."""
    size, groups, link = parse_cell(key)
    identifier = f"matrix.a_{size}mb_{groups}rg"
    where.add(identifier, cached_files(size * MB, groups))
    base = {"identifier": identifier, "catalog": where.catalog_properties(link),
            "s3": where.s3_options(link)}
    kinds: dict[str, dict[str, Any]] = {
        "icefloe (defaults)": {"kind": "icefloe", "options": {}},
        "pyarrow dataset": {"kind": "pyarrow"}, "pyiceberg": {"kind": "pyiceberg"}}
    procs = {(c, s): Contender({**base, **kinds[c]}, env=env)
             for s, env in SETTINGS.items() for c in CONTENDERS}
    seconds: dict[str, dict[str, list[float]]] = {s: {c: [] for c in CONTENDERS}
                                                  for s in SETTINGS}
    cpu: dict[str, dict[str, list[float]]] = {s: {c: [] for c in CONTENDERS}
                                              for s in SETTINGS}
    rows: set[int] = set()
    try:
        for p in procs.values():
            p.ready()
        order = list(procs)
        for r in range(reads):
            k = r % len(order)
            for c, s in order[k:] + order[:k]:
                t, n, used = procs[c, s].read()
                seconds[s][c].append(round(t, 3))
                cpu[s][c].append(round(used, 3))
                rows.add(n)
    finally:
        for p in procs.values():
            p.close()
    if len(rows) != 1:
        raise RuntimeError(f"{key}: the contenders read different row counts: {rows}")
    return {"cell": key, "rows": rows.pop(), "seconds": seconds, "cpu": cpu,
            "memory": memory_setting()}


def report(results: list[dict[str, Any]]) -> str:
    """Markdown: per cell, a row per contender and setting, and icefloe's ratios (paired
    over the later reads' rounds)."""
    out = ["| cell | reader | setting | first read | later reads: median (least-most) "
           "| CPU per later read |", "|---|---|---|---|---|---|"]
    for cell in results:
        for c in CONTENDERS:
            for s in SETTINGS:
                got = summary(firsts(cell, "seconds", s, c), laters(cell, "seconds", s, c))
                out.append(f"| {cell['cell']} | {c} | {s} | {got['first']:.2f} s | "
                           f"{got['later']:.2f} s ({got['least']:.2f}-{got['most']:.2f}) | "
                           f"{median(laters(cell, 'cpu', s, c)):.2f} s |")
    out += ["", "| cell | setting | PyArrow / icefloe | PyIceberg / icefloe | "
            "icefloe at mimalloc's default / icefloe |", "|---|---|---|---|---|"]
    default = next(iter(SETTINGS))
    for cell in results:
        for s in SETTINGS:
            ice = laters(cell, "seconds", s, "icefloe (defaults)")
            ratios = [paired(ice, laters(cell, "seconds", s, peer))
                      for peer in ("pyarrow dataset", "pyiceberg")]
            ratios.append(paired(ice, laters(cell, "seconds", default, "icefloe (defaults)")))
            out.append(f"| {cell['cell']} | {s} | " + " | ".join(f"{r:.2f}x" for r in ratios)
                       + " |")
    return "\n".join(out)


def pooled(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Several runs' results as one, cell by cell (``runs``: how many): each contender's
    and setting's reads are the runs' first reads, then the runs' later reads run after
    run (the rounds' order kept, so :func:`paired` pairs reads of the same round)."""
    out = []
    for cells in zip(*runs, strict=True):
        keys = {c["cell"] for c in cells}
        if len(keys) != 1:
            raise ValueError(f"the runs hold different cells in the same place: {keys}")
        merged: dict[str, Any] = {**cells[0], "runs": len(cells)}
        for field in ("seconds", "cpu"):
            merged[field] = {s: {c: [run[field][s][c][0] for run in cells]
                                 + [x for run in cells for x in run[field][s][c][1:]]
                                 for c in CONTENDERS} for s in SETTINGS}
        out.append(merged)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_allocator", description=__doc__.split("\n")[0])
    parser.add_argument("--reads", type=int, default=6, help="reads per process (>= 2)")
    parser.add_argument("--cells", nargs="+", default=list(CELLS))
    parser.add_argument("--results", type=Path, help="write the figures here (JSON)")
    parser.add_argument("--pool", type=Path, nargs="+", metavar="RESULTS",
                        help="report these runs' results (--results files) as one; "
                        "measure nothing")
    args = parser.parse_args(argv)
    if args.pool:
        try:
            runs = [json.loads(p.read_text()) for p in args.pool]
        except (OSError, ValueError) as exc:
            parser.error(f"--pool: {exc}")
        print(report(pooled(runs)))
        return 0
    if args.reads < 2:
        parser.error(f"--reads {args.reads}: needs at least 2 (the first read is apart)")
    links_ = ("local disk", *DELAYS)
    for key in args.cells:
        try:
            _, _, link = parse_cell(key)
        except ValueError:
            link = None
        if link not in links_:
            parser.error(f"--cells {key!r}: not SIZE_MB:ROW_GROUPS:LINK with LINK one of "
                         + ", ".join(x.replace(" ", "-") for x in links_))
    # "mimalloc's default" is the default only if this process's environment, which every
    # contender inherits, does not set the option itself
    os.environ.pop("MIMALLOC_ALLOW_THP", None)
    results = []
    with links() as where:
        for key in args.cells:
            start = time.time()
            results.append(run_cell(where, key, args.reads))
            print(f"{key}: {time.time() - start:.0f} s", file=sys.stderr, flush=True)
            if args.results:
                args.results.write_text(json.dumps(results, indent=1))
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
