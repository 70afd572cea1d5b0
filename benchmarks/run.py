"""Run the benchmark suite and write ``benchmarks/RESULTS.md``.

    uv run python -m benchmarks.run --scale quick|full [--only NAME] [--repeat N]

Runs every ``benchmarks/bench_*.py`` module that exposes ``run(scale) -> str``
(including the Spark / Ray modules when they exist and import), and replaces that
benchmark's ``## <title>`` section of RESULTS.md, leaving the other sections alone.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
import sys
import time
import traceback

from benchmarks.common import ROOT, machine, md_table

RESULTS = ROOT / "RESULTS.md"
ORDER = ["backfill", "planning", "discovery", "continuous", "checkpoint", "sweep",
         "spark_backfill", "spark_java", "stream_java", "ray_backfill", "objectstore",
         "changelog", "startup", "history", "matrix", "event_time"]
TITLES = {
    "backfill": "Backfill throughput", "planning": "Planning at scale",
    "discovery": "Incremental discovery", "continuous": "Continuous latency",
    "checkpoint": "Checkpoint cost", "sweep": "Tuning sweep",
    "spark_backfill": "Spark", "spark_java": "Spark vs Iceberg's Java reader",
    "stream_java": "Streaming catch-up vs Iceberg's Java stream", "ray_backfill": "Ray",
    "objectstore": "Object storage",
    "changelog": "Changelog", "startup": "Start-up",
    "history": "Long runs: cost against history", "matrix": "Defaults matrix",
    "event_time": "Event time",
}
PLACEHOLDER = "_Placeholder: results merged by the lead._"


def _names() -> list[str]:
    found = [m.name.removeprefix("bench_") for m in pkgutil.iter_modules([str(ROOT)])
             if m.name.startswith("bench_")]
    return sorted(found, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def _notes(section: str) -> str:
    """The hand-written ``### `` subsections of a section (profiles, before/after
    records), kept when the section's figures are regenerated."""
    match = re.search(r"^### ", section, flags=re.M)
    return "" if match is None else "\n\n" + section[match.start():].rstrip()


def _write(sections: dict[str, str], header: str) -> None:
    titles = [TITLES[n] for n in ORDER] + [t for t in sections if t not in TITLES.values()]
    body = [header]
    for title in titles:
        if title == "Machine" or (title not in sections and title not in ("Spark", "Ray")):
            continue
        body.append(f"## {title}\n\n{sections.get(title, PLACEHOLDER)}\n")
    RESULTS.write_text("\n".join(body))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run")
    ap.add_argument("--scale", choices=("quick", "full"), default="quick")
    ap.add_argument("--only", help="one benchmark (e.g. backfill, planning, sweep)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="separate processes per section, for sections whose run() takes "
                         "`repeat` (backfill; its default is 3)")
    a = ap.parse_args(argv)
    names = _names()
    if a.only:
        if a.only.removeprefix("bench_") not in names:
            ap.error(f"unknown benchmark {a.only!r}; have {', '.join(names)}")
        names = [a.only.removeprefix("bench_")]
    old = _sections(RESULTS.read_text()) if RESULTS.exists() else {}
    sections = dict(old)
    timings = []
    failed = 0
    for name in names:
        title = TITLES.get(name, name)
        try:
            module = importlib.import_module(f"benchmarks.bench_{name}")
        except Exception as exc:  # an optional engine (Spark / Ray) is not installed
            print(f"[run] skip {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if not callable(getattr(module, "run", None)):
            print(f"[run] skip {name}: no run(scale)", file=sys.stderr)
            continue
        print(f"[run] {name} ({a.scale}) ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            takes_repeat = "repeat" in inspect.signature(module.run).parameters
            out = (module.run(a.scale, repeat=a.repeat) if a.repeat and takes_repeat
                   else module.run(a.scale))
        except Exception:
            failed += 1
            out = f"**FAILED**\n\n```\n{traceback.format_exc()[-3000:]}\n```"
        took = time.perf_counter() - start
        timings.append([name, f"{took:.0f} s"])
        print(f"[run] {name} took {took:.0f} s", file=sys.stderr, flush=True)
        sections[title] = (f"`uv run python -m benchmarks.run --scale {a.scale} --only {name}`"
                           f" — {a.scale} scale, took {took:.0f} s\n\n{out}"
                           + _notes(old.get(title, "")))
    m = machine()
    prev_machine = old.get("Machine", "")
    summary = old.get("Summary", "")
    header = (
        "# icefloe benchmark results\n\n"
        "Generated by `uv run python -m benchmarks.run --scale quick` (all) or "
        "`--only NAME` (one section). The machine is shared and noisy: every figure "
        "comes from icefloe and its peers measured in the same run, interleaved, as "
        "medians; compare the ratios, not the absolute numbers across sections.\n\n"
        + (f"## Summary\n\n{summary}\n\n" if summary else "")
        + "## Machine\n\n" + md_table(["", ""], list(m.items()))
        + (f"\n\nLast run ({a.scale}): " + ", ".join(f"{n} {t}" for n, t in timings)
           if timings else "")
        + "\n"
    )
    sections.pop("Summary", None)
    del prev_machine
    _write(sections, header)
    print(f"[run] wrote {RESULTS}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
