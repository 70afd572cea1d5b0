"""The compiled manifest decoder (``icefloe.enumerator._native_manifest``) against
PyIceberg's manifest reading.

Oracle: ``ManifestFile.fetch_manifest_entry`` (PyIceberg's records, statuses and
sequence-number inheritance), compared field by field with every column of the record
batch; the raw partition bytes are decoded with PyIceberg's reader of the file's own
partition type and must be consumed exactly. Manifests here are written by PyIceberg:
v1 / v2; null / deflate / zstandard; identity partitions of every primitive type with
nulls and every transform (year, month, day, hour, bucket, truncate, void); ADDED /
EXISTING / DELETED entries; explicit and null sequence numbers; with and without stats
and split offsets. The Java tier's manifests (v1, v2, v3, identity and bucket partitions
of every type, every stats type Java writes) are checked by
``tests/interop/test_native_manifest.py`` with the same oracle (:func:`assert_decodes`).

Skipped where the extension was not built (no compiler): planning then uses the
pure-Python decoder (see ``hatch_build.py``); ``tests/test_wheel.py`` checks the wheel.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import threading
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.avro.decoder import new_decoder
from pyiceberg.avro.resolver import construct_reader
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

from icefloe.enumerator.manifest_decoder import open_avro
from icefloe.splits.split import split_id_maker
from tests.helpers.manifests import manifest_entries, write_all_types_manifest

if os.environ.get("ICEFLOE_NATIVE_BUILD") == "1":  # CI: the build must have compiled it
    import icefloe.enumerator._native_manifest as native
else:
    native = pytest.importorskip("icefloe.enumerator._native_manifest",
                                 reason="the C manifest decoder was not built (no compiler)")

IO = PyArrowFileIO()


def _read(manifest: ManifestFile) -> bytes:
    with IO.new_input(manifest.manifest_path).open() as f:
        return bytes(f.read())


def partition_reader(content: bytes) -> Any:
    """PyIceberg's reader of the manifest's partition record, from its writer schema."""
    _, header, _ = open_avro(content)
    entry = json.loads(header.meta["avro.schema"])
    data_file = next(f["type"] for f in entry["fields"] if f.get("field-id") == 2)
    partition = next(f["type"] for f in data_file["fields"] if f.get("field-id") == 102)
    return construct_reader(AvroSchemaConversion().avro_to_iceberg(partition).as_struct())


def _plain(value: Any) -> Any:
    """A value comparable with ==: NaN as a marker, records as tuples."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def _stat(stats: Any, key: int) -> Any:
    return None if stats is None else dict(stats.items()).get(key)


def expected_rows(manifest: ManifestFile, *, added_only: bool, stats_ids: tuple[int, ...]
                  ) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    """PyIceberg's entries of ``manifest`` that the contract keeps, as the batch's rows
    (less the partition) and their partition values."""
    rows, partitions = [], []
    for e in manifest.fetch_manifest_entry(IO, discard_deleted=False):
        if added_only:
            if e.status != ManifestEntryStatus.ADDED or e.snapshot_id != manifest.added_snapshot_id:
                continue
        elif e.status == ManifestEntryStatus.DELETED:
            continue
        f = e.data_file
        row = {"file_path": f.file_path, "file_format": f.file_format.name,
               "record_count": f.record_count, "file_size": f.file_size_in_bytes,
               "split_offsets": None if f.split_offsets is None else list(f.split_offsets),
               "sequence_number": e.sequence_number}
        for k in stats_ids:
            row[f"value_count_{k}"] = _stat(f.value_counts, k)
            row[f"null_count_{k}"] = _stat(f.null_value_counts, k)
            row[f"nan_count_{k}"] = _stat(f.nan_value_counts, k)
            row[f"lower_{k}"] = _stat(f.lower_bounds, k)
            row[f"upper_{k}"] = _stat(f.upper_bounds, k)
        rows.append(row)
        partitions.append(tuple(_plain(f.partition[i]) for i in range(len(f.partition))))
    return rows, partitions


def decode(content: bytes, manifest: ManifestFile, *, added_only: bool = False,
           stats_ids: tuple[int, ...] = ()) -> pa.RecordBatch:
    return native.decode_manifest(content, manifest_seq=manifest.sequence_number,
                                  added_by=manifest.added_snapshot_id, added_only=added_only,
                                  stats_ids=stats_ids)


