"""Hand-made manifests for the decoder tests: every primitive partition type (with nulls),
ADDED / EXISTING / DELETED entries with explicit and null sequence numbers, with and
without stats and split offsets, written by PyIceberg's own manifest writers (v1, v2)."""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path

from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
    write_manifest,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, IdentityTransform, TruncateTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

SNAPSHOT_ID = 77

ALL_TYPES = Schema(
    NestedField(1, "i", IntegerType(), required=False),
    NestedField(2, "l", LongType(), required=False),
    NestedField(3, "b", BooleanType(), required=False),
    NestedField(4, "s", StringType(), required=False),
    NestedField(5, "d", DateType(), required=False),
    NestedField(6, "ts", TimestampType(), required=False),
    NestedField(7, "tstz", TimestamptzType(), required=False),
    NestedField(8, "dec", DecimalType(9, 2), required=False),
    NestedField(9, "u", UUIDType(), required=False),
    NestedField(10, "bin", BinaryType(), required=False),
    NestedField(11, "fx", FixedType(4), required=False),
    NestedField(12, "f", FloatType(), required=False),
    NestedField(13, "dbl", DoubleType(), required=False),
    NestedField(14, "t", TimeType(), required=False),
)
ALL_TYPES_SPEC = PartitionSpec(
    *(
        PartitionField(source_id=f.field_id, field_id=1000 + f.field_id,
                       transform=IdentityTransform(), name=f"{f.name}_p")
        for f in ALL_TYPES.fields
    ),
    PartitionField(source_id=2, field_id=1100, transform=BucketTransform(8), name="l_bucket"),
    PartitionField(source_id=4, field_id=1101, transform=TruncateTransform(2), name="s_trunc"),
    spec_id=3,
)
PARTITIONS = [
    Record(7, 1 << 40, True, "kind-a", 19_723, 1_704_067_200_000_000, 1_704_067_200_123_456,
           Decimal("12.34"), uuid.UUID("12345678-1234-5678-1234-567812345678"), b"\x00\xff",
           b"abcd", 1.5, -2.25, 3_600_000_000, 3, "ki"),
    Record(*([None] * 16)),
    Record(-1, -5, False, "", -1, -1, 0, Decimal("-0.01"),
           uuid.UUID(int=0), b"", b"\x00\x00\x00\x00", float("inf"), 0.0, 0, 0, ""),
]


def data_file(i: int, partition: Record, content: DataFileContent = DataFileContent.DATA,
               ) -> DataFile:
    with_stats = i % 2 == 0
    df = DataFile.from_args(
        content=content,
        file_path=f"file:///warehouse/t/data/part-{i:05d}.parquet",
        file_format=[FileFormat.PARQUET, FileFormat.AVRO, FileFormat.ORC][i % 3],
        partition=partition,
        record_count=1_000 + i,
        file_size_in_bytes=50_000 + i * 7,
        column_sizes={1: 10, 2: 20} if with_stats else None,
        value_counts={1: 5} if with_stats else None,
        null_value_counts={1: 0, 4: 2} if with_stats else None,
        nan_value_counts={12: 0} if with_stats else None,
        lower_bounds={1: b"\x01\x00\x00\x00", 4: b"a"} if with_stats else None,
        upper_bounds={1: b"\x09\x00\x00\x00", 4: b"zz"} if with_stats else None,
        split_offsets=[4, 1_000 + i, 20_000] if i % 3 else None,
        equality_ids=[1, 2] if content == DataFileContent.EQUALITY_DELETES else None,
        sort_order_id=0 if i % 2 else None,
    )
    df.spec_id = ALL_TYPES_SPEC.spec_id
    return df


class AnyEntryWriterV2(ManifestWriterV2):
    """PyIceberg's v2 writer without its check that only ADDED entries have null sequence
    numbers: other writers (or old bugs) may write them, and readers must not inherit then."""

    def prepare_entry(self, entry: ManifestEntry) -> ManifestEntry:
        return entry


def manifest_entries(version: int, content: DataFileContent) -> list[ManifestEntry]:
    entries = []
    for i in range(12):
        status = [ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING,
                  ManifestEntryStatus.DELETED][i % 3]
        explicit = version == 2 and (status != ManifestEntryStatus.ADDED or i % 4 == 0)
        entries.append(ManifestEntry.from_args(
            status=status,
            snapshot_id=SNAPSHOT_ID if version == 1 or i % 2 else None,
            sequence_number=3 + i if explicit and i % 5 else None,
            file_sequence_number=4 + i if explicit and i % 5 else None,
            data_file=data_file(i, PARTITIONS[i % len(PARTITIONS)], content),
        ))
    return entries


def write_all_types_manifest(path: Path, version: int, codec: str, entries: list[ManifestEntry],
           manifest_seq: int) -> ManifestFile:
    io = PyArrowFileIO()
    output = io.new_output(str(path))
    writer = (AnyEntryWriterV2(ALL_TYPES_SPEC, ALL_TYPES, output, SNAPSHOT_ID, codec)  # type: ignore[arg-type]
              if version == 2
              else write_manifest(1, ALL_TYPES_SPEC, ALL_TYPES, output, SNAPSHOT_ID, codec))  # type: ignore[arg-type]
    with writer:
        for entry in entries:
            writer.add_entry(entry)
    manifest = writer.to_manifest_file()
    # as the manifest list gives it: the committing snapshot's sequence number (0 in v1)
    manifest.sequence_number = manifest_seq
    manifest.min_sequence_number = manifest_seq
    return manifest
