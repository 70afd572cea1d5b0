"""Incremental discovery's manifest-list scan against PyIceberg's own manifest-list reading.

Oracle: ``Snapshot.manifests`` (PyIceberg's records, enums and v1 defaults), filtered on
``added_snapshot_id``. Compared field by field (``ManifestFile.__eq__`` compares only the
path) on real v1 and v2 partitioned tables with appends, overwrites, deletes and delete
files, for every snapshot of the history against every snapshot id that occurs in its list;
and on manifest lists written directly (both codecs, partition summaries with nulls and
NaNs, key metadata, interleaved snapshot ids). The planner test checks that
``plan_added`` yields the same splits as discovery from PyIceberg's full manifest list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    ManifestContent,
    ManifestFile,
    PartitionFieldSummary,
    write_manifest_list,
)
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.typedef import Record

from icefloe.enumerator import discovery
from icefloe.enumerator.discovery import DataFileError, snapshot_added_manifests
from icefloe.enumerator.manifest_list_decoder import _plan, added_manifests
from icefloe.enumerator.planner import TableSplitPlanner
from tests.conftest import append_partitioned
from tests.helpers.tables import (
    EVENTS_SCHEMA,
    EVENTS_SPEC_BY_DAY,
    add_equality_deletes,
    add_position_deletes,
    commit_delete_files,
    commit_overwrite_files,
    make_table,
    rows,
)
from tests.helpers.tables import (
    live_data_files as table_data_files,
)


def _fields(manifest: ManifestFile) -> tuple[Any, ...]:
    """Every field of a manifest-list entry, with value types (content must be the enum)."""
    summaries = None if manifest.partitions is None else [
        (s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound)
        for s in manifest.partitions
    ]
    values = (
        manifest.manifest_path, manifest.manifest_length, manifest.partition_spec_id,
        manifest.content, manifest.sequence_number, manifest.min_sequence_number,
        manifest.added_snapshot_id, manifest.added_files_count,
        manifest.existing_files_count, manifest.deleted_files_count,
        manifest.added_rows_count, manifest.existing_rows_count,
        manifest.deleted_rows_count, summaries, manifest.key_metadata,
    )
    return (type(manifest), type(manifest.content), values)


def _read(io: FileIO, path: str) -> bytes:
    with io.new_input(path).open() as f:
        return f.read()


def _assert_matches_pyiceberg(io: FileIO, snapshot: Snapshot) -> int:
    """For every snapshot id in ``snapshot``'s list (and one absent id), the scan returns
    PyIceberg's entries with that ``added_snapshot_id``. Returns how many ids were seen."""
    everything = snapshot.manifests(io)
    content = _read(io, snapshot.manifest_list)
    ids = {m.added_snapshot_id for m in everything}
    for sid in [*sorted(ids, key=str), snapshot.snapshot_id, -1]:
        got = added_manifests(content, sid)  # type: ignore[arg-type]
        want = [m for m in everything if m.added_snapshot_id == sid]
        assert [_fields(m) for m in got] == [_fields(m) for m in want], sid
    return len(ids)


def _history(catalog: Catalog, version: int) -> Table:
    """A day-partitioned table: appends, an overwrite, a file delete; v2 also gets
    position and equality delete files (DELETES manifests)."""
    catalog.create_namespace_if_not_exists("db")
    table = (make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY) if version == 2
             else catalog.create_table("db.events", EVENTS_SCHEMA,
                                       partition_spec=EVENTS_SPEC_BY_DAY,
                                       properties={"format-version": "1"}))
    append_partitioned(table, rows(30))
    append_partitioned(table, rows(30, start=30))
    append_partitioned(table, rows(12, start=60, days=5))
    files = sorted(table_data_files(table))
    commit_overwrite_files(table, [files[0]], rows(5, start=100))
    commit_delete_files(table, [files[1]])
    table = catalog.load_table("db.events")
    if version == 2:
        live = sorted(table_data_files(table))
        add_position_deletes(table, {live[0]: [0, 1]})
        day = table_data_files(table)[live[2]].partition
        add_equality_deletes(table, pa.table({"id": [40, 41]}), ["id"],
                             partition=Record(*day))  # type: ignore[misc]
        table = catalog.load_table("db.events")
        append_partitioned(table, rows(6, start=200))
        table = catalog.load_table("db.events")
    return table


