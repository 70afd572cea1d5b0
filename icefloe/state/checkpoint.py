"""Checkpoint: the durable value a continuous read restarts from, and its versioned format.

A checkpoint never holds split bytes. Planning is deterministic, so on restore the
enumerator re-plans from the committed ``position`` (exclusive) and, while doing so,
skips the splits named in ``acked_beyond`` and resumes the ones in ``offsets`` at
their record offset. A checkpoint therefore stays small however big the table.

Durable layout (every version ever written stays readable)::

    b"IFCK" | version (1 byte) | CRC32, 4 bytes big-endian | payload (msgpack)

The CRC32 covers the version byte *and* the payload, so one flipped bit anywhere
after the magic is reported as corruption, never mistaken for a future version.
That frame is fixed for all versions; only the payload changes. Version 1's payload
is a msgpack map with string keys (the field names below); ``position`` is
:meth:`Position.to_obj`, whose layout is part of checkpoint version 1. Version 2 adds
``schema_id`` and ``schema_since`` (the stream schema at the position, see
:mod:`icefloe.enumerator.schema_track`); a version-1 checkpoint restores without one.
Version 3 adds ``watermark_ms`` (event time, ``watermarkColumn``: the stream's watermark
when it was written, so a restart never emits a smaller one); older versions restore
without one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from typing import Any

from icefloe.errors import (
    CheckpointCorruptError,
    CheckpointMismatchError,
    CheckpointVersionError,
    TableReplacedError,
)
from icefloe.splits.serde import pack_value, unpack_value
from icefloe.state.position import Position

log = logging.getLogger(__name__)

MAGIC = b"IFCK"
CURRENT_VERSION = 3
_CRC = struct.Struct(">I")
HEADER_SIZE = len(MAGIC) + 1 + _CRC.size


def default_writer() -> str:
    """``"icefloe <version>"`` of the installed package."""
    try:
        return f"icefloe {importlib_metadata.version('icefloe')}"
    except importlib_metadata.PackageNotFoundError:  # pragma: no cover - source checkout
        return "icefloe (unknown version)"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where a continuous read of one table's ref stands, as acknowledged by the sink.

    Attributes:
        table: the table identifier as configured (``"ns.events"``).
        table_identity: the table uuid (or Nessie content id) of the incarnation read.
        ref: the branch / tag followed.
        plan_fingerprint: :func:`plan_fingerprint` of the planning options in force.
        position: the committed position (exclusive): everything before it is acked.
        acked_beyond: ids of splits after ``position`` that are fully acknowledged
            (out-of-order acks); a restored enumerator skips them.
        offsets: ``(split id, records)`` for splits after ``position`` of which the first
            ``records`` source records are acknowledged; a restored enumerator resumes
            them with ``split.with_position(records)``.
        nessie_hashes: ``(snapshot id, Nessie commit hash)`` the snapshots were seen at
            (empty for non-Nessie catalogs).
        created_ms: wall-clock creation time, epoch milliseconds.
        writer: the software that wrote it (``"icefloe 0.1.0"``).
        schema_id: the schema the stream read in at ``position`` (None: written before
            icefloe tracked schemas, or not a stream).
        schema_since: sequence number up to which snapshots predate that schema (read in
            it, never a change); set with ``schema_id``.
        watermark_ms: the stream's event-time watermark when written (``watermarkColumn``;
            None: no watermark yet, or written before icefloe had them).

    Sequence fields are normalized to tuples, so lists are accepted.
    """

    table: str
    table_identity: str
    ref: str
    plan_fingerprint: str
    position: Position
    acked_beyond: tuple[str, ...] = ()
    offsets: tuple[tuple[str, int], ...] = ()
    nessie_hashes: tuple[tuple[int, str], ...] = ()
    created_ms: int = field(default_factory=_now_ms)
    writer: str = field(default_factory=default_writer)
    schema_id: int | None = None
    schema_since: int | None = None
    watermark_ms: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.position, Position):
            raise TypeError(f"position must be a Position, got {type(self.position).__name__}")
        object.__setattr__(self, "acked_beyond", tuple(self.acked_beyond))
        object.__setattr__(self, "offsets", tuple((s, int(n)) for s, n in self.offsets))
        object.__setattr__(self, "nessie_hashes",
                           tuple((int(s), h) for s, h in self.nessie_hashes))
        for split_id, records in self.offsets:
            if records < 0:
                raise ValueError(f"offset of split {split_id} is negative: {records}")

    @property
    def namespace_and_name(self) -> tuple[str, str]:
        """The identifier split at its last dot (``"a.b.t"`` -> ``("a.b", "t")``)."""
        namespace, _, name = self.table.rpartition(".")
        return namespace, name

    def to_display_dict(self) -> dict[str, Any]:
        """A JSON-able view for humans and tools (``icefloe checkpoint``).

        Holds every field (snapshot ids as strings; the full identifier under
        ``identifier``, since ``table`` takes the Nessie design's meaning) plus the
        Nessie incremental design's payload keys: ``lastAckedSnapshotID`` (string, the
        position's last complete snapshot; None while the position is inside the
        first unit it names, where the previous snapshot is not recorded),
        ``lastAckedSnapshotSequence`` (int, None in the same case), ``branch``,
        ``namespace`` and ``table`` (the identifier split at its last dot).
        """
        pos = self.position
        namespace, name = self.namespace_and_name
        last = pos.last_complete_snapshot_id
        return {
            "identifier": self.table,
            "table_identity": self.table_identity,
            "ref": self.ref,
            "plan_fingerprint": self.plan_fingerprint,
            "position": {
                "phase": pos.phase,
                "snapshot_id": None if pos.snapshot_id is None else str(pos.snapshot_id),
                "sequence_number": pos.sequence_number,
                "next_ordinal": pos.next_ordinal,
                "description": pos.describe(),
            },
            "acked_beyond": list(self.acked_beyond),
            "offsets": {split_id: records for split_id, records in self.offsets},
            "nessie_hashes": {str(snap): commit for snap, commit in self.nessie_hashes},
            "created_ms": self.created_ms,
            "created": dt.datetime.fromtimestamp(self.created_ms / 1000, tz=dt.UTC).isoformat(),
            "writer": self.writer,
            "schema_id": self.schema_id,
            "schema_since": self.schema_since,
            "watermark_ms": self.watermark_ms,
            "lastAckedSnapshotID": None if last is None else str(last),
            "lastAckedSnapshotSequence": None if last is None else pos.sequence_number,
            "branch": self.ref,
            "namespace": namespace,
            "table": name,
        }


