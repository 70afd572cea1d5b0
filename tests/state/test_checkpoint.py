"""Checkpoint format: round trips, golden bytes, every kind of bad bytes, validate_for."""

from __future__ import annotations

import dataclasses
import json
import logging
import struct
import zlib
from pathlib import Path

import msgpack
import pytest

from icefloe.errors import (
    CheckpointCorruptError,
    CheckpointMismatchError,
    CheckpointVersionError,
    TableReplacedError,
)
from icefloe.state import Checkpoint, Position, decode, encode, plan_fingerprint, validate_for
from icefloe.state.checkpoint import CURRENT_VERSION, HEADER_SIZE, MAGIC

GOLDEN_V1 = Path(__file__).parent / "golden" / "checkpoint_v1.bin"
GOLDEN_V2 = Path(__file__).parent / "golden" / "checkpoint_v2.bin"
GOLDEN_V3 = Path(__file__).parent / "golden" / "checkpoint_v3.bin"
BIG = 8765432101234567890
FP = plan_fingerprint(None, True, 128 * 1024 * 1024)


def _ckpt(**changes: object) -> Checkpoint:
    fields: dict[str, object] = dict(
        table="ns.events", table_identity="uuid-1", ref="main", plan_fingerprint=FP,
        position=Position("incremental", 11, 3, 2), acked_beyond=("11-aa", "11-bb"),
        offsets=(("11-cc", 17),), nessie_hashes=((11, "hash11"),), created_ms=1_000,
        writer="icefloe 0.1.0",
    )
    fields.update(changes)
    return Checkpoint(**fields)  # type: ignore[arg-type]


def test_golden_v1_reads_back_every_field() -> None:
    ckpt = decode(GOLDEN_V1.read_bytes())
    assert ckpt.table == "demo.sub.events"
    assert ckpt.table_identity == "3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
    assert ckpt.ref == "main"
    assert ckpt.plan_fingerprint == "pf1-0123456789abcdef"
    assert ckpt.position == Position("scan", BIG, 42, 7)
    assert ckpt.acked_beyond == (f"{BIG}-00112233445566778899", f"{BIG}-aabb")
    assert ckpt.offsets == ((f"{BIG}-ccdd", 1234), (f"{BIG}-eeff", 0))
    assert ckpt.nessie_hashes == (
        (BIG, "2e1cfa82b035c26cbbbdae632cea070514eb8b773f616aaeaf668e2f0be8f10d"),
        (123, "abcdef0123456789"),
    )
    assert ckpt.created_ms == 1_717_171_717_171
    assert ckpt.writer == "icefloe 0.1.0"
    # the newest writer still produces exactly these bytes while version 1 is current
    if CURRENT_VERSION == 1:
        assert encode(ckpt) == GOLDEN_V1.read_bytes()


def test_golden_v1_has_no_stream_schema_and_v2_adds_it() -> None:
    v1 = decode(GOLDEN_V1.read_bytes())
    v2 = decode(GOLDEN_V2.read_bytes())
    assert (v1.schema_id, v1.schema_since) == (None, None)
    assert (v2.schema_id, v2.schema_since) == (3, 41)
    assert dataclasses.replace(v2, schema_id=None, schema_since=None) == v1


def test_golden_v2_has_no_watermark_and_v3_adds_it() -> None:
    v2 = decode(GOLDEN_V2.read_bytes())
    v3 = decode(GOLDEN_V3.read_bytes())
    assert v2.watermark_ms is None
    assert v3.watermark_ms == 1_700_000_000_789
    assert dataclasses.replace(v3, watermark_ms=None) == v2
    assert CURRENT_VERSION == 3
    assert encode(v3) == GOLDEN_V3.read_bytes()


def test_fingerprint_without_event_time_is_the_one_written_before_it() -> None:
    # checkpoints written before watermarkColumn existed keep matching a read without it
    assert plan_fingerprint(None, True, 128 * 1024 * 1024) == "pf1-" + __import__(
        "hashlib").blake2b(b"[1,null,true,134217728]", digest_size=8).hexdigest()
    assert plan_fingerprint(None, True, 1024, ("ts", "fail")) != plan_fingerprint(
        None, True, 1024)
    assert plan_fingerprint(None, True, 1024, ("ts", "fail")) != plan_fingerprint(
        None, True, 1024, ("ts", "last"))


def test_round_trip_and_layout() -> None:
    for ckpt in (
        _ckpt(),
        _ckpt(position=Position.beginning(), acked_beyond=(), offsets=(), nessie_hashes=()),
        _ckpt(position=Position.after(2**64 - 1, 2**40)),
        _ckpt(position=Position("scan", 5, 1, 0), table="t", acked_beyond=["5-x"]),
        _ckpt(schema_id=0, schema_since=0),
        _ckpt(watermark_ms=-5),
    ):
        data = encode(ckpt)
        assert data[:4] == MAGIC
        assert data[4] == CURRENT_VERSION
        assert struct.unpack(">I", data[5:9])[0] == zlib.crc32(data[4:5] + data[9:])
        assert decode(data) == ckpt
        assert isinstance(decode(data).acked_beyond, tuple)


def test_defaults_fill_created_and_writer() -> None:
    ckpt = Checkpoint("ns.t", "id", "main", FP, Position.beginning())
    assert ckpt.created_ms > 1_600_000_000_000
    assert ckpt.writer.startswith("icefloe ")
    assert decode(encode(ckpt)) == ckpt
    with pytest.raises(ValueError, match="negative"):
        _ckpt(offsets=(("a", -1),))
    with pytest.raises(TypeError):
        _ckpt(position=[1, 2])


