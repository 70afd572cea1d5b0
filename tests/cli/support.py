"""Helpers of the CLI tests: an embedded warehouse under a temp ``$ICEFLOE_HOME`` and a
runner that captures the command's exit status, stdout and stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from icefloe.catalog.loader import embedded_catalog
from icefloe.cli import main
from tests.helpers.tables import EVENTS_SPEC_BY_DAY, make_table, rows

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    code: int
    out: str
    err: str


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    """``icefloe argv`` in this process."""
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def run_process(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None,
                timeout: float = 120) -> Result:
    """``icefloe argv`` in a child process (the real entry point, real signals)."""
    full = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "icefloe.cli", *argv], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def warehouse(home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SqlCatalog, Table]:
    """The embedded catalog under ``home`` (made ``$ICEFLOE_HOME``) with ``db.events``,
    partitioned by day, two appends of 30 rows."""
    monkeypatch.setenv("ICEFLOE_HOME", str(home))
    catalog = embedded_catalog(home)
    table = make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY)
    table.append(rows(30))
    table.append(rows(30, start=30))
    return catalog, table


def assert_one_line(result: Result, *needles: str) -> None:
    """The failure is one ``error:`` line on stderr naming each needle, no traceback."""
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error: "), result.err
    assert "Traceback" not in result.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