@pytest.mark.parametrize("version", [1, 2])
def test_scan_matches_pyiceberg_on_every_snapshot(catalog: SqlCatalog, version: int) -> None:
    table = _history(catalog, version)
    snapshots = table.metadata.snapshots
    assert len(snapshots) >= 5

    seen = [_assert_matches_pyiceberg(table.io, s) for s in snapshots]

    assert max(seen) >= 3  # lists that carry manifests of several snapshots
    current = table.current_snapshot()
    assert current is not None
    contents = {m.content for m in current.manifests(table.io)}
    if version == 2:
        assert contents == {ManifestContent.DATA, ManifestContent.DELETES}
        delete_snaps = [s for s in snapshots if any(
            m.content == ManifestContent.DELETES and m.added_snapshot_id == s.snapshot_id
            for m in s.manifests(table.io))]
        assert delete_snaps  # a snapshot whose own manifests are delete manifests
    else:  # v1 lists: PyIceberg's defaults for the fields v1 lacks
        own = added_manifests(_read(table.io, current.manifest_list), current.snapshot_id)
        assert own and {(m.content, m.sequence_number) for m in own} == \
            {(ManifestContent.DATA, 0)}
    assert any(m.partitions for m in current.manifests(table.io))


def _snapshot(snapshot_id: int, manifest_list: str) -> Snapshot:
    return Snapshot.model_validate({
        "snapshot-id": snapshot_id, "sequence-number": 10, "timestamp-ms": 0,
        "manifest-list": manifest_list,
    })


def _manifest(root: Path, k: int, snapshot_id: int, content: ManifestContent,
              partitions: list[PartitionFieldSummary] | None, key: bytes | None) -> ManifestFile:
    return ManifestFile.from_args(
        # unique per test: PyIceberg caches ManifestFile records by path across lists
        manifest_path=f"file://{root}/m-{k}.avro", manifest_length=1_000 + k,
        partition_spec_id=k % 3, content=content, sequence_number=10 + k,
        min_sequence_number=5 + k, added_snapshot_id=snapshot_id, added_files_count=k,
        existing_files_count=2 * k, deleted_files_count=k % 2, added_rows_count=100 * k,
        existing_rows_count=7, deleted_rows_count=0, partitions=partitions, key_metadata=key,
    )


@pytest.mark.parametrize("codec", ["null", "deflate"])
@pytest.mark.parametrize("version", [1, 2])
def test_scan_matches_pyiceberg_on_written_lists(tmp_path: Path, codec: str, version: int
                                                 ) -> None:
    summaries = [
        # contains_null, contains_nan, lower_bound, upper_bound
        PartitionFieldSummary(True, None, None, None),
        PartitionFieldSummary(False, True, b"\x01", b"\xff\xfe"),
    ]
    owners = [3, 1, 3, 2, 1, 3, 2, 3]
    manifests = [
        _manifest(tmp_path, k, sid, ManifestContent.DELETES if version == 2 and k % 3 == 0
                  else ManifestContent.DATA,
                  [None, [], summaries[:1], summaries][k % 4], b"key" if k % 2 else None)
        for k, sid in enumerate(owners)
    ]
    io = PyArrowFileIO()
    path = str(tmp_path / "snap.avro")
    with write_manifest_list(version, io.new_output(path), 3, 2,  # type: ignore[arg-type]
                             10 if version == 2 else None, codec) as writer:  # type: ignore[arg-type]
        writer.add_manifests(manifests)
    snapshot = _snapshot(3, path)

    assert _assert_matches_pyiceberg(io, snapshot) == 3
    own = added_manifests(_read(io, path), 3)
    assert [m.manifest_path.rsplit("-", 1)[1] for m in own] == \
        ["0.avro", "2.avro", "5.avro", "7.avro"]
    assert any(m.partitions for m in own)
    assert [m.key_metadata for m in own] == [None, None, b"key", b"key"]


