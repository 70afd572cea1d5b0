"""The compiled manifest decoder on the manifests Java Iceberg 1.10.2 wrote.

Every data manifest of every snapshot of every interop table (v1, v2, v3, every partition
transform and spec evolution, every column type's stats, ADDED / EXISTING / DELETED
entries of rewrites and deletes, null and explicit sequence numbers) is decoded with and
without ``added_only``, without stats and with the stats of every field id the table
ever had (plus one it never had), and compared field by field with PyIceberg's
``ManifestFile.fetch_manifest_entry``
(:func:`tests.enumerator.test_native_manifest.assert_decodes`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import ManifestContent, ManifestFile
from pyiceberg.schema import index_by_id

from icefloe.enumerator.manifest_decoder import open_avro

pytestmark = pytest.mark.interop

if os.environ.get("ICEFLOE_NATIVE_BUILD") == "1":  # CI: the build must have compiled it
    import icefloe.enumerator._native_manifest as native
else:
    native = pytest.importorskip("icefloe.enumerator._native_manifest",
                                 reason="the C manifest decoder was not built (no compiler)")


def _data_manifests(catalog: SqlCatalog) -> list[tuple[str, ManifestFile, int,
                                                       tuple[int, ...]]]:
    """(table, manifest, format version, every field id of its schemas), each data
    manifest once."""
    seen: set[str] = set()
    out = []
    for *_, table_name in catalog.list_tables("ns"):
        table = catalog.load_table(("ns", table_name))
        ids = sorted({fid for s in table.metadata.schemas for fid in index_by_id(s)})
        for snapshot in table.metadata.snapshots:
            for manifest in snapshot.manifests(table.io):
                if manifest.content != ManifestContent.DATA or manifest.manifest_path in seen:
                    continue
                seen.add(manifest.manifest_path)
                out.append((table_name, manifest, table.metadata.format_version,
                            (*ids, 999_999)))
    return out


def test_native_decoder_equals_pyiceberg_on_java_manifests(catalog: SqlCatalog) -> None:
    from tests.enumerator.test_native_manifest import assert_decodes, expected_rows

    manifests = _data_manifests(catalog)
    versions: Counter[int] = Counter()
    seen: Counter[str] = Counter()
    for table_name, manifest, version, stats_ids in manifests:
        with catalog.load_table(("ns", table_name)).io.new_input(
                manifest.manifest_path).open() as f:
            content = bytes(f.read())
        versions[version] += 1
        for added_only in (False, True):
            for ids in ((), stats_ids):
                try:
                    batch = assert_decodes(manifest, content, added_only=added_only,
                                           stats_ids=ids)
                except AssertionError as exc:
                    raise AssertionError(f"table ns.{table_name}, {exc}") from exc
                if ids and not added_only:
                    seen["stats"] += sum(batch.column(f"lower_{k}").null_count < batch.num_rows
                                         for k in ids)
        # what the manifests cover (so the comparison above is not vacuous)
        statuses = {e.status.name for e in manifest.fetch_manifest_entry(
            catalog.load_table(("ns", table_name)).io, discard_deleted=False)}
        seen.update(statuses)
        schema = json.loads(open_avro(content)[1].meta["avro.schema"])
        data_file = next(f["type"] for f in schema["fields"] if f.get("field-id") == 2)
        partition = next(f["type"] for f in data_file["fields"] if f.get("field-id") == 102)
        if partition["fields"]:
            seen["partitioned"] += 1
            spec = catalog.load_table(("ns", table_name)).specs()[manifest.partition_spec_id]
            seen.update(type(f.transform).__name__ for f in spec.fields)
        if manifest.sequence_number and any(
                e.sequence_number is None for e in _raw_sequence_numbers(content)):
            seen["inherited"] += 1
        rows, _ = expected_rows(manifest, added_only=False, stats_ids=())
        seen["rows"] += len(rows)
    print(f"{len(manifests)} data manifests, versions {dict(versions)}, {dict(seen)}")
    assert set(versions) >= {1, 2, 3}, versions
    assert {"ADDED", "EXISTING", "DELETED", "partitioned", "inherited", "stats"} <= set(seen), seen
    transforms = {"IdentityTransform", "BucketTransform", "TruncateTransform", "YearTransform",
                  "MonthTransform", "DayTransform", "HourTransform"}
    assert transforms <= set(seen), transforms - set(seen)  # every transform Java writes


class _Seq:
    def __init__(self, value: Any) -> None:
        self.sequence_number = value


def _raw_sequence_numbers(content: bytes) -> list[_Seq]:
    """The entries' sequence numbers as written (before inheritance), read with PyIceberg's
    own reader of the file's schema."""
    from icefloe.enumerator.manifest_decoder import _record_reader, avro_blocks

    decoder, header, decompress = open_avro(content)
    from pyiceberg.avro.decoder import new_decoder

    reader = _record_reader(header.meta["avro.schema"])
    out = []
    for count, data in avro_blocks(decoder, header.sync, decompress):
        block = new_decoder(data)
        for _ in range(count):
            out.append(_Seq(reader.read(block).sequence_number))
    return out