def assert_decodes(manifest: ManifestFile, content: bytes, *, added_only: bool,
                   stats_ids: tuple[int, ...]) -> pa.RecordBatch:
    """The decoder's batch of ``manifest`` equals PyIceberg's entries, field by field."""
    batch = decode(content, manifest, added_only=added_only, stats_ids=stats_ids)
    batch.validate(full=True)
    expected, partitions = expected_rows(manifest, added_only=added_only, stats_ids=stats_ids)
    names = [f.name for f in native.BASE_COLUMNS]
    for k in stats_ids:
        names += [f"value_count_{k}", f"null_count_{k}", f"nan_count_{k}", f"lower_{k}",
                  f"upper_{k}"]
    assert batch.schema.names == names
    assert [f.type for f in batch.schema][:7] == [f.type for f in native.BASE_COLUMNS]
    got = batch.to_pylist()
    where = manifest.manifest_path
    assert len(got) == len(expected), where
    reader = partition_reader(content)
    for i, (row, want, partition) in enumerate(zip(got, expected, partitions, strict=True)):
        raw = row.pop("partition")
        assert row == want, f"{where} row {i}"
        decoder = new_decoder(raw)
        record = reader.read(decoder)
        assert decoder.tell() == len(raw), f"{where} row {i}: partition bytes not exact"
        values = tuple(_plain(record[j]) for j in range(len(record)))
        assert values == partition, f"{where} row {i}"
    return batch


CASES = [(1, 0, "null"), (1, 0, "deflate"), (2, 5, "null"), (2, 5, "deflate"),
         (2, 0, "deflate"), (2, 5, "zstandard")]


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, int, str],
                                                                 tuple[ManifestFile, bytes]]:
    root = tmp_path_factory.mktemp("native-manifests")
    out = {}
    for version, seq, codec in CASES:
        manifest = write_all_types_manifest(root / f"m-{version}-{seq}-{codec}.avro", version,
                                            codec, manifest_entries(version, DataFileContent.DATA),
                                            seq)
        out[version, seq, codec] = manifest, _read(manifest)
    return out


@pytest.mark.parametrize("stats_ids", [(), (1, 4, 12, 99)])
@pytest.mark.parametrize("added_only", [False, True])
@pytest.mark.parametrize("case", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_decoder_equals_pyiceberg(manifests: dict[Any, Any], case: tuple[int, int, str],
                                  added_only: bool, stats_ids: tuple[int, ...]) -> None:
    manifest, content = manifests[case]
    batch = assert_decodes(manifest, content, added_only=added_only, stats_ids=stats_ids)
    seqs = set(batch.column("sequence_number").to_pylist())
    if not added_only:
        assert batch.num_rows == 8  # DELETED entries dropped
    if case[0] == 1:
        assert seqs == {0}
    elif not added_only:  # ADDED inherit; explicit keep theirs; null EXISTING ones stay null
        assert (case[1] in seqs and None in seqs) or case[1] == 0
    if stats_ids:
        assert batch.column("lower_4").null_count not in (0, batch.num_rows)
        assert batch.column("value_count_99").null_count == batch.num_rows
    if not added_only:
        assert 0 < batch.column("split_offsets").null_count < batch.num_rows


TRANSFORMS_SCHEMA = Schema(
    NestedField(1, "ts", TimestampType(), required=False),
    NestedField(2, "d", DateType(), required=False),
    NestedField(3, "tstz", TimestamptzType(), required=False),
    NestedField(4, "bin", BinaryType(), required=False),
    NestedField(5, "l", LongType(), required=False),
    NestedField(6, "dec", DecimalType(38, 10), required=False),
    NestedField(7, "s", StringType(), required=False),
    NestedField(8, "u", UUIDType(), required=False),
    NestedField(9, "i", IntegerType(), required=False),
)
TRANSFORMS_SPEC = PartitionSpec(
    PartitionField(1, 1000, YearTransform(), "ts_year"),
    PartitionField(2, 1001, MonthTransform(), "d_month"),
    PartitionField(3, 1002, DayTransform(), "tstz_day"),
    PartitionField(1, 1003, HourTransform(), "ts_hour"),
    PartitionField(4, 1004, TruncateTransform(3), "bin_trunc"),
    PartitionField(5, 1005, TruncateTransform(100), "l_trunc"),
    PartitionField(6, 1006, TruncateTransform(50), "dec_trunc"),
    PartitionField(7, 1007, BucketTransform(16), "s_bucket"),
    PartitionField(8, 1008, BucketTransform(4), "u_bucket"),
    PartitionField(9, 1009, VoidTransform(), "i_void"),
    spec_id=7,
)


@pytest.mark.parametrize("version", [1, 2])
def test_every_partition_transform(tmp_path: Any, version: int) -> None:
    """Year, month, day, hour, truncate (binary, long, decimal), bucket and void
    partitions, with nulls: the raw partition bytes decode to PyIceberg's values."""
    values = [Record(54, 648, 19_723, 473_352, b"abc", 1_200, Decimal("12.3400000000"), 3, 1,
                     None),
              Record(*([None] * 10)),
              Record(-1, -1, -1, -1, b"", -100, Decimal("-0.5000000000"), 15, 0, None)]
    path = tmp_path / "t.avro"
    with write_manifest(version, TRANSFORMS_SPEC, TRANSFORMS_SCHEMA,  # type: ignore[arg-type]
                        IO.new_output(str(path)), 9, "deflate") as writer:
        for i in range(9):
            df = DataFile.from_args(content=DataFileContent.DATA, file_path=f"s3://b/{i}.orc",
                                    file_format=FileFormat.ORC,
                                    partition=values[i % len(values)], record_count=i,
                                    file_size_in_bytes=100 + i)
            df.spec_id = TRANSFORMS_SPEC.spec_id
            writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED,
                                                     snapshot_id=9, data_file=df))
    manifest = writer.to_manifest_file()
    manifest.sequence_number = 0 if version == 1 else 4
    batch = assert_decodes(manifest, path.read_bytes(), added_only=False, stats_ids=(5,))
    assert batch.num_rows == 9 and len(set(batch.column("partition").to_pylist())) == 3