def test_scanner_steps_over_sized_summary_blocks(tmp_path: Path) -> None:
    """A writer may give an array block's byte size with a negative count; the scanner
    steps over such a block whole and stays aligned with PyIceberg's reader."""
    from pyiceberg.avro.decoder import new_decoder

    from icefloe.enumerator.manifest_decoder import _HEADER_READER

    io = PyArrowFileIO()
    path = str(tmp_path / "snap.avro")
    summary = PartitionFieldSummary(False, False, b"ab", b"cd")
    with write_manifest_list(2, io.new_output(path), 3, 2, 10, "null") as writer:
        writer.add_manifests([_manifest(tmp_path, 0, 3, ManifestContent.DATA, [summary] * 2, None)])
    content = _read(io, path)
    schema = _HEADER_READER.read(new_decoder(content)).meta["avro.schema"]
    scan_entry, read_entry, source = _plan(schema)
    assert "skip(d, read_int(d))" in source

    # the one entry, re-encoded with its summaries array as a sized block
    entry = _only_entry_bytes(content)
    plain_array = _zigzag(2) + _summary_bytes(summary) * 2 + _zigzag(0)
    at = entry.index(plain_array)
    body = _summary_bytes(summary) * 2
    sized = _zigzag(-2) + _zigzag(len(body)) + body + _zigzag(0)
    blocked = entry[:at] + sized + entry[at + len(plain_array):] + _zigzag(424242)

    expected = new_decoder(blocked)
    want = read_entry(expected)
    scanned = new_decoder(blocked)
    assert scan_entry(scanned) == 3
    assert scanned.tell() == expected.tell()
    assert scanned.read_int() == 424242
    assert [(s.lower_bound, s.upper_bound) for s in want.partitions] == [(b"ab", b"cd")] * 2


def _zigzag(n: int) -> bytes:
    out = bytearray()
    z = (n << 1) ^ (n >> 63)
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _summary_bytes(s: PartitionFieldSummary) -> bytes:
    """A required-null-only summary as the v2 list encodes it (unions: branch 1 = value)."""
    def opt_bytes(b: bytes | None) -> bytes:
        assert b is not None
        return _zigzag(1) + _zigzag(len(b)) + b
    return (b"\x01" if s.contains_null else b"\x00") + _zigzag(1) + \
        (b"\x01" if s.contains_nan else b"\x00") + opt_bytes(s.lower_bound) + \
        opt_bytes(s.upper_bound)


def _only_entry_bytes(content: bytes) -> bytes:
    """The one entry of an uncompressed single-block Avro container."""
    from pyiceberg.avro.decoder import new_decoder

    from icefloe.enumerator.manifest_decoder import _HEADER_READER

    decoder = new_decoder(content)
    _HEADER_READER.read(decoder)
    assert decoder.read_int() == 1
    return decoder.read_bytes()


def test_missing_manifest_list_names_it_and_the_snapshot(tmp_path: Path) -> None:
    snapshot = _snapshot(123, str(tmp_path / "gone.avro"))
    with pytest.raises(DataFileError, match=r"gone\.avro of snapshot 123"):
        snapshot_added_manifests(PyArrowFileIO(), snapshot)
    (tmp_path / "bad.avro").write_bytes(b"PAR1" + b"\x00" * 64)
    bad = snapshot.model_copy(update={"manifest_list": str(tmp_path / "bad.avro")})
    with pytest.raises(DataFileError, match="not an Avro file"):
        snapshot_added_manifests(PyArrowFileIO(), bad)


def _pyiceberg_added(io: FileIO, snapshot: Snapshot) -> list[ManifestFile]:
    """Discovery's manifests as before the scanner: PyIceberg's whole list, filtered."""
    return [m for m in snapshot.manifests(io) if m.added_snapshot_id == snapshot.snapshot_id]


@pytest.mark.parametrize("version", [1, 2])
def test_plan_added_equals_plan_from_pyiceberg_list(catalog: SqlCatalog, version: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    table = _history(catalog, version)
    planner = TableSplitPlanner(table.metadata, table.io, table.schema(), None, True, 1 << 27)

    fast = {s.snapshot_id: list(planner.plan_added(s)) for s in table.metadata.snapshots}
    monkeypatch.setattr(discovery, "snapshot_added_manifests", _pyiceberg_added)
    reference = {s.snapshot_id: list(planner.plan_added(s)) for s in table.metadata.snapshots}

    assert fast == reference
    assert sum(len(v) for v in fast.values()) > 10
    assert len({split.sequence_number for v in fast.values() for split in v}) > 1 \
        or version == 1
