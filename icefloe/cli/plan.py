"""``icefloe plan``: list the splits of a bounded read. Runs in the user's process."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from icefloe.cli.common import add_table_args, partition_text, source, spec_fields_of


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plan", help="list the splits of a bounded read")
    add_table_args(p)
    p.add_argument("--json", action="store_true", help="one JSON object per split")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    plan = source(args).bounded_plan()
    count = rows = 0
    specs: dict[int, list[Any]] = {}
    for split in plan.splits():
        count += 1
        rows += split.record_count
        if split.spec_id not in specs:
            specs[split.spec_id] = spec_fields_of(plan, split.spec_id)
        part = partition_text(split, specs[split.spec_id])
        if args.json:
            print(json.dumps({
                "split_id": split.split_id, "file": split.file_path, "start": split.start,
                "length": split.length, "rows": split.record_count,
                "snapshot_id": str(split.snapshot_id), "sequence_number": split.sequence_number,
                "spec_id": split.spec_id, "partition": [str(v) for v in split.partition],
                "partition_display": part,
                "delete_files": [d.path for d in split.delete_files],
            }))
        else:
            print(f"{split.split_id}  {split.file_path}  [{split.start}, {split.end})  "
                  f"rows={split.record_count}  snapshot={split.snapshot_id}  {part}"
                  + (f"  deletes={len(split.delete_files)}" if split.delete_files else ""))
    if not args.json:
        snap = plan.snapshot.snapshot_id if plan.snapshot else None
        print(f"# {count} splits, {rows:,} rows (before deletes), snapshot {snap}",
              file=sys.stderr)
    return 0
