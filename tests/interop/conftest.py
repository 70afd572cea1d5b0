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


# -- which cases are expected to fail, and why ------------------------------------------------

FIXES = "fixed on branch fixes: "
FORMATS = "fixed on branch formats: "
NESTED_NULL_TABLES = {"nested_nulls", "orc", "avro", "mixed"}
"""Tables with NULL ``array<struct>`` / ``map<string, struct>`` values (see the writer)."""


@cache
def _formats(table: str, snapshot_id: int | None, since: int | None = None) -> frozenset[str]:
    """File formats of the data files of ``snapshot_id`` (head when None), minus those of
    ``since`` (for ranges)."""
    tbl = interop_catalog().load_table(f"ns.{table}")
    def files(sid: int | None) -> dict[str, str]:
        if sid is None and tbl.current_snapshot() is None:
            return {}
        return {t.file.file_path: str(t.file.file_format.value)
                for t in tbl.scan(snapshot_id=sid).plan_files()}
    now = files(snapshot_id)
    if since is not None:
        for path in files(since):
            now.pop(path, None)
    return frozenset(v.upper() for v in now.values())


def known_bug(case: dict[str, Any]) -> str | None:
    """Why ``case`` fails today, when the cause is one of the bugs of issue 15 being fixed
    on another branch (the lead removes these marks after merging); else None."""
    opts = case["options"]
    table = case["table"]
    if "error" not in case:
        if case["kind"] == "ref":
            ref = interop_catalog().load_table(f"ns.{table}").metadata.refs[opts["ref"]]
            formats = _formats(table, ref.snapshot_id)
        elif case["kind"] == "range":
            formats = _formats(table, int(opts["endSnapshotId"]), int(opts["startSnapshotId"]))
        else:
            sid = case.get("snapshot_id") or opts.get("snapshotId")
            formats = _formats(table, int(sid) if sid else None)
        if formats - {"PARQUET"}:
            return FORMATS + f"{sorted(formats - {'PARQUET'})} data files refused"
    if case["kind"] == "columns":
        return FIXES + "columns returned in table order, not in the order asked"
    if "_row_id" in opts.get("metadataColumns", ""):
        return FIXES + "v3 row lineage (_row_id, _last_updated_sequence_number) not readable"
    if table in NESTED_NULL_TABLES and case["kind"] != "columns":
        return FIXES + "NULL array<struct>/map<string,struct> read as empty"
    return None


def alias_bug(case: dict[str, Any]) -> str | None:
    """The alias ``streaming-skip-overwrite-snapshots`` means skipChangeCommits today, which
    also skips deletes: where Iceberg's own source fails on a delete, icefloe goes on."""
    opts = case["options"]
    if (case["kind"] == "stream" and "error" in case
            and "streaming-skip-overwrite-snapshots" in opts
            and "streaming-skip-delete-snapshots" not in opts):
        return FIXES + "streaming-skip-overwrite-snapshots also skips delete snapshots"
    return None


def params(kinds: tuple[str, ...]) -> list[Any]:
    """The cases of ``kinds`` as pytest params (id = case id)."""
    if MANIFEST is None:
        return [pytest.param(None, id="no-interop-tables")]
    return [pytest.param(case, id=case["id"]) for case in CASES if case["kind"] in kinds]


@pytest.fixture(autouse=True)
def _known_bugs(request: pytest.FixtureRequest) -> None:
    """Mark a case xfail(strict) when it fails today because of one of the bugs of issue 15
    being fixed on another branch (decided at run time, so ``make test``'s collection does
    not open the interop catalog). Modules that read with icefloe only
    (``ICEFLOE_READS = False`` elsewhere) are left alone."""
    callspec = getattr(request.node, "callspec", None)
    case = callspec.params.get("case") if callspec else None
    if case is None or not getattr(request.module, "ICEFLOE_READS", True):
        return
    reason = alias_bug(case) or known_bug(case)
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