def test_added_only_keeps_the_manifests_own_added_entries(manifests: dict[Any, Any]) -> None:
    """With ``added_only``, EXISTING entries and ADDED entries of another snapshot go."""
    manifest, content = manifests[2, 5, "deflate"]
    live = decode(content, manifest).column("file_path").to_pylist()
    own = decode(content, manifest, added_only=True).column("file_path").to_pylist()
    other = native.decode_manifest(content, manifest_seq=5, added_by=12345, added_only=True,
                                   stats_ids=())
    # the entries with a null snapshot id inherit the manifest's: any snapshot takes them
    assert 0 < len(own) < len(live) and set(own) <= set(live)
    assert 0 < other.num_rows < len(own)


def test_errors_are_typed(manifests: dict[Any, Any]) -> None:
    manifest, content = manifests[2, 5, "null"]
    _, deflated = manifests[2, 5, "deflate"]
    offset = native._core.header(content)[3]
    with pytest.raises(ValueError, match="not an Avro file"):
        decode(b"PAR1" + b"\x00" * 64, manifest)
    with pytest.raises(EOFError):
        decode(content[:offset - 3], manifest)  # inside the header
    for cut in (offset + 3, len(content) // 2, len(content) - 20):  # inside a block
        with pytest.raises(EOFError):
            decode(content[:cut], manifest)
    with pytest.raises(EOFError):
        decode(deflated[:len(deflated) // 2], manifest)
    bad_sync = bytearray(content)
    bad_sync[-16] ^= 0xFF
    with pytest.raises(ValueError, match="bad sync marker"):
        decode(bytes(bad_sync), manifest)
    codec = content.replace(b"\x14avro.codec\x08null", b"\x14avro.codec\x08lzma")
    assert codec != content
    with pytest.raises(ValueError, match="Unsupported codec: lzma"):
        decode(codec, manifest)
    corrupt = bytearray(deflated)
    corrupt[offset + 40: offset + 60] = b"\xff" * 20
    with pytest.raises((ValueError, EOFError)):
        decode(bytes(corrupt), manifest)
    # an entry whose status is 7: the first entry's first byte (status 1 -> zigzag 2)
    assert content[offset] == 2  # PyIceberg writes one entry a block
    size_len = next(i for i, b in enumerate(content[offset + 1:], 1) if b < 0x80)
    at = offset + 1 + size_len
    assert content[at] in (0, 2, 4)
    bad_status = content[:at] + bytes([14]) + content[at + 1:]
    with pytest.raises(ValueError, match="unknown manifest entry status 7"):
        decode(bad_status, manifest)


def test_a_manifest_without_blocks_and_trailing_bytes(manifests: dict[Any, Any]) -> None:
    manifest, content = manifests[2, 5, "null"]
    offset = native._core.header(content)[3]
    empty = decode(content[:offset], manifest, stats_ids=(1,))
    assert empty.num_rows == 0 and empty.schema.names[-1] == "upper_1"
    # fewer than 16 bytes after the last block: no more blocks, as avro_blocks reads it
    assert decode(content + b"\x00" * 5, manifest).num_rows == 8


def test_threads_decode_at_once_and_agree(manifests: dict[Any, Any]) -> None:
    """Many manifests decoded from 4 threads at once give what one thread gives."""
    work = [(m, c, stats) for m, c in manifests.values() for stats in ((), (1, 4))] * 15
    want = [decode(c, m, stats_ids=s) for m, c, s in work]
    results: list[list[pa.RecordBatch]] = [[] for _ in range(4)]
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def run(slot: int) -> None:
        try:
            start.wait()
            results[slot] = [decode(c, m, stats_ids=s) for m, c, s in work]
        except BaseException as exc:  # reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for got in results:
        assert len(got) == len(want)
        assert all(g.equals(w) for g, w in zip(got, want, strict=True))


def test_split_ids_equal_split_id_maker() -> None:
    rng = random.Random(31)
    paths = [f"s3://bucket/t/data/{'é' * (i % 3)}part-{i:05d}-{'x' * rng.randrange(200)}.parquet"
             for i in range(50)]
    for snapshot_id in (1, 1_234_567_890_123_456_789, -42):
        maker = split_id_maker(snapshot_id)
        n = 500
        index = np.array([rng.randrange(len(paths)) for _ in range(n)], dtype=np.int64)
        starts = np.array([rng.randrange(1 << 40) for _ in range(n)], dtype=np.int64)
        lengths = np.array([rng.randrange(1, 1 << 30) for _ in range(n)], dtype=np.int64)
        ids = native.split_ids(snapshot_id, pa.array(paths).slice(0), index, starts, lengths)
        want = [maker(paths[i], int(s), int(ln)) for i, s, ln in zip(index, starts, lengths,
                                                                      strict=True)]
        assert ids.to_pylist() == want
    # and against hashlib directly, for the format itself
    digest = hashlib.blake2b(b"7|p|0|10", digest_size=10).hexdigest()
    one = native.split_ids(7, pa.array(["p"]), np.zeros(1, np.int64), np.zeros(1, np.int64),
                           np.full(1, 10, np.int64))
    assert one.to_pylist() == [f"7-{digest}"]
    sliced = pa.array(["a", "b", "c"]).slice(1)
    got = native.split_ids(7, sliced, np.array([1], np.int64), np.zeros(1, np.int64),
                           np.ones(1, np.int64))
    assert got.to_pylist() == [split_id_maker(7)("c", 0, 1)]
    with pytest.raises(ValueError, match="out of range"):
        native.split_ids(7, sliced, np.array([2], np.int64), np.zeros(1, np.int64),
                         np.ones(1, np.int64))


def test_mutated_manifests_raise_typed_errors(manifests: dict[Any, Any]) -> None:
    """Random byte flips, cuts and insertions (in the header or the blocks) give a valid
    batch or ValueError / EOFError: never a crash, another error or an invalid array."""
    rng = random.Random(3108)
    contents = [content for _, content in manifests.values()]
    outcomes: set[str] = set()
    for i in range(600):
        data = bytearray(rng.choice(contents))
        start = 0 if i % 3 == 0 else native._core.header(bytes(data))[3]
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(start, len(data))
            kind = rng.randrange(3)
            if kind == 0:
                data[at] = rng.randrange(256)
            elif kind == 1:
                del data[at:at + rng.randrange(1, 40)]
            else:
                data[at:at] = rng.randbytes(rng.randrange(1, 10))
        try:
            batch = native.decode_manifest(bytes(data), manifest_seq=5, added_by=77,
                                           added_only=i % 2 == 0, stats_ids=(1, 4))
        except (ValueError, EOFError) as exc:
            outcomes.add(type(exc).__name__)
        else:
            batch.validate(full=True)
            outcomes.add("ok")
    assert {"ok", "ValueError", "EOFError"} <= outcomes
