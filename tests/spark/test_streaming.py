"""spark.readStream.format("icefloe") on a real local Spark, with a real Parquet file sink."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from icefloe.spark.streaming import IcefloeStreamReader
from tests.helpers.tables import (
    commit_delete_files,
    live_data_files,
    make_catalog,
    make_table,
    rows,
)

pytestmark = pytest.mark.spark


def catalog_opts(catalog) -> dict[str, str]:
    props = catalog.properties
    return {"catalog": "test", "catalog.type": "sql", "catalog.uri": props["uri"],
            "catalog.warehouse": props["warehouse"]}


def run_available_now(spark, catalog, out: Path, ckpt: Path, **extra: str) -> int:
    reader = spark.readStream.format("icefloe")
    for key, value in {**catalog_opts(catalog), **extra}.items():
        reader = reader.option(key, value)
    query = (reader.load("db.events").writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    exc = query.exception()
    if exc is not None:
        raise exc
    return len([p for p in query.recentProgress if p["numInputRows"] > 0])


def sink_ids(out: Path) -> list[int]:
    return sorted(i for f in out.glob("*.parquet")
                  for i in pq.read_table(f).column("id").to_pylist())


def oracle(tbl) -> list[int]:
    return sorted(tbl.refresh().scan().to_arrow().column("id").to_pylist())


def test_exactly_once_across_restarts_with_commit_log_entries_deleted(spark, tmp_path) -> None:
    catalog = make_catalog(tmp_path)
    tbl = make_table(catalog)
    tbl.append(rows(10))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    run_available_now(spark, catalog, out, ckpt, maxFilesPerTrigger="1")
    assert sink_ids(out) == oracle(tbl)
    for round_ in range(3):
        tbl.append(rows(5, start=100 + 10 * round_))
        tbl.append(rows(5, start=105 + 10 * round_))
        if round_ % 2 == 0:  # as Spark's own exactly-once test: forget the last commit
            commits = sorted((p for p in (ckpt / "commits").iterdir() if p.name.isdigit()),
                             key=lambda p: int(p.name))
            commits[-1].unlink()
            (ckpt / "commits" / f".{commits[-1].name}.crc").unlink(missing_ok=True)
        run_available_now(spark, catalog, out, ckpt, maxFilesPerTrigger="1")
        assert sink_ids(out) == oracle(tbl), f"round {round_}: sink != table"


def test_rate_limit_sets_the_number_of_micro_batches(spark, tmp_path) -> None:
    catalog = make_catalog(tmp_path)
    tbl = make_table(catalog)
    for i in range(4):
        tbl.append(rows(3, start=10 * i))
    batches = run_available_now(spark, catalog, tmp_path / "o", tmp_path / "c",
                                maxFilesPerTrigger="2", startingVersion="earliest")
    files = sum(1 for _ in tbl.scan().plan_files())
    assert batches == -(-files // 2)
    assert sink_ids(tmp_path / "o") == oracle(tbl)


def test_policy_error_surfaces_with_its_message(spark, tmp_path) -> None:
    catalog = make_catalog(tmp_path)
    tbl = make_table(catalog)
    tbl.append(rows(3))
    tbl.append(rows(3, start=10))
    out, ckpt = tmp_path / "o", tmp_path / "c"
    run_available_now(spark, catalog, out, ckpt)
    commit_delete_files(tbl, [next(iter(live_data_files(tbl)))])
    with pytest.raises(Exception, match="ignoreDeletes=true"):
        run_available_now(spark, catalog, out, ckpt)
    shutil.rmtree(ckpt / "offsets", ignore_errors=True)


def _offsets_in_subprocess(catalog_options: dict[str, str]) -> str:
    script = (
        "import json, sys\n"
        "from pyspark.sql.types import StructType\n"
        "from icefloe.spark.streaming import IcefloeStreamReader\n"
        "from pyspark.sql.streaming.datasource import ReadMaxFiles\n"
        f"r = IcefloeStreamReader('db.events', {catalog_options!r}, StructType())\n"
        "s = r.initialOffset()\n"
        "e = r.latestOffset(s, ReadMaxFiles(1))\n"
        "print(json.dumps([s, e, [len(p.value) for p in r.partitions(s, e)]]))\n"
    )
    return subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                          text=True).stdout.strip().splitlines()[-1]


def test_offsets_are_byte_identical_across_driver_processes(tmp_path) -> None:
    catalog = make_catalog(tmp_path)
    tbl = make_table(catalog)
    for i in range(3):
        tbl.append(rows(3, start=10 * i))
    opts = catalog_opts(catalog)
    first, second = _offsets_in_subprocess(opts), _offsets_in_subprocess(opts)
    assert first == second
    start, end, parts = json.loads(first)
    assert start["phase"] == "scan" and end["ordinal"] == 1 and sum(parts) == 1
    reader = IcefloeStreamReader("db.events", opts, __import__(
        "pyspark.sql.types", fromlist=["StructType"]).StructType())
    assert reader.partitions(end, end) == []
