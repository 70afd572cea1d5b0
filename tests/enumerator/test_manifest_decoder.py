"""The planning-only manifest decoder against PyIceberg's own manifest reading.

Oracle: ``ManifestFile.fetch_manifest_entry`` (PyIceberg's records, enums and sequence-number
inheritance). Manifests are written with PyIceberg's manifest writers: v1 and v2 layouts, both
codecs, identity partitions of every primitive type with nulls, ADDED / EXISTING / DELETED
entries with explicit and null sequence numbers, with and without stats and split offsets, and
DELETES manifests. The planner test checks the fast path yields the same splits (ids, order,
ranges, deletes) as planning from PyIceberg's entries, on real v1 and v2 tables.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
)

from icefloe.enumerator.deletes import INITIAL_SEQUENCE_NUMBER, DeleteIndex, partition_tuple
from icefloe.enumerator.discovery import DataFileError, live_data_files_of, live_entries
from icefloe.enumerator.manifest_decoder import FileStats, LiveDataFile, live_data_files
from icefloe.enumerator.planner import TableSplitPlanner
from icefloe.splits.split import FileSplit
from tests.conftest import append_partitioned
from tests.helpers.manifests import SNAPSHOT_ID, manifest_entries, write_all_types_manifest
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


def _expected(manifest: ManifestFile) -> list[LiveDataFile]:
    """PyIceberg's live entries of ``manifest``, as the decoder's tuples."""
    return [
        LiveDataFile(
            e.data_file.file_path, e.data_file.file_format.name,
            partition_tuple(e.data_file.partition), e.data_file.record_count,
            e.data_file.file_size_in_bytes, e.data_file.split_offsets, e.sequence_number,
        )
        for e in manifest.fetch_manifest_entry(PyArrowFileIO(), discard_deleted=True)
    ]


def _decode(manifest: ManifestFile) -> list[LiveDataFile]:
    with PyArrowFileIO().new_input(manifest.manifest_path).open() as f:
        return live_data_files(f.read(), manifest)


@pytest.mark.parametrize("codec", ["null", "deflate"])
@pytest.mark.parametrize(("version", "manifest_seq", "content"), [
    (1, 0, DataFileContent.DATA),
    (2, 5, DataFileContent.DATA),
    (2, 0, DataFileContent.DATA),
    (2, 5, DataFileContent.POSITION_DELETES),
    (2, 5, DataFileContent.EQUALITY_DELETES),
])
def test_decoder_yields_pyiceberg_live_entries(
    tmp_path: Path, codec: str, version: int, manifest_seq: int, content: DataFileContent
) -> None:
    entries = manifest_entries(version, content)
    manifest = write_all_types_manifest(tmp_path / "m.avro", version, codec, entries, manifest_seq)

    decoded = _decode(manifest)
    expected = _expected(manifest)

    assert decoded == expected
    assert len(decoded) == 8  # DELETED entries dropped
    # every partition value kept its PyIceberg type (e.g. int days, Decimal, UUID, bytes)
    for got, want in zip(decoded, expected, strict=True):
        assert [type(v) for v in got.partition] == [type(v) for v in want.partition]
    seqs = {d.sequence_number for d in decoded}
    if version == 1:
        assert seqs == {0}
    else:  # ADDED entries inherit, explicit ones keep theirs, null EXISTING ones stay null
        assert manifest_seq in seqs and any(s not in (None, manifest_seq) for s in seqs)


def _stats_of(data_file: DataFile) -> FileStats:
    return FileStats(partition_tuple(data_file.partition), data_file.record_count,
                     _plain(data_file.value_counts), _plain(data_file.null_value_counts),
                     _plain(data_file.nan_value_counts), _plain(data_file.lower_bounds),
                     _plain(data_file.upper_bounds))


def _plain(stats: Any) -> dict[int, Any] | None:
    """A stats map as a dict (PyIceberg gives int->long maps as a lazy mapping)."""
    return None if stats is None else dict(stats.items())


@pytest.mark.parametrize("codec", ["null", "deflate"])
@pytest.mark.parametrize("version", [1, 2])
def test_decoder_offers_pyiceberg_stats_to_keep(tmp_path: Path, codec: str, version: int
                                                ) -> None:
    """With ``keep`` (a filtered scan), each live entry is offered as the partition tuple
    and the stats PyIceberg's metrics evaluator reads; only accepted entries are returned."""
    manifest = write_all_types_manifest(
        tmp_path / "m.avro", version, codec, manifest_entries(version, DataFileContent.DATA),
        5 if version == 2 else 0)
    offered: list[FileStats] = []

    def keep(stats: FileStats) -> bool:
        offered.append(stats)
        return stats.record_count % 2 == 0

    with PyArrowFileIO().new_input(manifest.manifest_path).open() as f:
        kept = live_data_files(f.read(), manifest, keep)

    live = manifest.fetch_manifest_entry(PyArrowFileIO(), discard_deleted=True)
    assert offered == [_stats_of(e.data_file) for e in live]
    assert any(s.lower_bounds for s in offered) and any(s.value_counts is None for s in offered)
    assert kept == [f for f in _expected(manifest) if f.record_count % 2 == 0]
    assert kept and len(kept) < len(offered)