@pytest.mark.parametrize("length", [0, 1, 3, 4, 5, 8, 9, 10, 20, -20, -2, -1])
def test_truncated_is_corrupt(length: int) -> None:
    data = encode(_ckpt())
    with pytest.raises(CheckpointCorruptError):
        decode(data[:length])


def test_every_flipped_byte_is_corrupt() -> None:
    data = encode(_ckpt())
    for i in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[i] ^= mask
            with pytest.raises(CheckpointCorruptError):
                decode(bytes(bad))


@pytest.mark.parametrize("data", [
    b"", b"PK\x03\x04" + b"\x00" * 40, b"IFSP\x01" + b"\x00" * 20, b"{\"json\": true}",
    b"\x00" * 100,
])
def test_foreign_bytes_are_corrupt(data: bytes) -> None:
    with pytest.raises(CheckpointCorruptError):
        decode(data)


def _frame(version: int, payload: bytes) -> bytes:
    body = bytes([version]) + payload
    return MAGIC + body[:1] + struct.pack(">I", zlib.crc32(body)) + body[1:]


def test_future_version_is_a_version_error() -> None:
    data = _frame(CURRENT_VERSION + 1, msgpack.packb({"anything": "new"}))
    with pytest.raises(CheckpointVersionError) as info:
        decode(data)
    message = str(info.value)
    assert "newer icefloe" in message and "[1, 2, 3]" in message and "upgrade" in message


def test_unknown_old_version_and_bad_payloads_are_corrupt() -> None:
    good = msgpack.unpackb(encode(_ckpt())[HEADER_SIZE:])
    with pytest.raises(CheckpointCorruptError, match="version 0"):
        decode(_frame(0, msgpack.packb(good)))
    for bad in (
        b"\xc1",  # never-used msgpack byte
        msgpack.packb(good) + b"\x00",  # trailing data
        msgpack.packb([1, 2, 3]),
        msgpack.packb({k: v for k, v in good.items() if k != "ref"}),
        msgpack.packb({**good, "offsets": [["a", "not a number"]]}),
        msgpack.packb({**good, "created_ms": True}),
        msgpack.packb({**good, "position": ["sideways", 1, 1, None]}),
    ):
        with pytest.raises(CheckpointCorruptError, match="undecodable"):
            decode(_frame(1, bad))


def test_display_dict_is_json_with_nessie_keys() -> None:
    shown = _ckpt(table="demo.sub.events", position=Position.after(BIG, 42)).to_display_dict()
    json.dumps(shown)  # JSON-able
    assert shown["lastAckedSnapshotID"] == str(BIG)
    assert shown["lastAckedSnapshotSequence"] == 42
    assert shown["branch"] == "main"
    assert shown["namespace"] == "demo.sub"
    assert shown["table"] == "events"
    assert shown["identifier"] == "demo.sub.events"
    assert shown["table_identity"] == "uuid-1"
    assert shown["plan_fingerprint"] == FP
    assert shown["position"]["snapshot_id"] == str(BIG)
    assert shown["acked_beyond"] == ["11-aa", "11-bb"]
    assert shown["offsets"] == {"11-cc": 17}
    assert shown["nessie_hashes"] == {"11": "hash11"}
    assert shown["created_ms"] == 1_000 and shown["writer"] == "icefloe 0.1.0"
    inside = _ckpt(table="events").to_display_dict()
    assert inside["lastAckedSnapshotID"] is None and inside["lastAckedSnapshotSequence"] is None
    assert (inside["namespace"], inside["table"]) == ("", "events")


def test_plan_fingerprint_is_stable_and_sensitive() -> None:
    base = plan_fingerprint("id > 5", True, 1024)
    assert base == plan_fingerprint("id > 5", True, 1024)
    assert plan_fingerprint(None, True, 1024) == plan_fingerprint("  ", True, 1024)
    others = {plan_fingerprint("id > 6", True, 1024), plan_fingerprint("id > 5", False, 1024),
              plan_fingerprint("id > 5", True, 2048), plan_fingerprint(None, True, 1024)}
    assert base not in others and len(others) == 4


def test_validate_for_accepts_the_same_read() -> None:
    validate_for(_ckpt(), "ns.events", "uuid-1", "main", FP)


def test_validate_for_rejects_other_table_ref_and_replaced_table() -> None:
    with pytest.raises(CheckpointMismatchError, match=r"ns\.other"):
        validate_for(_ckpt(), "ns.other", "uuid-1", "main", FP)
    with pytest.raises(CheckpointMismatchError, match="'dev'"):
        validate_for(_ckpt(), "ns.events", "uuid-1", "dev", FP)
    with pytest.raises(TableReplacedError, match="dropped and re-created"):
        validate_for(_ckpt(), "ns.events", "uuid-2", "main", FP)


def test_validate_for_changed_plan_options(caplog: pytest.LogCaptureFixture) -> None:
    other = plan_fingerprint("id > 1", True, 1024)
    # inside a unit, or with acks beyond the position: split ids would not match
    with pytest.raises(CheckpointMismatchError, match="planning options"):
        validate_for(_ckpt(), "ns.events", "uuid-1", "main", other)
    boundary = Position.after(11, 3)
    with pytest.raises(CheckpointMismatchError):
        validate_for(_ckpt(position=boundary, offsets=()), "ns.events", "uuid-1", "main", other)
    with pytest.raises(CheckpointMismatchError):
        validate_for(_ckpt(position=boundary, acked_beyond=()), "ns.events", "uuid-1", "main",
                     other)
    # at a unit boundary with nothing beyond it: safe
    with caplog.at_level(logging.INFO, logger="icefloe.state.checkpoint"):
        validate_for(_ckpt(position=boundary, acked_beyond=(), offsets=()), "ns.events",
                     "uuid-1", "main", other)
    assert "safe" in caplog.text
