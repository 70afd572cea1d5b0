"""Iceberg v3 tables for tests, from tables PyIceberg wrote as v2.

PyIceberg 0.12 reads v3 metadata but refuses to write it ("Writing V3 is not yet
supported"), so :func:`as_v3` takes a v2 table built with PyIceberg (data files, manifests,
manifest lists, snapshots all PyIceberg's), writes its metadata again as format version 3
with a given v3 schema (``timestamp_ns`` columns, ``initial-default`` values, v3-only
types), and registers it in the catalog under a new name. What the v3 spec adds to
manifests (row lineage's ``first_row_id``) is absent, as in a table upgraded from v2.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table


def as_v3(catalog: Catalog, table: Table, identifier: str, schema: Schema | None = None,
          raw_types: dict[str, str] | None = None) -> Table:
    """``table`` (v2) registered again as ``identifier`` in format version 3.

    Args:
        schema: the v3 current schema (same schema id as the table's), or the table's own.
        raw_types: top-level column name -> an Iceberg type name written into the schema
            JSON as is, after registration (for types PyIceberg cannot parse, such as
            ``variant``: loading the table then fails; the returned object predates it).
    """
    metadata: dict[str, Any] = json.loads(table.metadata.model_dump_json())
    metadata["format-version"] = 3
    metadata["next-row-id"] = 0
    current = json.loads((schema or table.schema()).model_dump_json())
    metadata["schemas"] = [current if s["schema-id"] == current["schema-id"] else s
                           for s in metadata["schemas"]]
    metadata["last-column-id"] = max(metadata["last-column-id"],
                                     *(f["id"] for f in current["fields"]))
    path = f"{table.location()}/metadata/{uuid.uuid4()}.v3.metadata.json"
    _write(table, path, metadata)
    registered = catalog.register_table(identifier, path)
    if raw_types:  # PyIceberg could not register it: edit the registered file in place
        for field in current["fields"]:
            field["type"] = raw_types.get(field["name"], field["type"])
        _write(table, path, metadata)
    return registered


def _write(table: Table, path: str, metadata: dict[str, Any]) -> None:
    with table.io.new_output(path).create(overwrite=True) as stream:
        stream.write(json.dumps(metadata).encode())
