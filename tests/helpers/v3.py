"""Iceberg v3 tables for tests, from tables PyIceberg wrote as v2.

PyIceberg 0.12 reads v3 metadata but refuses to write it ("Writing V3 is not yet
supported"), so :func:`as_v3` takes a v2 table built with PyIceberg (data files, manifests,
manifest lists, snapshots all PyIceberg's), writes its metadata again as format version 3
with a given v3 schema (``timestamp_ns`` columns, ``initial-default`` values, v3-only
types), and registers it in the catalog under a new name. Row lineage: by default absent,
as in a table upgraded from v2; with ``row_lineage=True`` the manifest lists are written
again in the v3 layout with each data manifest's ``first_row_id`` assigned as a v3 writer
assigns it (the manifests themselves keep null ``first_row_id``s: inherited on read).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from pyiceberg.avro.file import AvroFile, AvroOutputFile
from pyiceberg.catalog import Catalog
from pyiceberg.manifest import MANIFEST_LIST_FILE_SCHEMAS
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.typedef import Record


def as_v3(catalog: Catalog, table: Table, identifier: str, schema: Schema | None = None,
          raw_types: dict[str, str] | None = None, row_lineage: bool = False) -> Table:
    """``table`` (v2) registered again as ``identifier`` in format version 3.

    Args:
        schema: the v3 current schema (same schema id as the table's), or the table's own.
        raw_types: top-level column name -> an Iceberg type name written into the schema
            JSON as is, after registration (for types PyIceberg cannot parse, such as
            ``variant``: loading the table then fails; the returned object predates it).
        row_lineage: assign row ids as a v3 writer does (:func:`assign_row_ids`): else the
            snapshots are as in a table upgraded from v2 (no ``first-row-id``).
    """
    metadata: dict[str, Any] = json.loads(table.metadata.model_dump_json())
    metadata["format-version"] = 3
    metadata["next-row-id"] = 0
    if row_lineage:
        assign_row_ids(table, metadata)
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


def assign_row_ids(table: Table, metadata: dict[str, Any]) -> None:
    """Rewrite each snapshot's manifest list in the v3 layout with the manifests'
    ``first_row_id`` assigned as the spec's "First Row ID Assignment" says (oldest snapshot
    first: a manifest the snapshot added gets the next ids, ``added_rows_count +
    existing_rows_count`` of them; a carried-over manifest keeps its own), and set the
    snapshots' ``first-row-id`` / ``added-rows`` and the table's ``next-row-id``."""
    schema = MANIFEST_LIST_FILE_SCHEMAS[3]
    index = {f.field_id: i for i, f in enumerate(schema.fields)}
    assigned: dict[str, int] = {}
    next_row_id = 0
    for snapshot in sorted(metadata["snapshots"], key=lambda s: s["sequence-number"]):
        with AvroFile[Record](table.io.new_input(snapshot["manifest-list"]), schema,
                              read_types={}, read_enums={}) as reader:
            manifests = list(reader)
        first = next_row_id
        for manifest in manifests:
            if manifest[index[517]]:  # delete manifests have no row ids
                continue
            path = manifest[index[500]]
            if path not in assigned:
                assigned[path] = next_row_id
                next_row_id += manifest[index[512]] + manifest[index[513]]
            manifest[index[520]] = assigned[path]
        path = snapshot["manifest-list"].replace(".avro", "-v3.avro")
        meta = {"snapshot-id": str(snapshot["snapshot-id"]),
                "parent-snapshot-id": str(snapshot.get("parent-snapshot-id", "null")),
                "sequence-number": str(snapshot["sequence-number"]), "format-version": "3",
                "first-row-id": str(first)}
        with AvroOutputFile[Record](table.io.new_output(path), schema, "manifest_file",
                                    record_schema=schema, metadata=meta) as writer:
            writer.write_block(manifests)
        snapshot["manifest-list"] = path
        snapshot["first-row-id"] = first
        snapshot["added-rows"] = next_row_id - first
    metadata["next-row-id"] = next_row_id


def _write(table: Table, path: str, metadata: dict[str, Any]) -> None:
    with table.io.new_output(path).create(overwrite=True) as stream:
        stream.write(json.dumps(metadata).encode())
