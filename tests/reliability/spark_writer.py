"""A writer process for the Spark kill tests: appends until told to stop.

Run as ``python -m tests.reliability.spark_writer --root DIR --start N --stop-file F``.
Every ``--interval`` seconds it appends ``--rows`` rows with fresh ids (``start``,
``start + rows``, ...) as one data file and one ``append`` snapshot, until ``F`` exists
or ``--max-appends`` appends are committed. Commit conflicts and SQLite lock errors are
retried after reloading the table. Prints ``{"appended": [first_id, count]}`` per commit.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tests.helpers.tables import rows
from tests.reliability.child import catalog_for
from tests.reliability.writer import _retrying


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--catalog-uri")
    parser.add_argument("--table", default="db.events")
    parser.add_argument("--start", type=int, required=True)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--max-appends", type=int, default=1000)
    parser.add_argument("--stop-file", type=Path, required=True)
    args = parser.parse_args(argv)
    catalog = catalog_for(args.root, args.catalog_uri)

    next_id = args.start
    for _ in range(args.max_appends):
        if args.stop_file.exists():
            break
        data = rows(args.rows, start=next_id)
        _retrying(lambda: catalog.load_table(args.table),
                  lambda table, data=data: table.append(data), f"append at {next_id}")
        print(json.dumps({"appended": [next_id, args.rows]}), flush=True)
        next_id += args.rows
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
