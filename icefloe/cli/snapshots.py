"""``icefloe snapshots``: a table's snapshots on a ref, oldest first. Runs in the user's
process; errors that name a snapshot point here."""

from __future__ import annotations

import argparse
import json
from typing import Any

from icefloe.cli.common import add_table_args, iso_ms, parse_kv


def add_parser(sub: Any) -> None:
    p = sub.add_parser("snapshots", help="list a table's snapshots (ids, times, operations)")
    add_table_args(p)
    p.add_argument("--ref", help="branch or tag whose lineage to list (default: every "
                   "snapshot of the table)")
    p.add_argument("--json", action="store_true", help="one JSON object per snapshot")
    p.set_defaults(func=run)


def _count(summary: Any, key: str) -> int:
    if summary is None:
        return 0
    value = summary.additional_properties.get(key) if hasattr(summary, "additional_properties") \
        else None
    if value is None:
        try:
            value = summary[key]
        except (KeyError, TypeError):
            value = None
    return int(value) if value is not None else 0


def run(args: argparse.Namespace) -> int:
    from icefloe.catalog.handle import open_table
    from icefloe.catalog.loader import open_catalog
    from icefloe.enumerator.lineage import ancestors
    from icefloe.options import SourceOptions

    options = SourceOptions.parse(parse_kv(args.option))
    catalog = open_catalog(args.catalog or options.catalog_name, options.catalog_props())
    ref = args.ref or None
    handle = open_table(catalog, args.table, ref=ref)
    metadata = handle.metadata
    if ref is not None:
        head = handle.head(ref)  # RefNotFoundError names the table's refs
        snapshots = list(reversed(list(ancestors(head, metadata))))
    else:
        snapshots = sorted(metadata.snapshots, key=lambda s: (s.sequence_number or 0,
                                                              s.timestamp_ms))
    refs: dict[int, list[str]] = {}
    for name, snapshot_ref in metadata.refs.items():
        refs.setdefault(snapshot_ref.snapshot_id, []).append(name)
    for snap in snapshots:
        summary = snap.summary
        row: dict[str, Any] = {
            "snapshot_id": str(snap.snapshot_id),
            "parent_id": None if snap.parent_snapshot_id is None else str(snap.parent_snapshot_id),
            "sequence_number": snap.sequence_number,
            "time": iso_ms(snap.timestamp_ms),
            "operation": summary.operation.value if summary is not None else None,
            "added_files": _count(summary, "added-data-files"),
            "removed_files": _count(summary, "deleted-data-files"),
            "added_records": _count(summary, "added-records"),
            "removed_records": _count(summary, "deleted-records"),
            "refs": sorted(refs.get(snap.snapshot_id, [])),
        }
        if args.json:
            print(json.dumps(row))
            continue
        heads = f"  <- {', '.join(row['refs'])}" if row["refs"] else ""
        print(f"{row['snapshot_id']:>20}  {row['time']}  {row['operation'] or '?':<9}  "
              f"parent={row['parent_id'] or '-':<20}  "
              f"+{row['added_files']}/-{row['removed_files']} files  "
              f"+{row['added_records']:,}/-{row['removed_records']:,} records{heads}")
    return 0
