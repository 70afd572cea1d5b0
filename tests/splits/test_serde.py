"""Split serialization: round trips, golden bytes of every version, and bad bytes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import pickle
import uuid
from pathlib import Path

import msgpack
import pytest

from icefloe.errors import SplitFormatError
from icefloe.splits import DeleteFileRef, FileSplit, deserialize_split, serialize_split
from icefloe.splits.serde import CURRENT_VERSION, MAGIC, split_from_obj, split_to_obj
from icefloe.splits.split import CHANGE_ADDED, CHANGE_EXISTING, CHANGE_REMOVED, ChangeFile

GOLDEN_V1 = Path(__file__).parent / "golden" / "split_v1.bin"
GOLDEN_V2 = Path(__file__).parent / "golden" / "split_v2.bin"
GOLDEN_V3 = Path(__file__).parent / "golden" / "split_v3.bin"
GOLDEN_V4 = Path(__file__).parent / "golden" / "split_v4.bin"
GOLDEN_V5 = Path(__file__).parent / "golden" / "split_v5.bin"
DATA = "s3://bucket/wh/db/events/data/day=2024-01-02/00000-0-data.parquet"


def _split(**changes: object) -> FileSplit:
    fields: dict[str, object] = dict(
        split_id="1-abc", file_path="/wh/t/data/a.parquet", file_format="PARQUET", start=0,
        length=100, record_count=10, file_size=100, file_record_count=10, spec_id=0,
        partition=(), snapshot_id=1, sequence_number=1, ordinal=0,
    )
    fields.update(changes)
    return FileSplit(**fields)  # type: ignore[arg-type]


def test_golden_v1_reads_back_every_field() -> None:
    split = deserialize_split(GOLDEN_V1.read_bytes())
    assert split.split_id == "6512078345112847-0a1b2c3d4e5f60718293"
    assert split.file_path == DATA
    assert split.file_format == "PARQUET"
    assert (split.start, split.length, split.end) == (4, 1048576, 1048580)
    assert (split.record_count, split.file_size, split.file_record_count) == (1000, 4194304, 4000)
    assert split.spec_id == 3
    assert split.snapshot_id == 6512078345112847
    assert split.sequence_number == 17
    assert split.ordinal == 5
    assert split.resume_rows == 250
    assert split.partition == (
        19724,
        "kind-a",
        dt.date(2024, 1, 2),
        dt.datetime(2024, 1, 2, 3, 4, 5, 678901),
        dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        decimal.Decimal("12.345"),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        b"\x00\xffbin",
        2.5,
        True,
        None,
        -(2**63),
    )
    # types survive, not just equality (True == 1, date vs datetime, naive vs aware)
    assert [type(v) for v in split.partition] == [
        int, str, dt.date, dt.datetime, dt.datetime, decimal.Decimal, uuid.UUID, bytes, float,
        bool, type(None), int,
    ]
    assert split.partition[3].tzinfo is None
    assert split.partition[4].utcoffset() == dt.timedelta(0)
    assert split.delete_files == (
        DeleteFileRef(
            path="s3://bucket/wh/db/events/data/pos-deletes.parquet", content=1,
            file_format="PARQUET", sequence_number=18, record_count=3, file_size=1200,
            equality_ids=(), referenced_data_file=DATA, content_offset=None, content_size=None,
        ),
        DeleteFileRef(
            path="s3://bucket/wh/db/events/data/eq-deletes.parquet", content=2,
            file_format="PARQUET", sequence_number=19, record_count=2, file_size=900,
            equality_ids=(1, 2), referenced_data_file=None, content_offset=None,
            content_size=None,
        ),
        DeleteFileRef(
            path="s3://bucket/wh/db/events/data/dv.puffin", content=1, file_format="PUFFIN",
            sequence_number=20, record_count=4, file_size=5000, equality_ids=(),
            referenced_data_file=DATA, content_offset=4, content_size=60,
        ),
    )
    assert isinstance(split.delete_files[1].equality_ids, tuple)


def test_golden_v1_reads_without_row_lineage() -> None:
    assert deserialize_split(GOLDEN_V1.read_bytes()).first_row_id is None


def test_golden_v2_is_v1_plus_first_row_id() -> None:
    v1 = deserialize_split(GOLDEN_V1.read_bytes())
    v2 = deserialize_split(GOLDEN_V2.read_bytes())
    assert v2.first_row_id == 2**62 + 3
    assert dataclasses.replace(v2, first_row_id=None) == v1


def test_golden_v3_is_v2_plus_changes() -> None:
    v2 = deserialize_split(GOLDEN_V2.read_bytes())
    v3 = deserialize_split(GOLDEN_V3.read_bytes())
    assert (v3.change_ordinal, v3.commit_timestamp_ms) == (7, 1_700_000_000_123)
    assert [c.kind for c in v3.changes] == [CHANGE_REMOVED, CHANGE_EXISTING]
    assert v3.changes[0].deletes_before == v2.delete_files[:1]
    assert v3.changes[1].deletes_after == v2.delete_files[1:]
    assert v3.changes[1].partition == v2.partition
    assert (v3.changes[1].path, v3.changes[1].file_format, v3.changes[1].record_count) == (
        "s3://bucket/wh/db/events/data/other.orc", "ORC", 12)
    assert dataclasses.replace(v3, changes=(), change_ordinal=0, commit_timestamp_ms=0) == v2
    assert v2.changes == () and v2.change_ordinal == 0


def test_golden_v4_is_v3_plus_schema_id() -> None:
    v3 = deserialize_split(GOLDEN_V3.read_bytes())
    v4 = deserialize_split(GOLDEN_V4.read_bytes())
    assert v3.schema_id is None
    assert v4.schema_id == 3
    assert dataclasses.replace(v4, schema_id=None) == v3


def test_golden_v5_is_v4_plus_watermark() -> None:
    v4 = deserialize_split(GOLDEN_V4.read_bytes())
    v5 = deserialize_split(GOLDEN_V5.read_bytes())
    assert v4.watermark_ms is None
    assert v5.watermark_ms == 1_700_000_000_456
    assert dataclasses.replace(v5, watermark_ms=None) == v4


def test_golden_v5_is_what_the_current_version_writes() -> None:
    # v5 is the newest format: re-serializing the decoded split gives the same bytes
    assert CURRENT_VERSION == 5
    data = GOLDEN_V5.read_bytes()
    assert data[4] == 5
    assert serialize_split(deserialize_split(data)) == data


@pytest.mark.parametrize(
    "split",
    [
        _split(),
        _split(partition=(None,), resume_rows=3),
        _split(first_row_id=0),
        _split(first_row_id=2**63 - 1, resume_rows=7),
        _split(partition=(
            dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.timezone(dt.timedelta(hours=5))),
            decimal.Decimal("-0.001"), b"", float("inf"), 2**63 - 1,
        )),
        _split(delete_files=(DeleteFileRef("/d.parquet", 2, "PARQUET", 3, 1, 10, (4,)),)),
        _split(changes=(ChangeFile(CHANGE_ADDED, "/a.parquet", "PARQUET", 4, 50, 100, 5, 0,
                                   (None,), 2, (), (DeleteFileRef("/p", 1, "PARQUET", 2, 1,
                                                                  9),)),),
               change_ordinal=2**31, commit_timestamp_ms=-1, resume_rows=4),
        _split(schema_id=7, resume_rows=2),
    ],
)
def test_round_trip(split: FileSplit) -> None:
    data = serialize_split(split)
    assert data.startswith(MAGIC + bytes([CURRENT_VERSION]))
    assert deserialize_split(data) == split
    assert split_from_obj(split_to_obj(split)) == split
    assert pickle.loads(pickle.dumps(split)) == split


def test_unserializable_partition_value() -> None:
    with pytest.raises(TypeError, match="time"):
        serialize_split(_split(partition=(dt.time(1, 2),)))


def test_future_version_is_refused_with_the_readable_versions() -> None:
    data = serialize_split(_split())
    future = MAGIC + bytes([CURRENT_VERSION + 1]) + data[len(MAGIC) + 1:]
    with pytest.raises(SplitFormatError, match=r"version 6 .*versions \[1, 2, 3, 4, 5\].*upgrade"):
        deserialize_split(future)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"IFS",
        b"IFSP",
        b"PAR1\x01\x90",  # foreign magic
        b"\x93\x01\x02\x03",  # plain msgpack, no header
        MAGIC + b"\x01",  # header, no payload
        MAGIC + b"\x01\xc1",  # reserved msgpack byte
        MAGIC + b"\x01" + msgpack.packb(42),
        MAGIC + b"\x01" + msgpack.packb(["too", "short"]),
        MAGIC + b"\x01" + msgpack.packb(list(range(16))),  # one field too many for v1
    ],
)
def test_corrupt_or_foreign_bytes(data: bytes) -> None:
    with pytest.raises(SplitFormatError):
        deserialize_split(data)


def test_truncated_bytes() -> None:
    data = serialize_split(_split(partition=("x" * 50,)))
    for cut in (len(MAGIC) + 2, len(data) // 2, len(data) - 1):
        with pytest.raises(SplitFormatError):
            deserialize_split(data[:cut])


def test_trailing_garbage() -> None:
    with pytest.raises(SplitFormatError):
        deserialize_split(serialize_split(_split()) + b"\x00")


def test_corrupt_delete_file_entry() -> None:
    fields = msgpack.unpackb(serialize_split(_split())[len(MAGIC) + 1:])
    fields[13] = [["/d.parquet", 1]]  # a delete file with two of its ten fields
    with pytest.raises(SplitFormatError):
        deserialize_split(MAGIC + b"\x01" + msgpack.packb(fields))


def test_split_from_obj_rejects_non_payloads() -> None:
    for obj in (None, 5, [1], [99, []]):
        with pytest.raises(SplitFormatError):
            split_from_obj(obj)
