"""``icefloe demo``: build a local warehouse, then backfill (and stream) it.

Runs in the user's process. Everything lives under ``home`` (default: the embedded
warehouse the other commands read, ``$ICEFLOE_HOME`` else ``./icefloe-warehouse``): an
embedded SQLite catalog and a file warehouse. The table ``demo.events`` (re-created on
each run; nothing else in the warehouse is touched) is partitioned by day and gets
several snapshots: appends, a delete and a schema change (a new column), which the
backfill reads correctly.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyiceberg.types import LongType

from icefloe.catalog.loader import embedded_catalog, icefloe_home
from icefloe.demo_data import KINDS, SCHEMA, SPEC, TABLE, demo_rows
from icefloe.source import IcebergSource, default_parallelism

__all__ = ["KINDS", "SCHEMA", "SPEC", "TABLE", "build_table", "demo_rows", "read_back",
           "run_demo"]


def build_table(catalog: Catalog) -> Table:
    """Create ``demo.events`` with appends, a delete and a schema change."""
    catalog.create_namespace_if_not_exists("demo")
    if catalog.table_exists(TABLE):
        location = urlparse(catalog.load_table(TABLE).location())
        catalog.drop_table(TABLE)
        if location.scheme in ("", "file"):  # the dropped table's files
            shutil.rmtree(unquote(location.path), ignore_errors=True)
    table = catalog.create_table(TABLE, SCHEMA, partition_spec=SPEC,
                                 properties={"format-version": "2"})
    table.append(demo_rows(0, 2000))
    table.append(demo_rows(2000, 2000))
    table.delete(delete_filter="kind == 'view' AND id < 1000")
    with table.update_schema() as update:
        update.add_column("score", LongType())
    table.append(demo_rows(4000, 2000, with_score=True))
    return table


def _say(text: str) -> None:
    print(text, flush=True)


def run_demo(home: str | None = None, spark: bool | None = None, stream: bool = True) -> int:
    """Build the demo table under ``home`` (default :func:`icefloe_home`) and read it back;
    returns an exit status."""
    root = Path(home).absolute() if home is not None else icefloe_home()
    catalog = embedded_catalog(root)
    table = build_table(catalog)
    _say(f"== warehouse {root} (SQLite catalog), table {TABLE}")
    for snap in table.snapshots():
        op = snap.summary.operation.value if snap.summary else "?"
        _say(f"   snapshot {snap.snapshot_id}  {op:<9} parent={snap.parent_snapshot_id}")

    ok = read_back(catalog, table, root, {"catalog.home": str(root)}, spark, stream)
    where = "" if root == icefloe_home() else f" -o catalog.home={root}"
    _say(f"next: icefloe snapshots {TABLE}{where}\n      icefloe plan {TABLE}{where}\n"
         f"      icefloe read {TABLE}{where} --to events.parquet")
    return 0 if ok else 1


def read_back(catalog: Catalog, table: Table, root: Path, spark_options: dict[str, str],
              spark: bool | None, stream: bool, checkpoint: str | None = None) -> bool:
    """Plan, backfill (local engine, then Spark) and stream ``table``; True when every
    count matches PyIceberg's. ``spark_options`` reach the same catalog from Spark
    (``catalog.<prop>`` options); ``checkpoint`` is the stream's (default under ``root``)."""
    src = IcebergSource(TABLE, catalog=catalog)
    splits = list(src.plan())
    _say(f"== plan: {len(splits)} splits over {len({s.file_path for s in splits})} files")
    for split in splits[:5]:
        _say(f"   {split.split_id}  day={split.partition[0]}  rows={split.record_count}")
    if len(splits) > 5:
        _say(f"   ... and {len(splits) - 5} more")

    rows = 0
    batches = 0
    threads = default_parallelism(src.bounded_plan())  # what read() uses without one
    for batch in src.read():
        rows += batch.num_rows
        batches += 1
    oracle = table.scan().to_arrow()
    _say(f"== backfill (local engine, {threads} readers, the default): {rows} rows in "
         f"{batches} batches; PyIceberg's own scan has {oracle.num_rows} rows")
    got = src.to_arrow()
    nulls = pc.sum(pc.is_null(got.column("score"))).as_py()
    _say(f"   schema change read correctly: {nulls} rows from before the 'score' column "
         "have score=null")
    ok = rows == oracle.num_rows

    use_spark = spark if spark is not None else importlib.util.find_spec("pyspark") is not None
    if use_spark:
        ok = _spark_part(spark_options, oracle.num_rows) and ok
    if stream:
        from icefloe.demo_stream import run_stream_demo

        ok = run_stream_demo(catalog, table, root, _say, checkpoint) and ok
    _say("== demo " + ("OK" if ok else "FAILED: counts differ"))
    return ok


def _spark_part(options: dict[str, str], expected: int) -> bool:
    try:
        import icefloe.spark
    except ImportError:
        _say("== Spark: icefloe.spark is not available; skipped")
        return True
    spark = icefloe.spark.session(app_name="icefloe-demo")
    try:
        df = spark.read.format("icefloe").options(**options).load(TABLE)
        count = df.count()
        by_kind = {r["kind"]: r["count"] for r in df.groupBy("kind").count().collect()}
        _say(f"== backfill through local Spark: {count} rows; per kind {by_kind}")
        return count == expected
    finally:
        spark.stop()