def test_decoder_reads_unpartitioned_and_plain_manifests(tmp_path: Path) -> None:
    io = PyArrowFileIO()
    spec = PartitionSpec(spec_id=0)
    with write_manifest(2, spec, EVENTS_SCHEMA, io.new_output(str(tmp_path / "u.avro")),
                        SNAPSHOT_ID, "deflate") as writer:
        for i in range(5):
            df = DataFile.from_args(
                content=DataFileContent.DATA, file_path=f"s3://b/f{i}.parquet",
                file_format=FileFormat.PARQUET, partition=Record(), record_count=i,
                file_size_in_bytes=10 + i,
            )
            df.spec_id = 0
            writer.add_entry(ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED, snapshot_id=SNAPSHOT_ID, data_file=df))
    manifest = writer.to_manifest_file()
    manifest.sequence_number = 9

    decoded = _decode(manifest)

    assert decoded == _expected(manifest)
    assert [d.partition for d in decoded] == [()] * 5
    assert {d.sequence_number for d in decoded} == {9}
    assert decoded[0].split_offsets is None


def test_decoder_rejects_foreign_bytes(tmp_path: Path) -> None:
    manifest = write_all_types_manifest(tmp_path / "m.avro", 2, "null",
                                        manifest_entries(2, DataFileContent.DATA), 5)
    with pytest.raises(ValueError, match="not an Avro file"):
        live_data_files(b"PAR1" + b"\x00" * 64, manifest)
    with PyArrowFileIO().new_input(manifest.manifest_path).open() as f:
        content = f.read()
    with pytest.raises((ValueError, EOFError)):
        live_data_files(content[: len(content) // 2], manifest)


def test_missing_manifest_names_it_and_the_snapshot(tmp_path: Path) -> None:
    manifest = write_all_types_manifest(tmp_path / "m.avro", 2, "null",
                                        manifest_entries(2, DataFileContent.DATA), 5)
    (tmp_path / "m.avro").unlink()
    with pytest.raises(DataFileError, match=r"m\.avro of snapshot 123"):
        list(live_data_files_of(PyArrowFileIO(), [manifest], 123))


def test_truncated_manifest_names_it_and_the_snapshot(tmp_path: Path) -> None:
    """Files are decoded as they are iterated: a manifest that ends inside a block fails
    then, named."""
    manifest = write_all_types_manifest(tmp_path / "m.avro", 2, "null",
                                        manifest_entries(2, DataFileContent.DATA), 5)
    content = (tmp_path / "m.avro").read_bytes()
    (tmp_path / "m.avro").write_bytes(content[: len(content) - 40])
    ((got, files),) = list(live_data_files_of(PyArrowFileIO(), [manifest], 123))
    assert got is manifest
    with pytest.raises(DataFileError, match=r"m\.avro of snapshot 123: (EOFError|ValueError)"):
        list(files)


# --------------------------------------------------------------------------- planner


def _reference_splits(planner: TableSplitPlanner, table: Table, start: int = 0,
                      ) -> list[FileSplit]:
    """Splits planned from PyIceberg's entries (the path a row filter takes), no pruning."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    manifests = snapshot.manifests(table.io)
    deletes = DeleteIndex(planner.unpartitioned)
    delete_manifests = [m for m in manifests if m.content == ManifestContent.DELETES]
    for entry in live_entries(table.io, delete_manifests, snapshot.snapshot_id, lambda e: True):
        deletes.add(entry)
    data = [m for m in manifests if m.content == ManifestContent.DATA]
    out: list[FileSplit] = []
    ordinal = 0
    for entry in live_entries(table.io, data, snapshot.snapshot_id, lambda e: True):
        for split in planner.entry_splits(entry, snapshot.snapshot_id, ordinal, deletes):
            if split.ordinal >= start:
                out.append(split)
            ordinal += 1
    return out


def _planner(table: Table, split_size: int) -> TableSplitPlanner:
    return TableSplitPlanner(table.metadata, table.io, table.schema(), None, True, split_size)


def _v1_table(catalog: Catalog) -> Table:
    catalog.create_namespace_if_not_exists("db")
    return catalog.create_table("db.v1", EVENTS_SCHEMA, partition_spec=EVENTS_SPEC_BY_DAY,
                                properties={"format-version": "1"})


@pytest.mark.parametrize("split_size", [1 << 27, 600])
def test_fast_plan_equals_entry_plan_v2_with_deletes(catalog: SqlCatalog, split_size: int
                                                     ) -> None:
    table = make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY)
    append_partitioned(table, rows(30))
    append_partitioned(table, rows(30, start=30))
    files = sorted(table_data_files(table))
    commit_overwrite_files(table, [files[0]], rows(5, start=100))  # DELETED + EXISTING entries
    commit_delete_files(table, [files[1]])
    table = catalog.load_table("db.events")
    live = sorted(table_data_files(table))
    add_position_deletes(table, {live[0]: [0, 1]})
    day = table_data_files(table)[live[2]].partition
    add_equality_deletes(table, pa.table({"id": [40, 41]}), ["id"], partition=Record(*day))
    table = catalog.load_table("db.events")
    planner = _planner(table, split_size)
    snapshot = table.current_snapshot()
    assert snapshot is not None

    fast = list(planner.plan_snapshot(snapshot))
    reference = _reference_splits(planner, table)

    assert fast == reference
    assert any(s.delete_files for s in fast)
    assert len({s.sequence_number for s in fast}) > 1
    if split_size == 600:  # every file is bigger: the byte-range path, not the inlined one
        assert all(s.file_size > split_size for s in fast)
    assert list(planner.plan_snapshot(snapshot, start_ordinal=7)) == \
        _reference_splits(planner, table, start=7)


def test_fast_plan_equals_entry_plan_v1(catalog: SqlCatalog) -> None:
    table = _v1_table(catalog)
    append_partitioned(table, rows(20))
    append_partitioned(table, rows(20, start=20))
    table = catalog.load_table("db.v1")
    planner = _planner(table, 1 << 27)
    snapshot = table.current_snapshot()
    assert snapshot is not None

    fast = list(planner.plan_snapshot(snapshot))

    assert fast == _reference_splits(planner, table)
    assert {s.sequence_number for s in fast} == {INITIAL_SEQUENCE_NUMBER}
    assert {s.partition for s in fast} == {(19_723,), (19_724,), (19_725,)}


def _partition_values(splits: list[FileSplit]) -> set[Any]:
    return {v for s in splits for v in s.partition}


def test_fast_plan_partition_values_are_plain(catalog: SqlCatalog) -> None:
    table = make_table(catalog, partition_spec=EVENTS_SPEC_BY_DAY)
    append_partitioned(table, rows(9))
    table = catalog.load_table("db.events")
    snapshot = table.current_snapshot()
    assert snapshot is not None

    fast = list(_planner(table, 1 << 27).plan_snapshot(snapshot))

    expected_days = {(dt.date(2024, 1, 1) - dt.date(1970, 1, 1)).days + k for k in range(3)}
    assert _partition_values(fast) == expected_days


def _zigzag(n: int) -> bytes:
    out = bytearray()
    z = (n << 1) ^ (n >> 63)
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _inlined_skipper(reader: Any) -> Any:
    """The stats-map skip the entry decoder inlines, compiled on its own."""
    from icefloe.enumerator.manifest_decoder import _Codegen

    gen = _Codegen()
    gen.skip(reader, 108)  # column_sizes: a stats field
    exec(compile("\n".join(["def skip_map(d):", *gen.lines]), "<test>", "exec"), gen.namespace)
    return gen.namespace["skip_map"]


@pytest.mark.parametrize("inlined", [False, True])
@pytest.mark.parametrize("value_type", [LongType(), BinaryType()])
def test_stats_skipper_steps_over_blocked_maps(value_type: Any, inlined: bool) -> None:
    """Avro lets a writer give a block's byte size with a negative count; both block forms
    are stepped over exactly as PyIceberg's map reader would read them (by the skip
    function and by the code the entry decoder inlines)."""
    from pyiceberg.avro.decoder import new_decoder
    from pyiceberg.avro.resolver import construct_reader
    from pyiceberg.types import MapType

    from icefloe.enumerator.manifest_decoder import stats_reader, stats_skipper

    field = NestedField(1, "m", MapType(2, IntegerType(), 3, value_type), required=False)
    reader = construct_reader(Schema(field)).field_readers[0][1]  # type: ignore[attr-defined]

    def value(v: int) -> bytes:
        return _zigzag(v) if isinstance(value_type, LongType) else _zigzag(2) + b"%02d" % v

    plain = _zigzag(2) + b"".join(_zigzag(k) + value(k * 10) for k in (1, 2))
    block = b"".join(_zigzag(k) + value(k * 10) for k in (3, 4, 5))
    sized = _zigzag(-3) + _zigzag(len(block)) + block
    payload = _zigzag(1) + plain + sized + _zigzag(0) + _zigzag(424242)

    expected = new_decoder(payload)
    assert reader.read(expected) == {k: (k * 10 if isinstance(value_type, LongType)
                                         else b"%02d" % (k * 10)) for k in range(1, 6)}
    skip = _inlined_skipper(reader) if inlined else stats_skipper(reader)
    skipped = new_decoder(payload)
    skip(skipped)
    assert skipped.tell() == expected.tell()
    assert skipped.read_int() == 424242
    null = new_decoder(_zigzag(0) + _zigzag(7))
    skip(null)
    assert null.read_int() == 7
    # the filtered scan's reader of the same map: PyIceberg's values, as a dict
    read = stats_reader(reader)
    decoded = new_decoder(payload)
    assert read(decoded) == dict(reader.read(new_decoder(payload)).items())
    assert decoded.tell() == expected.tell()
    assert read(new_decoder(_zigzag(0))) is None


def test_double_partition_values_keep_full_precision(catalog: SqlCatalog) -> None:
    """Identity partition values of a double column come from the manifest: PyIceberg 0.12's
    Cython ``read_double`` rounds them to float32 (apache/iceberg-python#3808), and the
    plan then carries (and prunes on) the wrong value. The oracle: the Arrow table appended."""
    from icefloe import IcebergSource

    schema = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "x", DoubleType(), required=False))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "x"))
    table = make_table(catalog, "db.doubles", schema=schema, partition_spec=spec)
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                     "x": pa.array([0.1, 1e300, -2.718281828459045], pa.float64())})
    append_partitioned(table, data)
    table = catalog.load_table("db.doubles")
    snapshot = table.current_snapshot()
    assert snapshot is not None
    planned = {split.partition[0] for split in _planner(table, 1 << 27).plan_snapshot(snapshot)}
    assert planned == set(data["x"].to_pylist())
    got = IcebergSource("db.doubles", catalog=catalog).to_arrow()
    assert sorted(got["x"].to_pylist()) == sorted(data["x"].to_pylist())


def test_filter_on_a_double_partition_value(catalog: SqlCatalog) -> None:
    """A filtered plan decodes the manifest itself too (PyIceberg's entries round double
    partition values to float32, apache/iceberg-python#3808, and pruned this file)."""
    from icefloe import IcebergSource

    schema = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "x", DoubleType(), required=False))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "x"))
    table = make_table(catalog, "db.doubles", schema=schema, partition_spec=spec)
    append_partitioned(table, pa.table({"id": pa.array([1], pa.int64()),
                                        "x": pa.array([0.1], pa.float64())}))
    got = IcebergSource("db.doubles", catalog=catalog, options={"filter": "x = 0.1"}).to_arrow()
    assert got["x"].to_pylist() == [0.1]