def plan_fingerprint(filter: str | None, case_sensitive: bool, split_size: int,
                     event_time_order: tuple[str, str] | None = None) -> str:
    """Digest of the options that change which splits planning yields, their ids and
    ordinals.

    Same inputs -> same string in any process. ``None`` and a blank filter are the
    same (no filter); any other textual difference counts as a change (conservative).
    ``event_time_order`` is ``(watermarkColumn, watermarkMissingStats)``: it renumbers a
    unit's ordinals (:mod:`icefloe.enumerator.event_time`). Without it the digest is the
    one icefloe wrote before event time existed, so those checkpoints keep their meaning.
    """
    text = (filter or "").strip() or None
    fields: list[Any] = [1, text, bool(case_sensitive), int(split_size)]
    if event_time_order is not None:
        fields = [2, *fields[1:], list(event_time_order)]
    canonical = json.dumps(fields, separators=(",", ":"))
    return "pf1-" + hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()


# -- durable format ------------------------------------------------------------------


def _payload_v3(ckpt: Checkpoint) -> dict[str, Any]:
    return {**_payload_v2(ckpt), "watermark_ms": ckpt.watermark_ms}


def _payload_v2(ckpt: Checkpoint) -> dict[str, Any]:
    return {
        "table": ckpt.table,
        "table_identity": ckpt.table_identity,
        "ref": ckpt.ref,
        "plan_fingerprint": ckpt.plan_fingerprint,
        "position": ckpt.position.to_obj(),
        "acked_beyond": list(ckpt.acked_beyond),
        "offsets": [[s, n] for s, n in ckpt.offsets],
        "nessie_hashes": [[s, h] for s, h in ckpt.nessie_hashes],
        "created_ms": ckpt.created_ms,
        "writer": ckpt.writer,
        "schema_id": ckpt.schema_id,
        "schema_since": ckpt.schema_since,
    }


