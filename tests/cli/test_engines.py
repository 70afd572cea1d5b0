"""Findings 4 and 10 of issue 17 on Spark: an error raised inside Spark reaches the user as
icefloe's one line and status; the command is quiet (no Spark start-up chatter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefloe.cli.failures import EXIT_USAGE
from tests.cli.support import ROOT, assert_one_line, run_process, warehouse

pytestmark = pytest.mark.spark


def test_spark_read_error_is_one_line_and_quiet(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    home = tmp_path / "wh"
    warehouse(home, monkeypatch)
    out = tmp_path / "out"
    # a column not in the table fails before Spark starts: no Java here (JAVA_HOME points
    # nowhere), so a JVM started first would fail otherwise; and with Ray, an address where
    # no Ray runs
    for engine, env in ((["spark"], {"JAVA_HOME": str(tmp_path / "no-java")}),
                        (["ray", "--address", "127.0.0.1:9"], {})):
        bad = run_process(["read", "db.events", "--engine", *engine, "--to", str(out),
                           "-o", "columns=id,nope"], ROOT,
                          {"ICEFLOE_HOME": str(home), **env}, timeout=600)
        assert bad.code == EXIT_USAGE, bad.err
        bad.err = _without_jvm_notice(bad.err)
        assert_one_line(bad, "InvalidOptionError", "'columns'", "nope")
        assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["wh"]
    good = run_process(["read", "db.events", "--engine", "spark", "--to", str(out)], ROOT,
                       {"ICEFLOE_HOME": str(home)}, timeout=600)
    assert good.code == 0, good.err
    assert _without_jvm_notice(good.err).strip() == "", good.err  # no Spark chatter
    assert "wrote 60 rows" in good.out


def _without_jvm_notice(err: str) -> str:
    """stderr without the one line the JVM itself prints for the incubator module Spark 4
    adds (``WARNING: Using incubator modules: jdk.incubator.vector``), which no log setting
    silences (a known gap: see the report of issue 17)."""
    return "\n".join(line for line in err.splitlines()
                     if not line.startswith("WARNING: Using incubator modules"))
