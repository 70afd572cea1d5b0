"""A writer process: commits appends (and optionally compactions / whole-file deletes).

Run as ``python -m tests.reliability.writer --root DIR --start N --batches K``. Each
append adds ``--rows`` rows with fresh ids (``start + i``); with ``--mix`` every third
commit is a compaction (``replace``) or a whole-file delete of already-appended
files. Optimistic-concurrency conflicts (another writer committed first) are retried
after reloading the table. Prints one JSON line per committed append:
``{"appended": [first_id, count]}`` so the parent knows every appended id.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pyiceberg.table import Table

from tests.helpers.tables import commit_delete_files, commit_replace, live_data_files, rows
from tests.reliability.child import catalog_for


def _retrying(load: Callable[[], Table], op: Callable[[Table], object], what: str) -> None:
    for attempt in range(200):
        try:
            op(load())
            return
        except Exception as exc:  # CommitFailedException, sqlite "database is locked", ...
            if attempt == 199:
                raise RuntimeError(f"{what} kept failing") from exc
            time.sleep(random.uniform(0.005, 0.05))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--catalog-uri")
    parser.add_argument("--table", default="db.events")
    parser.add_argument("--start", type=int, required=True)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--mix", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    random.seed(args.seed)
    catalog = catalog_for(args.root, args.catalog_uri)

    def load() -> Table:
        return catalog.load_table(args.table)

    next_id = args.start
    for i in range(args.batches):
        data = rows(args.rows, start=next_id)
        _retrying(load, lambda t, d=data: t.append(d), "append")
        print(json.dumps({"appended": [next_id, args.rows]}), flush=True)
        next_id += args.rows
        if args.mix and i % 3 == 2:
            if random.random() < 0.5:
                _retrying(load, lambda t: commit_replace(t), "compaction")
                print(json.dumps({"compacted": True}), flush=True)
            else:
                def delete_some(t: Table) -> None:
                    files = sorted(live_data_files(t))
                    if len(files) > 2:
                        commit_delete_files(t, files[:1])
                _retrying(load, delete_some, "delete")
                print(json.dumps({"deleted": True}), flush=True)
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
