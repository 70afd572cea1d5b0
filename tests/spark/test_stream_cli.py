"""``icefloe stream --engine spark``: a Structured Streaming query started from the CLI."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from icefloe.cli import main
from icefloe.errors import InvalidOptionError
from icefloe.spark.stream_job import stream
from tests.helpers.tables import make_catalog, make_table, rows

pytestmark = pytest.mark.spark


def _cli_options(catalog) -> list[str]:
    props = catalog.properties
    return ["--catalog", "test", "-o", "catalog.type=sql", "-o", f"catalog.uri={props['uri']}",
            "-o", f"catalog.warehouse={props['warehouse']}"]


def _sink_ids(out: Path) -> list[int]:
    """The ids in the files Spark's file sink committed (its _spark_metadata log)."""
    return sorted(pq.read_table(out).column("id").to_pylist())


def test_cli_spark_stream_available_now_then_resumes(spark, tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    tbl = make_table(catalog)
    tbl.append(rows(20))
    tbl.append(rows(20, start=20))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    argv = ["stream", "db.events", *_cli_options(catalog), "-o", "maxFilesPerTrigger=1",
            "--engine", "spark", "--sink", f"parquet:{out}", "--checkpoint", str(ckpt),
            "--available-now"]
    assert main(argv) == 0
    oracle = sorted(tbl.refresh().scan().to_arrow().column("id").to_pylist())
    assert _sink_ids(out) == oracle
    tbl.append(rows(10, start=100))
    assert main(argv) == 0  # a restart resumes from Spark's checkpoint: only the new rows
    assert _sink_ids(out) == sorted(tbl.refresh().scan().to_arrow().column("id").to_pylist())
    assert not spark.sparkContext._jsc.sc().isStopped()  # the running session is left alone


def test_spark_stream_refuses_a_bad_sink_or_no_checkpoint(spark, tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="'kafka:x' is not a sink"):
        stream("db.events", sink="kafka:x", checkpoint=str(tmp_path))
    with pytest.raises(InvalidOptionError, match="checkpoint"):
        stream("db.events", sink="console", checkpoint=None)
