"""The interop tier: tables Java Iceberg 1.10.2 wrote through Spark 3.5, and Spark's reads.

``make test-interop`` builds ``.venv-interop`` and runs ``interop/writer.py`` (once per
writer version, cached under ``build/interop/<key>``), then these tests. Every test is one
case of the writer's ``cases.json``; its id is the case id ``<table>-<kind>-<label>``, and
a failure message names the table, the snapshot and the case.

Without the cached tables the tests skip (``ICEFLOE_INTEROP_REQUIRED=1``, set by
``make test-interop``, turns that into a failure).
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import math
import os
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

ROOT = Path(__file__).resolve().parents[2]


def _cache_module() -> Any:
    spec = importlib.util.spec_from_file_location("icefloe_interop_cache",
                                                  ROOT / "interop" / "cache.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOME: Path = _cache_module().home()
MANIFEST: dict[str, Any] | None = (
    json.loads((HOME / "cases.json").read_text()) if (HOME / "cases.json").is_file() else None)
CASES: list[dict[str, Any]] = MANIFEST["cases"] if MANIFEST else []


def _missing() -> None:
    message = f"no interop tables in {HOME}: run `make test-interop`"
    if os.environ.get("ICEFLOE_INTEROP_REQUIRED") == "1":
        pytest.fail(message)
    pytest.skip(message)


@cache
def interop_catalog() -> SqlCatalog:
    """PyIceberg's ``SqlCatalog`` named ``interop`` on the JDBC catalog Spark wrote."""
    return SqlCatalog("interop", uri=f"sqlite:///{HOME / 'catalog.db'}",
                      warehouse=f"file://{HOME / 'warehouse'}")


@pytest.fixture(scope="session")
def catalog() -> SqlCatalog:
    if MANIFEST is None:
        _missing()
    return interop_catalog()


def identifier(case: dict[str, Any]) -> str:
    return f"ns.{case['table']}"


def oracle(case: dict[str, Any]) -> pa.Table:
    """Spark's rows for ``case`` (its Parquet output), columns in Spark's order."""
    table = pq.read_table(HOME / case["oracle"])
    return table.select(case["columns"])


def where(case: dict[str, Any]) -> str:
    """``table ns.x, snapshot N, case id`` for failure messages."""
    snap = case.get("snapshot_id") or case["options"].get("snapshotId") or "head"
    return f"table ns.{case['table']}, snapshot {snap}, case {case['id']} ({case['options']})"


# -- comparing rows -------------------------------------------------------------------------

def _norm(value: Any) -> Any:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)  # keeps -0.0 and inf apart
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return "tz:" + value.astimezone(dt.UTC).replace(tzinfo=None).isoformat()
        return "ntz:" + value.isoformat()
    if isinstance(value, Decimal):
        return f"dec:{value}"
    if isinstance(value, bytes):
        return "bin:" + value.hex()
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    return value


def canonical(table: pa.Table) -> list[str]:
    """The rows of ``table`` as sorted canonical strings (a multiset; NaN equals NaN; -0.0,
    NULL and empty collections stay distinct; timestamps compared as instants)."""
    return sorted(repr(_norm(row)) for row in table.to_pylist())


def assert_rows(case: dict[str, Any], actual: pa.Table, expected: pa.Table,
                what: str = "icefloe") -> None:
    """Same column names in the same order, same multiset of rows; message names the case."""
    assert actual.schema.names == expected.schema.names, (
        f"{where(case)}: {what} columns {actual.schema.names} != {expected.schema.names}")
    got, want = canonical(actual), canonical(expected)
    if got != want:
        missing = [r for r in want if r not in got][:3]
        extra = [r for r in got if r not in want][:3]
        pytest.fail(f"{where(case)}: {what} read {len(got)} rows, Spark {len(want)}; "
                    f"missing {missing}; unexpected {extra}", pytrace=False)


def params(kinds: tuple[str, ...]) -> list[Any]:
    """The cases of ``kinds`` as pytest params (id = case id)."""
    if MANIFEST is None:
        return [pytest.param(None, id="no-interop-tables")]
    return [pytest.param(case, id=case["id"]) for case in CASES if case["kind"] in kinds]


