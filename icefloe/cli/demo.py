"""``icefloe demo``: build the demo table in the embedded warehouse and read it back.

Runs in the user's process. The demo builds ``demo.events`` in the same embedded
warehouse the other commands read by default (``$ICEFLOE_HOME``, else
``./icefloe-warehouse``), so ``icefloe plan demo.events`` works right after it. Engine
flags (``--spark``, and object-storage variants) are added in :func:`add_parser` and read
in :func:`run` only.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="build a demo table and backfill / stream it")
    p.add_argument("--home", default=None,
                   help="warehouse directory (default: $ICEFLOE_HOME, else ./icefloe-warehouse)")
    p.add_argument("--spark", action=argparse.BooleanOptionalAction, default=None,
                   help="also backfill through local Spark (default: when PySpark is installed)")
    p.add_argument("--no-stream", action="store_true", help="skip the continuous part")
    p.add_argument("--s3", action="store_true",
                   help="start a local SeaweedFS: data in S3 behind its Iceberg REST catalog")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.s3:
        from icefloe.demo_s3 import run_s3_demo

        return run_s3_demo(home=args.home or "icefloe-demo", spark=args.spark,
                           stream=not args.no_stream)
    from icefloe.demo import run_demo

    return run_demo(home=args.home, spark=args.spark, stream=not args.no_stream)
