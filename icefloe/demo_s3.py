"""``icefloe demo --s3``: the demo on real object storage behind a real Iceberg REST catalog.

Runs in the user's process. Starts a local SeaweedFS (:mod:`icefloe.seaweed`: an S3
gateway and an Apache Iceberg REST catalog in one ``weed mini`` process, on loopback
ports, its data under ``home``), creates ``demo.events`` through the REST catalog with its
data in S3, then plans, backfills, reads through Spark and streams it as ``icefloe demo``
does, with the stream's checkpoint in S3 too. The server is stopped at the end.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

from pyiceberg.catalog import load_catalog

from icefloe.seaweed import INSTALL_HINT, SeaweedFS, SeaweedUnavailable, weed_binary

CATALOG_NAME = "demo"


def _say(text: str) -> None:
    print(text, flush=True)


def run_s3_demo(home: str = "icefloe-demo", spark: bool | None = None,
                stream: bool = True) -> int:
    """Start SeaweedFS under ``home``, run the demo against it; returns an exit status.

    Exit status 2 with one line on stderr when the ``weed`` binary is missing or the
    server does not start.
    """
    from icefloe.demo import TABLE, build_table, read_back

    if weed_binary() is None:
        print(f"error: icefloe demo --s3 needs SeaweedFS: {INSTALL_HINT}", file=sys.stderr)
        return 2
    root = Path(home).absolute()
    if root.exists():
        shutil.rmtree(root)
    server = SeaweedFS(root / "seaweedfs")
    try:
        server.start()
    except SeaweedUnavailable as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"error: SeaweedFS did not start ({first}); see {root / 'seaweedfs' / 'weed.log'}",
              file=sys.stderr)
        return 2
    try:
        properties = server.rest_properties()
        _say(f"== SeaweedFS: S3 at {server.s3_endpoint}, Iceberg REST catalog at "
             f"{server.rest_uri} (data under {server.root})")
        _say("   catalog properties (PyIceberg names): type=rest, uri, credential, "
             "oauth2-server-uri, warehouse, s3.endpoint, s3.access-key-id, "
             "s3.secret-access-key, s3.region")
        catalog = load_catalog(CATALOG_NAME, **properties)
        table = build_table(catalog)
        _say(f"== table {TABLE}: metadata {table.metadata_location}")
        for snap in table.snapshots():
            op = snap.summary.operation.value if snap.summary else "?"
            _say(f"   snapshot {snap.snapshot_id}  {op:<9} parent={snap.parent_snapshot_id}")
        spark_options = {"catalog": CATALOG_NAME,
                         **{f"catalog.{k}": v for k, v in properties.items()}}
        checkpoint = f"s3://{server.bucket}/demo-checkpoints/{uuid.uuid4().hex[:8]}"
        ok = read_back(catalog, table, root, spark_options, spark, stream, checkpoint)
        return 0 if ok else 1
    finally:
        server.stop()
        _say("== SeaweedFS stopped")
