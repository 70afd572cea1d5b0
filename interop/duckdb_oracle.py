"""The second oracle: DuckDB's ``iceberg_scan`` over the same tables (in ``.venv-interop``).

For every ``head``, ``snapshot`` and ``timestamp`` case of the writer, read the table with
DuckDB 1.5.5's iceberg extension (loaded from its PyPI package, with the avro extension it
needs) at the case's snapshot and store the rows as ``duckdb/<case>.parquet``, or the error
DuckDB raised: ``case["duckdb"]`` is the relative path, ``case["duckdb_error"]`` the error.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

KINDS = ("head", "snapshot", "timestamp")


def _extension(module: Any, name: str) -> str:
    return os.path.join(os.path.dirname(module.__file__), "extensions", "v1.5.5",
                        f"{name}.duckdb_extension")


def connect() -> Any:
    """A DuckDB connection (UTC) with the avro and iceberg extensions loaded from their files."""
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_iceberg

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"LOAD '{_extension(duckdb_extension_avro, 'avro')}'")
    con.execute(f"LOAD '{_extension(duckdb_extension_iceberg, 'iceberg')}'")
    return con


def metadata_locations(home: Path) -> dict[str, str]:
    """Table name -> current metadata file, from the JDBC catalog's ``iceberg_tables``."""
    with sqlite3.connect(home / "catalog.db") as db:
        rows = db.execute("SELECT table_name, metadata_location FROM iceberg_tables").fetchall()
    return {name: loc.removeprefix("file:") for name, loc in rows}


def add_duckdb_oracle(home: Path, cases: list[dict[str, Any]]) -> None:
    """Read every head / snapshot / timestamp case with DuckDB; annotate the cases."""
    import pyarrow.parquet as pq

    con = connect()
    locations = metadata_locations(home)
    out_dir = home / "duckdb"
    out_dir.mkdir(exist_ok=True)
    for case in cases:
        if case["kind"] not in KINDS or "error" in case:
            continue
        location = locations[case["table"]].replace("'", "''")
        sid = case.get("snapshot_id")
        args = f", snapshot_from_id = {int(sid)}" if sid is not None else ""
        try:
            query = f"SELECT * FROM iceberg_scan('{location}'{args})"
            table = con.execute(query).fetch_arrow_table()
            path = out_dir / f"{case['id']}.parquet"
            pq.write_table(table, path)
            case["duckdb"] = str(path.relative_to(home))
        except Exception as exc:  # where DuckDB cannot read is recorded, not hidden
            case["duckdb_error"] = str(exc).strip().splitlines()[0][:400]
