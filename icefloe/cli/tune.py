"""``icefloe tune``: measure the read knobs on a table and recommend options.

Runs in the user's process (the driver for Spark and Ray). The budget, the sweep values
and the report directory are checked before the catalog is opened; the measurement is
:func:`icefloe.tuning.tune`. Progress lines go to stderr when it is a terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from icefloe.cli.common import add_table_args, positive_int, table_options
from icefloe.errors import EngineError, InvalidOptionError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("tune", help="measure the read knobs on this table; recommend options")
    add_table_args(p)
    p.add_argument("--engine", choices=["local", "spark", "ray"], default="local")
    p.add_argument("--budget",
                   help="wall time to spend, e.g. 90s, 2min (default 3min)")
    p.add_argument("--parallelism", type=positive_int, default=None,
                   help="the baseline's reader threads (local; default as icefloe read's: 2, "
                   "4 for a table on an object store)")
    p.add_argument("--sweep", action="append", metavar="KNOB=V1,V2",
                   help="values to sweep instead of the grid chosen from the table's shape "
                   "(repeatable), e.g. batchSize=16384,262144; knobs: parallelism, "
                   "splitSize, ioConcurrency, batchSize")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--report", metavar="DIR",
                   help="write figures (PNG), their data and index.html into DIR "
                   "(needs icefloe[tune])")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument("--address", help="Ray address (default: start a local Ray)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def _sweep(items: list[str] | None) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for item in items or ():
        knob, sep, values = item.partition("=")
        if not sep or not knob.strip():
            raise InvalidOptionError(item, "give --sweep as KNOB=V1,V2, e.g. "
                                     "--sweep batchSize=16384,262144")
        out[knob.strip()] = values
    return out or None


def run(args: argparse.Namespace) -> int:
    from icefloe.tuning import parse_budget, tune
    from icefloe.tuning.budget import DEFAULT_BUDGET
    from icefloe.tuning.grid import parse_sweep
    from icefloe.tuning.report import check_dir, require_matplotlib, write_report

    budget = parse_budget(DEFAULT_BUDGET if args.budget is None else args.budget)
    sweep = _sweep(args.sweep)
    if sweep:
        parse_sweep(sweep)
    if args.report:
        try:
            require_matplotlib()
        except ImportError as exc:
            raise InvalidOptionError("--report", str(exc)) from None
        check_dir(args.report)
    chatty = not args.quiet and sys.stderr.isatty()
    try:
        result = tune(args.table, catalog=args.catalog, options=table_options(args),
                      engine=args.engine, budget=budget, parallelism=args.parallelism,
                      sweep=sweep, master=args.master, address=args.address,
                      progress=(lambda line: print(f"# {line}", file=sys.stderr, flush=True))
                      if chatty else None)
    except ImportError as exc:  # the engine's extra is missing (the message names it)
        if args.engine == "local":
            raise
        raise EngineError(str(exc)) from exc
    print(json.dumps(result.to_json(), indent=2) if args.json else result.render())
    if args.report:
        paths = write_report(result, args.report)
        print(f"report: {paths[-1].parent / 'index.html'}", file=sys.stderr)
    return 0