def _expect(value: Any, kind: type, what: str) -> Any:
    if not isinstance(value, kind):
        raise TypeError(f"{what} has type {type(value).__name__}")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} has type {type(value).__name__}")
    return value


def _read_v1(payload: Any) -> Checkpoint:
    obj = _expect(payload, dict, "payload")
    pos = Position.from_obj(_expect(obj["position"], list, "position"))
    if pos.snapshot_id is not None:
        _int(pos.snapshot_id, "position snapshot id")
    _int(pos.sequence_number, "position sequence number")
    if pos.next_ordinal is not None:
        _int(pos.next_ordinal, "position ordinal")
    return Checkpoint(
        table=_expect(obj["table"], str, "table"),
        table_identity=_expect(obj["table_identity"], str, "table_identity"),
        ref=_expect(obj["ref"], str, "ref"),
        plan_fingerprint=_expect(obj["plan_fingerprint"], str, "plan_fingerprint"),
        position=pos,
        acked_beyond=tuple(_expect(s, str, "acked split id")
                           for s in _expect(obj["acked_beyond"], list, "acked_beyond")),
        offsets=tuple((_expect(s, str, "offset split id"), _int(n, "offset"))
                      for s, n in _expect(obj["offsets"], list, "offsets")),
        nessie_hashes=tuple((_int(s, "snapshot id"), _expect(h, str, "Nessie hash"))
                            for s, h in _expect(obj["nessie_hashes"], list, "nessie_hashes")),
        created_ms=_int(obj["created_ms"], "created_ms"),
        writer=_expect(obj["writer"], str, "writer"),
    )


def _read_v2(payload: Any) -> Checkpoint:
    obj = _expect(payload, dict, "payload")
    schema_id, since = obj["schema_id"], obj["schema_since"]
    if schema_id is not None:
        _int(schema_id, "schema_id")
        _int(since, "schema_since")
    return dataclasses.replace(_read_v1(payload), schema_id=schema_id, schema_since=since)


def _read_v3(payload: Any) -> Checkpoint:
    watermark = _expect(payload, dict, "payload")["watermark_ms"]
    if watermark is not None:
        _int(watermark, "watermark_ms")
    return dataclasses.replace(_read_v2(payload), watermark_ms=watermark)


# version -> payload reader; never remove an entry
_READERS: dict[int, Callable[[Any], Checkpoint]] = {1: _read_v1, 2: _read_v2, 3: _read_v3}


def _crc(version_and_payload: bytes) -> int:
    return zlib.crc32(version_and_payload) & 0xFFFFFFFF


def encode(ckpt: Checkpoint) -> bytes:
    """The bytes of ``ckpt`` in the newest format version (see the module docstring)."""
    body = bytes([CURRENT_VERSION]) + pack_value(_payload_v3(ckpt))
    return MAGIC + body[:1] + _CRC.pack(_crc(body)) + body[1:]


