"""``icefloe checkpoint show``: where a checkpoint stands, for humans or as JSON.

Runs in the user's process. Reads icefloe's checkpoints (local stream, Ray stream) and
recognises a Spark Structured Streaming checkpoint directory (``--engine spark``), whose
offsets hold icefloe's position.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from icefloe.cli.common import iso_ms
from icefloe.errors import CheckpointError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("checkpoint", help="inspect checkpoints")
    csub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = csub.add_parser("show", help="print a checkpoint")
    show.add_argument("location", help="checkpoint directory or URI")
    show.add_argument("--json", action="store_true", help="every field, as JSON")
    show.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    spark = _spark_checkpoint(args.location)
    if spark is not None:
        if args.json:
            print(json.dumps(spark, indent=2, sort_keys=True))
        else:
            _print_spark(args.location, spark)
        return 0
    from icefloe.state import open_store

    ckpt = open_store(args.location).read()
    if ckpt is None:
        raise CheckpointError(f"no checkpoint at {args.location}; give the directory passed "
                              "to --checkpoint (icefloe stream) or checkpoint= (Python)")
    shown = ckpt.to_display_dict()
    if args.json:
        print(json.dumps(shown, indent=2, sort_keys=True))
        return 0
    pos = shown["position"]
    rows = [
        ("table", f"{shown['identifier']} (identity {shown['table_identity']})"),
        ("ref", shown["ref"]),
        ("committed", pos["description"]),
        ("last complete snapshot", shown["lastAckedSnapshotID"] or "-"),
        ("acked beyond", ", ".join(shown["acked_beyond"]) or "-"),
        ("partly acked splits", ", ".join(f"{k} ({v:,} records)"
                                          for k, v in shown["offsets"].items()) or "-"),
        ("written", f"{iso_ms(shown['created_ms'])} by {shown['writer']}"),
    ]
    if shown["nessie_hashes"]:
        rows.append(("nessie commits", ", ".join(f"{k}@{v}"
                                                 for k, v in shown["nessie_hashes"].items())))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def _spark_checkpoint(location: str) -> dict[str, Any] | None:
    """The latest batch of a Spark streaming checkpoint directory; None if it is not one."""
    root = Path(location)
    offsets = root / "offsets"
    if "://" in location or not offsets.is_dir():
        return None
    batches = sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    if not batches:
        return {"kind": "spark", "batch": None, "committed": False, "source_offsets": []}
    last = batches[-1]
    lines = (offsets / str(last)).read_text().splitlines()
    sources = []
    for line in lines[2:]:
        try:
            sources.append(json.loads(line))
        except ValueError:
            sources.append(line)
    committed = (root / "commits" / str(last)).exists()
    return {"kind": "spark", "batch": last, "committed": committed, "source_offsets": sources}


def _print_spark(location: str, info: dict[str, Any]) -> None:
    print(f"Spark Structured Streaming checkpoint at {location}")
    if info["batch"] is None:
        print("no batch planned yet")
        return
    state = "committed" if info["committed"] else "planned, not committed (re-run on restart)"
    print(f"last batch  {info['batch']} ({state})")
    for offset in info["source_offsets"]:
        text = json.dumps(offset, sort_keys=True) if not isinstance(offset, str) else offset
        print(f"icefloe offset  {text}")