def decode(data: bytes) -> Checkpoint:
    """Read checkpoint bytes of any version ever written.

    Raises:
        CheckpointCorruptError: foreign bytes, truncated, checksum mismatch, undecodable.
        CheckpointVersionError: intact bytes of a version newer than this icefloe reads.
    """
    data = bytes(data)
    if data[: len(MAGIC)] != MAGIC[: len(data)] or not data:
        raise CheckpointCorruptError(
            f"not an icefloe checkpoint: expected magic {MAGIC!r}, got {data[:4]!r} "
            f"({len(data)} bytes)")
    if len(data) <= HEADER_SIZE:
        raise CheckpointCorruptError(
            f"truncated checkpoint: {len(data)} bytes, the header alone is {HEADER_SIZE}")
    version = data[len(MAGIC)]
    (stored_crc,) = _CRC.unpack_from(data, len(MAGIC) + 1)
    payload = data[HEADER_SIZE:]
    actual_crc = _crc(bytes([version]) + payload)
    if actual_crc != stored_crc:
        raise CheckpointCorruptError(
            f"checkpoint checksum mismatch (stored {stored_crc:08x}, computed "
            f"{actual_crc:08x} over {len(payload)} payload bytes): truncated or damaged")
    reader = _READERS.get(version)
    if reader is None:
        readable = sorted(_READERS)
        if version > max(readable):
            raise CheckpointVersionError(
                f"checkpoint format version {version} was written by a newer icefloe; "
                f"versions readable here: {readable}; upgrade icefloe to read it")
        raise CheckpointCorruptError(f"unknown checkpoint format version {version}")
    try:
        return reader(unpack_value(payload))
    except Exception as exc:
        raise CheckpointCorruptError(
            f"undecodable checkpoint payload of version {version}: "
            f"{type(exc).__name__}: {exc}") from exc


# -- compatibility with the read being resumed ------------------------------------------


def validate_for(ckpt: Checkpoint, table: str, identity: str, ref: str,
                 fingerprint: str) -> None:
    """Check that ``ckpt`` may resume a read of ``table`` (incarnation ``identity``) on ``ref``.

    A changed plan fingerprint (filter / caseSensitive / splitSize / watermarkColumn) is
    accepted only at a unit boundary with nothing acknowledged beyond it: the ordinals
    and split ids inside a unit depend on those options, unit boundaries do not.

    Raises:
        CheckpointMismatchError: another table, another ref, or changed planning
            options while the position is inside a unit.
        TableReplacedError: same identifier, but the table was dropped and re-created.
    """
    if ckpt.table != table:
        raise CheckpointMismatchError(
            f"the checkpoint belongs to table {ckpt.table!r}, not {table!r}; use a separate "
            "checkpoint location per table")
    if ckpt.table_identity != identity:
        raise TableReplacedError(
            f"table {table!r} was dropped and re-created since the checkpoint was written "
            f"(identity {ckpt.table_identity} is now {identity}); its position means nothing "
            "in the new table. Start from a new checkpoint location, or delete this one")
    if ckpt.ref != ref:
        raise CheckpointMismatchError(
            f"the checkpoint follows ref {ckpt.ref!r} of table {table!r}, not {ref!r}; use a "
            "separate checkpoint location per ref")
    if ckpt.plan_fingerprint != fingerprint:
        at_boundary = ckpt.position.is_unit_complete and not ckpt.acked_beyond \
            and not ckpt.offsets
        if not at_boundary:
            raise CheckpointMismatchError(
                f"planning options (filter, caseSensitive, splitSize, watermarkColumn) "
                f"changed since the "
                f"checkpoint of table {table!r} was written, while it stands at "
                f"{ckpt.position.describe()} with {len(ckpt.acked_beyond)} splits acked "
                f"beyond it and {len(ckpt.offsets)} partly read: split ids would not match. "
                "Restore the previous options until the checkpoint reaches a snapshot "
                "boundary, or start from a new checkpoint location")
        log.info("planning options changed since the checkpoint (%s -> %s); safe at %s",
                 ckpt.plan_fingerprint, fingerprint, ckpt.position.describe())
